"""The trackers a spec names (``tracking``) get every pre-training row as ``<split>/<metric>`` and
each kept checkpoint as it trains, through the fail-safe fan-out (``infra.tracking.Tracking``):
a resumed run sends no row twice (the unit's ledger), and a tracker that fails warns once, is off
for the rest of the process, and changes nothing the run writes. In process, with TensorBoard
(the ``tensorboard`` extra) and with a recording stand-in for any tracker."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ablate_cli import needs_extra
from engine_helpers import make_trainer

from electra_ablate.cli import signals_unwind
from electra_ablate.infra.errors import Interrupted
from electra_ablate.infra.tracking import FLOPS_KEY, Ledger, TrackedUnit, Tracking
from electra_ablate.infra.tracking import fanout as fanout_module
from electra_ablate.infra.tracking.fanout import turn_on_again, turned_off
from electra_ablate.pretraining.engine.metrics_log import logged_rows, tracked_metrics
from electra_ablate.study.tracked import evaluation_metrics

BERT = "bert_mlm"  # the quickest objective to train here; the trainer never knows which it runs


@pytest.fixture(autouse=True)
def trackers_on():
    """A tracker turned off by one test stays off for the process: not for the next test."""
    turn_on_again()
    yield
    turn_on_again()


def unit(folder: Path, label: str = "electra") -> TrackedUnit:
    return TrackedUnit("k" + label, "toy", label, {"run_id": "abc", "objective": label}, folder)


def tracking(folder: Path, *names: str, label: str = "electra") -> Tracking:
    tracked = unit(folder, label)
    return Tracking(names, tracked, Ledger(folder / "tracking.json", tracked.key))


class Recorder:
    """A tracker that keeps what it is sent (or raises, from the ``fail_on`` call on)."""

    opened: list[str] = []
    calls: list[tuple[str, Any, int]] = []
    fail_on: str | None = None

    def open(self, tracked: TrackedUnit) -> Recorder:
        Recorder.opened.append(tracked.label)
        if Recorder.fail_on == "open":
            raise ConnectionError("no route to host\nsecond line")
        return self

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        if Recorder.fail_on == "log":
            raise OSError(28, "No space left on device")
        if Recorder.fail_on == "exit":  # a library that ends the process its own way
            raise SystemExit(1)
        if Recorder.fail_on == "interrupt":  # a library's own KeyboardInterrupt
            raise KeyboardInterrupt
        if Recorder.fail_on == "ctrl-c":  # the user's Ctrl-C lands while the library sends
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs here
        Recorder.calls.append(("log", dict(metrics), step))

    def event(self, name: str, step: int, data: Mapping[str, Any]) -> None:
        Recorder.calls.append(("event", (name, dict(data)), step))

    def close(self) -> None:
        Recorder.calls.append(("close", None, -1))


@pytest.fixture
def recorder(monkeypatch):
    Recorder.opened, Recorder.calls, Recorder.fail_on = [], [], None
    monkeypatch.setattr(fanout_module, "open_tracker", lambda name: Recorder())
    return Recorder


def sent_rows(calls) -> list[tuple[str, int]]:
    """(split, step) of every row a tracker was sent, in order."""
    return [
        (next(iter(metrics)).split("/")[0], step)
        for kind, metrics, step in calls
        if kind == "log" and "loss" in {k.split("/", 1)[-1] for k in metrics}
    ]


def test_every_row_and_kept_checkpoint_reaches_a_tracker_once(tmp_path, recorder):
    board = tracking(tmp_path, "recorder")
    trainer = make_trainer(tmp_path, BERT, tracking=board)
    trainer.train()
    board.close()
    rows = list(logged_rows(tmp_path / "metrics.jsonl"))
    assert sent_rows(recorder.calls) == [(row["split"], row["step"]) for row in rows]
    first = next(metrics for kind, metrics, _ in recorder.calls if kind == "log")
    flops = {FLOPS_KEY: rows[0]["flops_paper"]}  # the axis objectives compare at
    assert first == {f"train/{k}": v for k, v in tracked_metrics(rows[0]).items()} | flops
    assert "train/step" not in first and "train/stage" not in first
    events = [(data, step) for kind, data, step in recorder.calls if kind == "event"]
    assert [(name, d["fraction"], step) for (name, d), step in events] == [
        ("kept", fraction, step) for fraction, step in trainer.plan.checkpoints
    ]
    assert recorder.opened == ["electra"] and recorder.calls[-1][0] == "close"


def test_a_resumed_run_sends_no_row_twice(tmp_path, recorder):
    """Killed after step 5 with its last state at step 3, the run logs step 4 again when it
    resumes: the ledger keeps the tracker from getting it twice."""
    first = tracking(tmp_path, "recorder")
    make_trainer(tmp_path, BERT, tracking=first).train(stop_at=5)
    first.close()
    assert [r["step"] for r in logged_rows(tmp_path / "metrics.jsonl")][-1] == 4  # past state 3
    second = tracking(tmp_path, "recorder")
    make_trainer(tmp_path, BERT, tracking=second).train()
    second.close()
    sent = sent_rows(recorder.calls)
    assert len(sent) == len(set(sent))
    rows = list(logged_rows(tmp_path / "metrics.jsonl"))
    assert sorted(sent) == sorted((row["split"], row["step"]) for row in rows)
    ledger = json.loads((tmp_path / "tracking.json").read_text())["kelectra"]["recorder"]
    assert ledger["curves"]["train"] == rows[-1]["step"]


@pytest.mark.parametrize("fail_on", ["open", "log"])
def test_a_failing_tracker_warns_once_and_is_off_without_touching_the_run(
    tmp_path, recorder, capsys, fail_on
):
    reference = make_trainer(tmp_path / "untracked", BERT)
    reference.train()
    recorder.fail_on = fail_on
    board = tracking(tmp_path / "tracked", "recorder")
    make_trainer(tmp_path / "tracked", BERT, tracking=board).train()
    board.close()
    for name in ("metrics.jsonl",):  # what the run writes is the same, byte for byte
        untracked = [
            {k: v for k, v in row.items() if k != "tokens_per_s"}
            for row in logged_rows(tmp_path / "untracked" / name)
        ]
        tracked = [
            {k: v for k, v in row.items() if k != "tokens_per_s"}
            for row in logged_rows(tmp_path / "tracked" / name)
        ]
        assert tracked == untracked
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: tracker recorder failed"), lines
    assert ("no route to host" if fail_on == "open" else "No space left") in lines[0]
    assert lines[0].split("warning: ")[1] in (tmp_path / "tracked" / "warnings.log").read_text()
    assert "recorder" in turned_off()
    # off for the rest of the process: another unit does not even open it
    recorder.opened.clear()
    other = tracking(tmp_path / "other", "recorder", label="bert")
    other.curve("train", 1, {"loss": 1.0})
    other.close()
    assert recorder.opened == [] and capsys.readouterr().err == ""
    assert not (tmp_path / "other" / "tracking.json").exists()


def ledger_curves(folder: Path, tracker: str = "recorder") -> dict:
    """The curves' last steps the ledger says ``tracker`` has ({} when it has none)."""
    try:
        entries = json.loads((folder / "tracking.json").read_text())
    except FileNotFoundError:
        return {}
    return entries.get("kelectra", {}).get(tracker, {}).get("curves", {})


