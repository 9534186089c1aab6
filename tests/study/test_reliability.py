"""The small pieces the fault-injection probes (test_faults.py) rest on, fast and in-process: the
trust check of a kept folder and of a metrics log, damaged-record detection, the warnings
capture and the name pattern (the folder lock, manifests and atomic writes are tested with
their modules, in ``tests/infra/``)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from electra_ablate.checkpoints.kept_files import kept_problem, safetensors_problem
from electra_ablate.pretraining.engine.metrics_log import metrics_problem
from electra_ablate.study.records import FINETUNE_KEYS, quarantine, record_problem, warnings_to


def test_a_kept_folder_without_manifest_is_checked_against_its_own_header(tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file({"encoder.w": torch.ones(4, 4)}, str(tmp_path / "kept.safetensors"))
    (tmp_path / "kept.json").write_text(json.dumps({"backbone": {}, "role": "mlm"}))
    assert kept_problem(tmp_path) is None
    data = (tmp_path / "kept.safetensors").read_bytes()
    (tmp_path / "kept.safetensors").write_bytes(data[:-8])
    assert safetensors_problem(tmp_path / "kept.safetensors") == (
        "kept.safetensors is truncated or padded"
    )
    (tmp_path / "kept.safetensors").write_bytes(os.urandom(len(data)))
    assert "header" in kept_problem(tmp_path)
    assert kept_problem(tmp_path / "nowhere") == "missing"


def rows(*pairs: tuple[str, int]) -> str:
    return "".join(
        json.dumps({"split": split, "step": step, "loss": 1.0}) + "\n" for split, step in pairs
    )


@pytest.mark.parametrize(
    ("text", "finished", "problem"),
    [
        (rows(("train", 5), ("train", 10), ("heldout", 10)), True, None),
        (rows(("train", 5), ("train", 10)) + '{"split": "tr', False, None),  # torn by a kill
        (rows(("train", 5), ("train", 10)) + '{"split": "tr', True, "line 3"),
        (rows(("train", 5)) + "}{\n" + rows(("train", 10)), False, "line 2"),
        (rows(("train", 5), ("train", 10), ("train", 5), ("train", 10)), True, "repeat"),
        ("", True, "empty"),
        ("", False, None),
        (rows(("train", 5)), True, "ends at step 5"),
    ],
)
def test_metrics_log_trust(tmp_path, text, finished, problem):
    log = tmp_path / "metrics.jsonl"
    log.write_text(text)
    found = metrics_problem(log, finished, last_step=10)
    assert (found is None) if problem is None else (problem in found), found


def test_a_missing_log_is_a_problem_only_for_a_finished_run(tmp_path):
    assert metrics_problem(tmp_path / "metrics.jsonl", finished=False) is None
    assert metrics_problem(tmp_path / "metrics.jsonl", finished=True) == "it is missing"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"status": "do', "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"status": "done", "job_id": "x", "task": "rte", "seed": 0, "fraction": 1.0}', "metrics"),
        (b"\xff\xfe".decode("latin-1"), "not valid JSON"),
    ],
)
def test_a_damaged_fine_tune_record_is_recognised(tmp_path, text, problem):
    path = tmp_path / "job.json"
    path.write_text(text)
    record, found = record_problem(path, FINETUNE_KEYS)
    assert record is None and problem in found


def test_quarantine_moves_a_file_aside_with_a_utc_stamp(tmp_path, capsys):
    path = tmp_path / "done.json"
    path.write_text("{")
    target = quarantine(path, "it is not valid JSON")
    assert not path.exists() and target.name.startswith("done.json.corrupt-")
    assert target.read_text() == "{"
    assert str(path) in capsys.readouterr().err


def test_library_warnings_go_to_the_units_log(tmp_path, capsys):
    log = tmp_path / "warnings.log"
    with warnings_to(log, "fine-tuning"):
        for _ in range(3):
            warnings.warn("constant input", UserWarning, stacklevel=1)
    assert capsys.readouterr().err == ""
    text = log.read_text()
    assert "fine-tuning: UserWarning: constant input" in text and "[x3]" in text


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("objectives", True),
        ("beta2_0.98", True),
        ("lr_1e-3", True),
        ("..", False),
        ("a..b", False),
        (".hidden", False),
        ("a/b", False),
        ("a\\b", False),
        ("x" * 101, False),
    ],
)
def test_the_name_pattern(name, ok):
    from pydantic import ValidationError

    from electra_ablate.spec import VariantSpec

    if ok:
        assert VariantSpec(label=name).label == name
    else:
        with pytest.raises(ValidationError):
            VariantSpec(label=name)


def test_existing_specs_still_validate():
    from electra_ablate.spec import load_spec

    for spec in sorted(Path(__file__).resolve().parents[2].glob("studies/*.yaml")):
        load_spec(spec)


def test_status_counts_skipped_evaluations_and_reference_scores_apart(tmp_path):
    """A skipped evaluation (the task does not apply to that encoder) is not a failure, and a
    reference scorer's records are not an encoder's: pending counts both evaluation blocks."""
    from electra_ablate.study.survey import survey

    study = tmp_path / "study"
    blocks = {
        "finetune": {"tasks": ["rte"], "seeds": [0, 1], "baseline": True},
        "evaluation": {"tasks": ["probe"], "seeds": [0], "baseline": False},
    }
    (study / "finetune").mkdir(parents=True)
    (study / "study.json").write_text(json.dumps({"name": "s", "spec": blocks}))
    run = study / "pretrain" / "electra-s0-abc"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"checkpoints": [0.5, 1.0]}))
    (run / "done.json").write_text(json.dumps({"status": "done"}))
    (study / "baseline" / "no_pre-training-def" / "kept" / "0").mkdir(parents=True)
    (study / "baseline" / "no_pre-training-def" / "kept" / "0" / "kept.json").write_text("{}")
    records = [
        {"status": "done"},
        {"status": "done"},
        {"status": "skipped", "message": "an MLM encoder has no detection head"},
        {"status": "failed", "message": "boom"},
        {"status": "done", "reference": "majority"},
    ]
    for i, record in enumerate(records):
        (study / "finetune" / f"{i}.json").write_text(json.dumps(record))
    found = survey(study, check_kept=False)
    # the run: (2 rte seeds + 1 probe seed) x 2 checkpoints; the baseline: 2 rte seeds
    assert found.finetunes == {"done": 2, "skipped": 1, "failed": 1, "pending": 4}
    assert found.reference_scores == 1
