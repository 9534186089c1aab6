"""The task files a data bundle carries are each family's to say (``TaskFamily.bundle_folders``):
the bundle writer (``electra_ablate.scaleout.bundle``) knows no family by name, so a GLUE probe's
data travels as GLUE's does, and a family that reads no files adds none."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from electra_ablate.evaluation.glue.task import GLUE, GLUE_TASKS
from electra_ablate.evaluation.task import TaskSettings, get_family, get_task
from electra_ablate.infra.errors import InputError
from electra_ablate.scaleout import bundle as writer
from electra_ablate.spec import parse_spec


def _glue_copy(shared_data: Path, into: Path) -> Path:
    """A GLUE folder holding only RTE, copied from the shared data."""
    source = shared_data / "glue" / "rte"
    target = into / "glue" / "rte"
    target.mkdir(parents=True)
    for path in source.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return into / "glue"


def test_glue_bundles_a_task_folder_where_its_reader_looks(shared_data, tmp_path):
    glue = _glue_copy(shared_data, tmp_path)
    settings = TaskSettings(sources={"glue": str(glue)})
    assert GLUE.bundle_folders(GLUE_TASKS["rte"], settings) == {"glue/rte": glue / "rte"}
    with pytest.raises(InputError, match="data.glue is 'hub'"):
        GLUE.bundle_folders(GLUE_TASKS["rte"], TaskSettings(sources={"glue": "hub"}))


def test_a_glue_probe_carries_its_glue_task_and_a_text_probe_nothing(shared_data, tmp_path):
    glue = _glue_copy(shared_data, tmp_path)
    settings = TaskSettings(sources={"glue": str(glue)})
    probe = get_task("rte_probe")
    assert get_family(probe.family).bundle_folders(probe, settings) == {"glue/rte": glue / "rte"}
    text_probe = get_task("rtd_unigram")
    assert get_family(text_probe.family).bundle_folders(text_probe, settings) == {}


def test_a_probe_only_study_bundles_the_glue_files_its_probe_reads(
    shared_data, tmp_path, monkeypatch
):
    """Before the hook, only tasks of the GLUE family carried files: a study that probed GLUE
    without fine-tuning got a bundle its offline node could not evaluate."""
    glue = _glue_copy(shared_data, tmp_path)
    prepared = tmp_path / "prepared"
    for name in ("tokenizer", "packed"):
        (prepared / name).mkdir(parents=True)
        (prepared / name / "file").write_text(name)
    fake = SimpleNamespace(
        tokenizer_dir=prepared / "tokenizer",
        packed_dir=prepared / "packed",
        summary={"fingerprint": "f"},
    )
    monkeypatch.setattr(writer, "prepare_pretraining", lambda *a, **k: fake)
    spec = parse_spec(
        {
            "name": "probe_only",
            "data": {"corpus": {"paths": ["corpus.txt"]}, "glue": str(glue)},
            "backbone": {"preset": "micro"},
            "budget": {"steps": 2, "steps_of": "electra"},
            "objectives": [{"name": "electra"}],
            "evaluation": {"tasks": ["rte_probe", "rtd_unigram"], "seeds": [0]},
        },
        spec_dir=tmp_path,
    )
    manifest = writer.write_bundle(spec, tmp_path / "bundle")
    assert manifest["tasks"] == {"rte_probe": "glue/rte"}
    for path in (glue / "rte").iterdir():
        assert (tmp_path / "bundle" / "glue" / "rte" / path.name).read_bytes() == path.read_bytes()
    assert json.loads((tmp_path / "bundle" / "bundle.json").read_text())["tasks"] == {
        "rte_probe": "glue/rte"
    }