@pytest.mark.parametrize(
    ("fail_on", "named"),
    [("exit", "SystemExit(1)"), ("interrupt", "KeyboardInterrupt")],
)
def test_a_tracker_ending_the_process_is_named_and_its_rows_stay_unsent(
    tmp_path, recorder, capsys, fail_on, named
):
    """Under ``ablate`` (SIGINT raises ``Interrupted``), a ``SystemExit`` or a
    ``KeyboardInterrupt`` out of a tracker's library is that tracker's failure, not the study's
    end: one warning line naming the tracker and what it raised, the tracker off, the row not
    marked sent, so that a later run catches it up."""
    recorder.fail_on = fail_on
    with signals_unwind(), tracking(tmp_path, "recorder") as board:
        board.curve("train", 4, {"loss": 1.0})
        board.curve("train", 8, {"loss": 0.5})  # off: not even tried
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: tracker recorder failed logging"), lines
    assert named in lines[0] and "catches it up" in lines[0]
    assert ledger_curves(tmp_path) == {}
    assert not [call for call in recorder.calls if call[0] == "log"]
    turn_on_again()  # a later run, the library fixed: both rows go, once each
    recorder.fail_on = None
    with tracking(tmp_path, "recorder") as board:
        board.curve("train", 4, {"loss": 1.0})
        board.curve("train", 8, {"loss": 0.5})
    assert [step for kind, _, step in recorder.calls if kind == "log"] == [4, 8]
    assert ledger_curves(tmp_path) == {"train": 8}


