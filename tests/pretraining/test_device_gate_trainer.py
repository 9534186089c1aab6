"""The trainer and the device gate (``ABLATE_DEVICE_GATE``): the real ``Trainer`` on the micro
backbone runs its first step without the gate, waits for it (the test holds it) before its
second, and says in its summary when it took it and let it go; a resumed run does the same
from the step it resumes at; without the variable the summary says nothing of a gate. Every
wait is bounded by a timeout; nothing asserts how fast anything ran."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import make_trainer

from electra_ablate.infra.device_gate import ENV, DeviceGate
from electra_ablate.pretraining.engine import Trainer
from electra_ablate.study.execute import GATE_KEYS

TIMEOUT_S = 120.0


def is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


class Watched:
    """A trainer trained in a thread, noting when each step began (epoch seconds) and saying
    when its first step is done."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.began: list[tuple[int, float]] = []
        self.first_done, self.second_began = threading.Event(), threading.Event()
        self.summary: dict[str, Any] | None = None
        self.error: BaseException | None = None
        advance = trainer.advance

        def noted() -> int:
            self.began.append((trainer.step, time.time()))
            if len(self.began) == 2:
                self.second_began.set()
            tokens = advance()
            self.first_done.set()
            return tokens

        trainer.advance = noted  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self._train, daemon=True)

    def _train(self) -> None:
        try:
            self.summary = self.trainer.train()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def finish(self) -> dict[str, Any]:
        self.thread.join(TIMEOUT_S)
        assert not self.thread.is_alive(), "the trainer never finished"
        if self.error is not None:
            raise self.error
        assert self.summary is not None
        return self.summary


def test_the_first_step_runs_without_the_gate_and_the_rest_waits_for_it(tmp_path, monkeypatch):
    path = tmp_path / "device.lock"
    monkeypatch.setenv(ENV, str(path))
    held = DeviceGate(path)
    held.take()  # another run trains on the card
    watched = Watched(make_trainer(tmp_path / "run"))
    watched.thread.start()
    try:
        assert watched.first_done.wait(TIMEOUT_S), "the first step waited for the gate"
        assert not watched.second_began.wait(0.3)  # held: the second step waits for it
    finally:
        held.release()
    summary = watched.finish()
    assert summary["steps"] == watched.trainer.plan.total_steps
    assert [step for step, _ in watched.began] == list(range(summary["steps"]))
    assert watched.began[1][1] >= held.released_at  # trained only once the gate was let go
    assert summary["trained_from"] >= held.released_at and summary["gate_wait_s"] > 0
    assert summary["trained_from"] <= summary["trained_until"]
    assert summary["started_at"] <= watched.began[0][1] <= summary["trained_from"]
    assert summary["first_step_s"] > 0
    assert is_free(path)  # let go at the end of the loop


def test_a_resumed_run_takes_the_gate_after_its_first_step_and_none_is_said_without_it(
    tmp_path, monkeypatch
):
    monkeypatch.delenv(ENV, raising=False)
    partial = make_trainer(tmp_path / "run").train(stop_at=6)
    assert partial["steps"] == 6 and not set(GATE_KEYS) & partial.keys()
    path = tmp_path / "device.lock"
    monkeypatch.setenv(ENV, str(path))
    watched = Watched(make_trainer(tmp_path / "run"))
    watched.thread.start()
    summary = watched.finish()
    assert watched.began[0][0] == 6 and watched.began[0][1] <= summary["trained_from"]
    assert watched.began[1][1] >= summary["trained_from"]
    assert summary["gate_wait_s"] >= 0 and summary["trained_until"] >= summary["trained_from"]
    assert is_free(path)


def test_a_run_that_fails_under_the_gate_lets_it_go(tmp_path, monkeypatch):
    path = tmp_path / "device.lock"
    monkeypatch.setenv(ENV, str(path))
    trainer = make_trainer(tmp_path / "run")
    real_batch = trainer.run.train_batches.batch

    def fail_at_3(step: int):
        if step == 3:
            raise RuntimeError("boom")
        return real_batch(step)

    trainer.run.train_batches.batch = fail_at_3
    with pytest.raises(RuntimeError, match="boom"):
        trainer.train()
    assert is_free(path)
