"""The pre-flight check (issue 69): where a task's training cap and epochs leave fewer examples
seen than the fewest at which any committed study's model predicted more than one class, the dry
run and the start of ``ablate run`` say so in one line per task, naming what would lift it,
before compute is spent. The threshold is the task family's fact (``Task.majority_risk``); a
regression task, a probe or a task with no measured threshold has none."""

from __future__ import annotations

from pathlib import Path

import yaml
from ablate_cli import SMOKE

from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.task import TaskSettings, available_tasks, get_task
from electra_ablate.spec import parse_spec
from electra_ablate.study import preflight
from electra_ablate.study.context import Study
from electra_ablate.study.plan import plan_study


def settings(shared_data: Path, caps: dict[str, int], epochs: int = 1) -> TaskSettings:
    recipe = FinetuneRecipe(epochs=epochs, task_epochs={}, train_caps=caps)
    return TaskSettings(sources={"glue": str(shared_data / "glue")}, recipe=recipe)


def test_a_glue_task_capped_under_its_measured_floor_names_the_numbers(shared_data):
    risk = get_task("rte").majority_risk(settings(shared_data, {"rte": 128}))
    assert risk is not None
    assert "128 training examples × 1 epoch = 128 seen" in risk
    assert "1,200" in risk and "reports/objectives" in risk
    # the full training set at the paper's epochs is over every measured floor
    for name in ("cola", "sst2", "mrpc", "rte"):
        assert get_task(name).majority_risk(settings(shared_data, {}, epochs=3)) is None
    assert get_task("mrpc").majority_risk(settings(shared_data, {"mrpc": 256})) is not None


def test_tasks_with_no_majority_class_or_no_measurement_have_no_risk(shared_data):
    tiny = settings(shared_data, {name: 8 for name in available_tasks()})
    assert get_task("stsb").majority_risk(tiny) is None  # regression: no majority class
    for task in available_tasks().values():
        if task.needs != "finetuned_head":  # a probe trains no head on a capped set
            assert task.majority_risk(tiny) is None, task.name


def test_the_lines_name_the_task_and_the_keys_that_lift_it(smoke_env, tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_DATA_DIR", smoke_env["ABLATE_DATA_DIR"])
    raw = yaml.safe_load(SMOKE.read_text())
    raw["finetune"]["tasks"] = ["rte", "stsb", "mrpc"]
    raw["finetune"]["caps"] = {"rte": 128, "stsb": 128, "mrpc": 4000}
    lines = preflight.majority_risks(parse_spec(raw))
    assert len(lines) == 1, lines  # stsb is regression, mrpc's cap exceeds its training set
    (line,) = lines
    assert line.startswith("rte: ")
    assert "raise finetune.caps.rte or finetune.recipe.task_epochs.rte, or drop the task" in line


def test_the_run_warns_only_for_tasks_with_evaluations_still_to_do(
    smoke_env, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("ABLATE_DATA_DIR", smoke_env["ABLATE_DATA_DIR"])
    monkeypatch.setenv("ABLATE_CACHE", smoke_env["ABLATE_CACHE"])
    study = Study(parse_spec(yaml.safe_load(SMOKE.read_text())), SMOKE, tmp_path / "out", "cpu")
    units = plan_study(study).units
    preflight.warn_before_run(study, units)
    (line,) = capsys.readouterr().err.splitlines()  # the smoke study's rte: 128 × 1 epoch
    assert line.startswith("warning: rte: 128 training examples × 1 epoch = 128 seen")
    for unit in units:  # every evaluation recorded as finished: nothing left to spend
        for job in study.jobs(unit, ready_only=False):
            record = study.layout.finetune_record(job.job_id)
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text("{}")
    preflight.warn_before_run(study, units)
    assert capsys.readouterr().err == ""
