"""Finished work whose code changed since it finished (issue 68, group 1): moved aside and redone
by default, kept and named with ``--keep-code-changes``, never copied from a study beside; work
that records no code is kept. In-process, on hand-made study folders (the whole path through the
installed ``ablate`` is ``tests/e2e/test_code_changes.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from electra_ablate.evaluation.run import EvaluationJob
from electra_ablate.infra.layout import StudyLayout
from electra_ablate.report.header import header
from electra_ablate.study.code_change import job_code, settle_code_changes, unit_code
from electra_ablate.study.reuse import finished_record, identical_finished, near_run
from electra_ablate.study.units import RunUnit

RUN_ID = "0123456789ab"


def fake_study(root: Path, jobs: list[EvaluationJob] = (), keep: bool = False) -> SimpleNamespace:
    """What the code check reads of a study: its folder, its units' jobs, the keep option."""
    return SimpleNamespace(
        layout=StudyLayout(root),
        jobs=lambda unit, ready_only=True: list(jobs),
        keep_code_changes=keep,
        code_changes=[],
        code_unrecorded=0,
    )


def bert_unit(study: SimpleNamespace) -> RunUnit:
    entry = SimpleNamespace(name="bert_mlm", display="bert_mlm", params={})
    config = {"objective": "bert_mlm", "seed": 0}
    layout = study.layout.run("bert_mlm", 0, RUN_ID)
    return RunUnit(None, None, entry, 0, None, config, RUN_ID, layout)


def finish(layout, code: dict | None) -> None:
    """A finished run's folder, recording ``code`` (None: made before code was recorded)."""
    layout.root.mkdir(parents=True)
    layout.run_json.write_text(json.dumps({"objective": "bert_mlm", "seed": 0}))
    layout.done.write_text(json.dumps({"status": "done"}))
    if code is not None:
        layout.code.write_text(json.dumps(code))


def edited(code: dict) -> dict:
    """``code`` as it was before its objective's file was edited."""
    return code | {"files": {name: "0" * 12 for name in code["files"]}}


JOB = EvaluationJob("job0", RUN_ID, 1.0, "rte", 0, None)


def record(study, code) -> Path:
    path = study.layout.finetune_record(JOB.job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {"status": "done", "job_id": JOB.job_id, "task": "rte", "seed": 0, "fraction": 1.0}
    done |= {"metrics": {"accuracy": 50.0}, "step": 3, "flops_paper": 1.0, "flops_standard": 1.0}
    path.write_text(json.dumps(done | ({"code": code} if code is not None else {})))
    return path


def test_a_run_whose_code_changed_is_moved_aside_with_its_evaluations(tmp_path):
    study = fake_study(tmp_path / "x", [JOB])
    unit = bert_unit(study)
    finish(unit.layout, edited(unit_code(unit)))
    kept_record = record(study, job_code(unit, JOB))
    said: list[str] = []
    settle_code_changes(study, [unit], say=said.append)
    assert not unit.done and not kept_record.exists()  # redone
    (line,) = said
    assert line.startswith(f"bert_mlm (seed 0): code changed since {study.layout.root} finished (")
    assert "electra_ablate/objectives/bert_mlm.py changed): re-run; the old one moved to " in line
    (moved,) = (study.layout.superseded_dir).glob(f"*/pretrain/{unit.layout.root.name}")
    assert (moved / "done.json").exists()  # never lost
    assert (moved.parent.parent / "finetune" / "job0.json").exists()
    assert study.code_changes == []


def test_with_the_keep_option_it_is_kept_and_the_report_names_it(tmp_path):
    study = fake_study(tmp_path / "x", keep=True)
    unit = bert_unit(study)
    finish(unit.layout, edited(unit_code(unit)))
    said: list[str] = []
    settle_code_changes(study, [unit], say=said.append)
    assert unit.done and not study.layout.superseded_dir.exists()
    assert said[0].endswith(": kept (--keep-code-changes)")
    (change,) = study.code_changes
    assert change["what"] == "electra_ablate/objectives/bert_mlm.py changed"
    recorded = {"name": "x", "spec": {}, "code_changes": study.code_changes}
    text = header(recorded, tmp_path, None, None)
    (row,) = [
        line for line in text.splitlines() if line.startswith("| Code changed since finished |")
    ]
    assert "bert_mlm (seed 0): electra_ablate/objectives/bert_mlm.py changed" in row
    assert "| Code changed since finished |" not in header(
        {"name": "x", "spec": {}}, tmp_path, None, None
    )


def test_work_that_records_no_code_is_kept_and_counted_once(tmp_path):
    study = fake_study(tmp_path / "x", [JOB])
    unit = bert_unit(study)
    finish(unit.layout, None)  # finished before code was recorded (a committed report's run)
    record(study, None)
    said: list[str] = []
    settle_code_changes(study, [unit], say=said.append)
    assert unit.done and study.code_unrecorded == 2
    (line,) = said
    assert line.startswith("2 finished unit(s) or evaluation(s) here record no code")


def test_an_evaluation_whose_task_code_changed_is_redone_alone(tmp_path):
    study = fake_study(tmp_path / "x", [JOB])
    unit = bert_unit(study)
    finish(unit.layout, unit_code(unit))
    code = job_code(unit, JOB)
    path = record(study, code | {"task": edited(code["task"])})
    said: list[str] = []
    settle_code_changes(study, [unit], say=said.append)
    assert unit.done and not path.exists()
    assert said[0].startswith("bert_mlm (seed 0) on rte, seed 0, at 1: code changed since ")
    assert "(task: electra_ablate/evaluation/glue/" in said[0]


@pytest.mark.parametrize("beside", ["same code", "no code recorded", "other code"])
def test_a_study_beside_lends_a_run_or_evaluation_only_made_by_the_code_now(tmp_path, beside):
    here = fake_study(tmp_path / "runs" / "b")
    there = fake_study(tmp_path / "runs" / "a")
    unit = bert_unit(here)
    now = unit_code(unit)
    code = {"same code": now, "no code recorded": None, "other code": edited(now)}[beside]
    finish(bert_unit(there).layout, code)
    expected = job_code(unit, JOB)
    record(there, None if code is None else expected | {"encoder": code})
    lent = [folder.name for folder, _ in identical_finished(here, unit)]
    found = finished_record(here, JOB.job_id, expected)
    if beside == "other code":
        assert lent == [] and found is None
        near = near_run(here, unit).describe()
        assert near == (
            f"not reused from a/{unit.layout.root.name}: the same run, but made by other code "
            "(electra_ablate/objectives/bert_mlm.py changed): trained here"
        )
    else:
        assert lent == ["a"] and found is not None
        assert near_run(here, unit) is None