def test_a_tracker_exiting_while_its_run_opens_is_named(tmp_path, recorder, capsys, monkeypatch):
    def exits(self: Recorder, tracked: TrackedUnit) -> Recorder:
        raise SystemExit("wandb: cannot start its service")

    monkeypatch.setattr(Recorder, "open", exits)
    with tracking(tmp_path, "recorder") as board:
        board.curve("train", 4, {"loss": 1.0})
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: tracker recorder failed opening its run for electra")
    assert "SystemExit('wandb: cannot start its service')" in line
    assert ledger_curves(tmp_path) == {}


def test_ctrl_c_during_a_send_still_stops_the_study(tmp_path, recorder):
    """A real Ctrl-C is the study's stop, whether ``ablate``'s handler turns it into
    ``Interrupted`` or Python's default into ``KeyboardInterrupt`` (a notebook): it goes
    through, and the send it cut counts as made (the library delivers it when the run closes)."""
    recorder.fail_on = "ctrl-c"
    with pytest.raises(Interrupted), signals_unwind(), tracking(tmp_path, "recorder") as board:
        board.curve("train", 4, {"loss": 1.0})
    assert ledger_curves(tmp_path) == {"train": 4}
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's: a notebook's
    try:
        with pytest.raises(KeyboardInterrupt), tracking(tmp_path, "recorder") as board:
            board.curve("train", 8, {"loss": 0.5})
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ledger_curves(tmp_path) == {"train": 8}
    assert turned_off() == {}


def test_evaluations_go_once_each_at_their_checkpoint_step(tmp_path, recorder):
    record = {
        "job_id": "j1",
        "task": "rte",
        "seed": 1,
        "step": 300,
        "metrics": {"accuracy": 55.0, "wall_seconds": 3.0, "eval_examples": 64},
    }
    assert evaluation_metrics(record) == {"glue/rte/accuracy/seed1": 55.0}
    for _ in range(2):  # a record read back by the next `ablate run`: not sent again
        board = tracking(tmp_path, "recorder")
        board.record("job:j1", 300, evaluation_metrics(record))
        board.close()
    logged = [(metrics, step) for kind, metrics, step in recorder.calls if kind == "log"]
    assert logged == [({"glue/rte/accuracy/seed1": 55.0}, 300)]
    assert recorder.opened == ["electra"]  # the second time, nothing to send: nothing opened


def tensorboard_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    ).EventAccumulator(str(directory))
    accumulator.Reload()
    return {
        tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


@needs_extra("tensorboard", "tensorboard")
def test_tensorboard_gets_every_metric_in_the_units_folder(tmp_path):
    board = tracking(tmp_path, "tensorboard")
    trainer = make_trainer(tmp_path, BERT, tracking=board)
    trainer.train()
    board.record("job:j1", 7, {"glue/rte/accuracy/seed1": 55.0})
    board.close()
    logged = tensorboard_scalars(tmp_path / "tensorboard")
    every = {f"{r['split']}/{k}" for r in logged_rows(tmp_path / "metrics.jsonl") for k in r}
    assert {"train/loss", "train/lr", "heldout/loss"} <= set(logged)
    assert every - {"train/step", "train/stage", "train/split", "heldout/step"} - {
        "heldout/stage",
        "heldout/split",
    } <= set(logged)
    rows = [r for r in logged_rows(tmp_path / "metrics.jsonl") if r["split"] == "train"]
    assert [step for step, _ in logged["train/loss"]] == [r["step"] for r in rows]
    assert [v for _, v in logged["train/loss"]] == pytest.approx([r["loss"] for r in rows])
    assert logged["train/loss"][-1][0] == trainer.plan.total_steps
    assert [step for step, _ in logged["kept/fraction"]] == [s for _, s in trainer.plan.checkpoints]
    assert logged["glue/rte/accuracy/seed1"] == [(7, 55.0)]
