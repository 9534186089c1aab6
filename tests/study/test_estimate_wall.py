"""The dry run's estimate against the wall time that follows (issue 69): fixed costs measured and
summed, the load probe's slowdown applied, a range around the middle estimate, GPU-hours on an
accelerator, and ``--no-reuse`` planning every unit as to do."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest
import typer
from ablate_cli import SMOKE
from typer.testing import CliRunner

from electra_ablate.commands import run as run_command
from electra_ablate.spec import load_spec
from electra_ablate.study import estimate
from electra_ablate.study.context import Study
from electra_ablate.study.plan import plan_study
from electra_ablate.study.units import RunUnit

CPU_S, WALL_S = 0.01, 0.04  # a step: its CPU time on one thread, its wall time under load now


@contextmanager
def loaded_stepper(study, unit, clock=time.perf_counter):
    """A step that costs ``CPU_S`` in CPU time and takes ``WALL_S`` on the wall clock (a machine
    whose other jobs stretch it 4x), at any thread count."""
    yield lambda: CPU_S if clock is time.process_time else WALL_S


def fake_job(study, unit, job):
    return estimate.JobTiming(seconds=0.5, startup_s=0.25)


@pytest.fixture
def faked(monkeypatch):
    """Timing without training: the steps and jobs above, a tables probe of 1 s."""
    monkeypatch.setattr(estimate, "stepper", loaded_stepper)
    monkeypatch.setattr(estimate, "time_job", fake_job)
    monkeypatch.setattr(estimate, "tables_probe", lambda rows: 1.0)


@pytest.fixture
def beside(smoke_env, smoke_study, monkeypatch):
    """A study folder beside the session's finished smoke study (not made: a dry run makes
    nothing), with the smoke data's cache in this process's environment."""
    for key in ("ABLATE_DATA_DIR", "ABLATE_CACHE"):
        monkeypatch.setenv(key, smoke_env[key])
    return smoke_study.parent / "fresh"


def test_fixed_costs_sum_what_is_paid_once_per_run_and_per_evaluation():
    fixed = estimate.FixedCosts(
        startup_s=3.0,
        planning_s=1.5,
        once_s=2.0,
        tables_s=0.5,
        per_run_s={"bert_mlm": 1.0, "electra": 2.0},
        per_job_s=0.25,
    )
    assert fixed.once() == 7.0
    # two seeds of bert_mlm and one electra run, eight evaluations
    assert fixed.total(["bert_mlm", "bert_mlm", "electra"], 8) == 7.0 + 4.0 + 2.0
    assert estimate.FixedCosts().total([], 0) == 0.0


def test_the_load_probe_times_steps_in_wall_time_at_the_workers_threads(monkeypatch):
    monkeypatch.setattr(estimate, "stepper", loaded_stepper)
    unit = RunUnit.__new__(RunUnit)  # only its plan's length is read
    object.__setattr__(unit, "plan", type("Plan", (), {"total_steps": 100})())
    probe = estimate.load_probe(None, unit, threads=2)
    assert probe.median == WALL_S and probe.slowest == WALL_S
    assert estimate.time_steps(type("S", (), {"device": "cpu"})(), unit).median == CPU_S


def test_the_middle_estimate_is_the_probes_and_the_range_holds_it(beside, faked):
    spec = load_spec(SMOKE, {})
    study = Study(spec, SMOKE, beside, "cpu", {}, reuse=False)
    units = plan_study(study).units
    fixed = estimate.FixedCosts(startup_s=2.0, planning_s=1.0)
    found = estimate.estimate_study(study, units, 1, fixed=fixed)
    assert found.slowdown == pytest.approx(WALL_S / CPU_S)  # the load's 4x, measured
    bert = next(r for r in found.rows if r["label"] == "bert_mlm")
    steps = next(u for u in units if u.label == "bert_mlm").plan.total_steps
    build = fixed.per_run_s["bert_mlm"]
    assert bert["est_pretrain_min"] * 60 == pytest.approx(WALL_S * steps + build)
    jobs = len(study.jobs(next(u for u in units if u.label == "bert_mlm"), ready_only=False))
    assert bert["est_finetune_min"] * 60 == pytest.approx((0.5 * 4 + 0.25) * jobs)
    assert fixed.tables_s == 1.0 and fixed.per_job_s == 0.25
    low, high = found.wall_range_s
    assert low <= found.wall_s <= high
    assert found.wall_s >= found.fixed_s >= fixed.once() >= 4.0  # fixed costs inside the wall
    assert found.wall_s == pytest.approx(found.serial_s)  # one worker: one after another
    assert found.gpus == 0 and found.gpu_hours is None
    assert "x4.00 for the load" in found.how


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """Test CLI with the run command only."""

    run_command.register(app)
    return app


def test_a_dry_run_with_no_reuse_plans_every_unit_beside_a_finished_study_as_to_do(
    beside, faked, tmp_path
):
    def dry_run(*options: str) -> list[str]:
        args = ["run", str(SMOKE), "--out", str(beside), "--dry-run", "--no-progress", *options]
        result = CliRunner().invoke(cli(), args, env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        return result.stdout.splitlines()

    reused = dry_run()
    # the finished study beside (the status column wraps "reused from smoke" at 80 columns)
    assert sum("reused" in line for line in reused) >= 2
    fresh = dry_run("--no-reuse", "--plan-json", str(tmp_path / "plan.json"))
    assert not any("reused" in line for line in fresh)
    rows = [line for line in fresh if line.startswith("│")]  # the plan's rows (not its last line)
    assert sum("to do" in line for line in rows) == len(plan_units(beside))
    assert not beside.exists()  # a dry run makes nothing


def plan_units(out) -> list:
    spec = load_spec(SMOKE, {})
    return plan_study(Study(spec, SMOKE, out, "cpu", {})).units


def test_on_an_accelerator_the_dry_run_says_gpu_hours_and_on_a_cpu_nothing():
    def found(gpus: int) -> estimate.StudyEstimate:
        return estimate.StudyEstimate(
            rows=[],
            serial_s=7200.0,
            wall_s=3600.0,
            how="",
            wall_range_s=(1800.0, 7200.0),
            gpus=gpus,
        )

    assert estimate.gpu_hours_line(found(2)) == (
        "GPU-hours: about 2.00 (2 GPU(s) x the wall time; range 1.00 to 4.00)"
    )
    assert found(1).gpu_hours == 1.0
    assert estimate.gpu_hours_line(found(0)) is None
    # what the GPU session sizes its rung with keeps its keys; the new ones are added beside
    keys = set(found(1).as_dict())
    assert {"device", "rows", "serial_s", "wall_s", "wall_range_s", "load", "how"} <= keys
    assert {"fixed_s", "slowdown", "gpus", "gpu_hours"} <= keys
