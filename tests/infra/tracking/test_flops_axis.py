"""Trackers plot against the pre-training FLOPs too, the axis the study compares objectives at:
at one budget BERT takes more (cheaper) steps than ELECTRA, so their curves only line up by
FLOPs. Every row, kept checkpoint and evaluation reaches a tracker with its FLOPs (the paper's
convention, ``flops_paper``) as ``pretrain_flops``; W&B makes it every metric's step metric
(``define_metric``), TensorBoard and MLflow write each metric again under ``by_flops/`` with the
FLOPs as its integer step. W&B keeps its files in the study's folder unless ``$WANDB_DIR`` says
otherwise. In process: a recording tracker, a stand-in ``wandb`` module (W&B's own runs are read
back in ``tests/e2e/test_tracking_e2e.py``), TensorBoard and MLflow where installed."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ablate_cli import needs_extra
from engine_helpers import make_trainer
from test_fanout import tensorboard_scalars

from electra_ablate.infra.tracking import FLOPS_KEY, STEP_KEY, Ledger, TrackedUnit, Tracking
from electra_ablate.infra.tracking import fanout as fanout_module
from electra_ablate.infra.tracking.fanout import turn_on_again, turned_off
from electra_ablate.infra.tracking.protocol import MAX_STEP
from electra_ablate.pretraining.engine.metrics_log import logged_rows
from electra_ablate.study.tracked import evaluation_metrics


@pytest.fixture(autouse=True)
def trackers_on():
    turn_on_again()
    yield
    turn_on_again()


def tracking(folder: Path, *names: str, label: str = "electra", study: Path | None = None):
    unit = TrackedUnit("k" + label, "toy", label, {"objective": label}, folder, study)
    return Tracking(names, unit, Ledger(folder / "tracking.json", unit.key))


class Recorder:
    """A tracker that keeps what it is sent."""

    calls: list[tuple[str, Any, int]] = []

    def open(self, tracked: TrackedUnit) -> Recorder:
        return self

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        Recorder.calls.append(("log", dict(metrics), step))

    def event(self, name: str, step: int, data: Mapping[str, Any]) -> None:
        Recorder.calls.append(("event", dict(data), step))

    def close(self) -> None:
        pass


@pytest.fixture
def recorder(monkeypatch):
    Recorder.calls = []
    monkeypatch.setattr(fanout_module, "open_tracker", lambda name: Recorder())
    return Recorder


def per_step_flops(folder: Path, objective: str) -> float:
    """The paper-convention FLOPs of one step of ``objective`` as ``make_trainer`` plans it."""
    return make_trainer(folder / "plan", objective, steps_of_budget=1).plan.flops_at(1)["paper"]


def test_two_objectives_at_one_budget_line_up_by_flops_not_by_steps(tmp_path, recorder):
    """BERT and ELECTRA trained to the same FLOPs budget: their kept checkpoints come at
    different steps, but reach the tracker at the same FLOPs (within one step's), and every row
    carries exactly the FLOPs ``metrics.jsonl`` has for it."""
    electra_steps = 6
    electra, bert = per_step_flops(tmp_path, "electra"), per_step_flops(tmp_path, "bert_mlm")
    budget_in_bert_steps = electra_steps * electra / bert
    kept: dict[str, list[tuple[int, float]]] = {}
    for objective, steps in (("electra", electra_steps), ("bert_mlm", budget_in_bert_steps)):
        folder = tmp_path / objective
        Recorder.calls = []
        board = tracking(folder, "recorder", label=objective)
        make_trainer(folder, objective, steps_of_budget=steps, tracking=board).train()
        board.close()
        logs = [(m, step) for kind, m, step in Recorder.calls if kind == "log"]
        rows = list(logged_rows(folder / "metrics.jsonl"))
        assert [(m[FLOPS_KEY], step) for m, step in logs] == [
            (r["flops_paper"], r["step"]) for r in rows
        ]
        events = [(data, step) for kind, data, step in Recorder.calls if kind == "event"]
        assert [data[FLOPS_KEY] for data, _ in events] == [d["flops_paper"] for d, _ in events]
        kept[objective] = [(step, data[FLOPS_KEY]) for data, step in events]
    (e_half, e_full), (b_half, b_full) = kept["electra"], kept["bert_mlm"]
    assert e_full[0] < b_full[0] and e_half[0] < b_half[0]  # steps do not line up
    one_step = max(electra, bert)
    assert abs(e_full[1] - b_full[1]) <= one_step and abs(e_half[1] - b_half[1]) <= one_step


def test_an_evaluation_goes_at_its_checkpoints_flops(tmp_path, recorder):
    record = {"job_id": "j1", "task": "rte", "seed": 0, "step": 30, "flops_paper": 1.5e12}
    record["metrics"] = {"accuracy": 55.0}
    with tracking(tmp_path, "recorder") as board:
        board.record("job:j1", 30, evaluation_metrics(record), record["flops_paper"])
        board.record("job:j2", 0, {"glue/rte/accuracy/seed1": 50.0}, None)  # FLOPs unknown
        board.record("job:j3", 0, {"glue/rte/accuracy/seed2": 50.0}, float("nan"))
    logged = [(m, step) for kind, m, step in recorder.calls if kind == "log"]
    assert logged[0] == ({"glue/rte/accuracy/seed0": 55.0, FLOPS_KEY: 1.5e12}, 30)
    assert [FLOPS_KEY in m for m, _ in logged[1:]] == [False, False]  # never a made-up axis


# ----------------------------------------------------------------------------------- W&B


class FakeWandbRun:
    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs
        folder = Path(kwargs["dir"]) / "wandb" / f"offline-run-x-{kwargs['id']}"
        self.settings = types.SimpleNamespace(mode="offline", sync_dir=str(folder))
        self.config = types.SimpleNamespace(update=lambda *a, **k: None)
        self.defined: list[tuple[str, str | None]] = []
        self.rows: list[dict[str, float]] = []

    def define_metric(self, name: str, step_metric: str | None = None) -> None:
        self.defined.append((name, step_metric))

    def log(self, row: Mapping[str, float]) -> None:
        self.rows.append(dict(row))

    def finish(self) -> None:
        pass


@pytest.fixture
def fake_wandb(monkeypatch):
    """A ``wandb`` module that records what the tracker asks of it, offline."""
    runs: list[FakeWandbRun] = []

    def init(**kwargs: Any) -> FakeWandbRun:
        runs.append(FakeWandbRun(kwargs))
        return runs[-1]

    module = types.ModuleType("wandb")
    module.init = init  # type: ignore[attr-defined]
    module.Settings = lambda **kwargs: kwargs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", module)
    for name in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("WANDB_MODE", "offline")
    return runs


def test_wandb_plots_every_metric_against_the_flops_with_the_step_beside(
    tmp_path, fake_wandb, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the working folder: not where the study's runs go
    study = tmp_path / "runs" / "toy"
    unit = study / "pretrain" / "electra-s0-abc"
    unit.mkdir(parents=True)
    with tracking(unit, "wandb", study=study) as board:
        board.curve("train", 4, {"loss": 1.0}, 2.0e9)
        board.event("kept:1", "kept", 8, {"fraction": 1.0, "flops_paper": 4.0e9}, 4.0e9)
    assert turned_off() == {}
    (run,) = fake_wandb
    assert run.kwargs["dir"] == str(study)  # <study>/wandb/offline-run-*, for `wandb sync`
    assert (FLOPS_KEY, None) in run.defined and (STEP_KEY, None) in run.defined
    assert ("*", FLOPS_KEY) in run.defined and ("*", STEP_KEY) not in run.defined
    assert run.rows == [
        {"train/loss": 1.0, FLOPS_KEY: 2.0e9, STEP_KEY: 4},
        {"kept/fraction": 1.0, "kept/flops_paper": 4.0e9, FLOPS_KEY: 4.0e9, STEP_KEY: 8},
    ]
    assert not (tmp_path / "wandb").exists()


def test_wandb_dir_still_wins_over_the_study_folder(tmp_path, fake_wandb, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    with tracking(tmp_path / "unit", "wandb", study=tmp_path / "study") as board:
        board.curve("train", 1, {"loss": 1.0}, 1.0)
    assert [run.kwargs["dir"] for run in fake_wandb] == [str(tmp_path / "elsewhere")]


# ---------------------------------------------------------------------- TensorBoard, MLflow


@needs_extra("tensorboard", "tensorboard")
def test_tensorboard_writes_each_metric_by_flops_too(tmp_path):
    board = tracking(tmp_path, "tensorboard")
    make_trainer(tmp_path, "bert_mlm", tracking=board).train()
    board.record("job:j1", 7, {"glue/rte/accuracy/seed1": 55.0}, 3.0e9)
    board.close()
    logged = tensorboard_scalars(tmp_path / "tensorboard")
    rows = [r for r in logged_rows(tmp_path / "metrics.jsonl") if r["split"] == "train"]
    assert [s for s, _ in logged["by_flops/train/loss"]] == [round(r["flops_paper"]) for r in rows]
    assert [v for _, v in logged["by_flops/train/loss"]] == pytest.approx([r["loss"] for r in rows])
    assert [s for s, _ in logged["train/loss"]] == [r["step"] for r in rows]  # the step kept
    assert logged["by_flops/glue/rte/accuracy/seed1"] == [(3_000_000_000, 55.0)]
    assert "by_flops/" + FLOPS_KEY not in logged and FLOPS_KEY in logged


def test_flops_past_an_integer_step_fail_the_tracker_in_one_line(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    with tracking(tmp_path, "tensorboard") as board:
        board.curve("train", 1, {"loss": 1.0}, float(MAX_STEP) * 2)
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert line.startswith("warning: tracker tensorboard failed logging") and "FLOPs" in line
    assert "tensorboard" in turned_off()


def test_mlflow_logs_each_metric_by_flops_too(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{tmp_path / 'mlruns'}")
    with tracking(tmp_path, "mlflow") as board:
        board.curve("train", 2, {"loss": 2.0}, 1.0e9)
        board.curve("train", 4, {"loss": 1.0}, 2.0e9)
    assert turned_off() == {}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"file:{tmp_path / 'mlruns'}")
    (run,) = client.search_runs([client.get_experiment_by_name("toy").experiment_id])

    def history(key: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))

    assert history("train/loss") == [(2, 2.0), (4, 1.0)]
    assert history("by_flops/train/loss") == [(1_000_000_000, 2.0), (2_000_000_000, 1.0)]
    assert history(FLOPS_KEY) == [(2, 1.0e9), (4, 2.0e9)]
