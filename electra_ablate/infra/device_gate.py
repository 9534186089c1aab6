"""A gate that lets one process at a time train on a shared device, while others prepare.

Two pre-trainings replayed as CUDA graphs on one card each run at about half their rate, so
training them side by side ends neither sooner; but a run's first step (compiling, and under
CUDA graphs warming them up) is mostly host work of tens of seconds, which need not leave
the card idle. The gate lets a process compile while another trains and then wait for the card:
``ABLATE_DEVICE_GATE=<lock file>`` names the gate, and the trainer
(``electra_ablate.pretraining.engine.trainer``) runs its first step without it and holds it from
its second step to the end of its loop (a ``torchrun`` run's ranks, each on its own device and
training in step, never take it). The worker pool sets the variable for its processes
when its schedule lets the next pre-training compile meanwhile (``Schedule.compile_ahead``).

The gate is ``fcntl.flock`` on the file: exclusive and blocking (with one run training and one
waiting, as on one card, the waiting one is next), and released by the kernel when its holder
ends in any way (a crash, a ``kill -9``), so a dead trainer never keeps the card. A lock
belongs to an open file description, so two opens of the file exclude each other even within
one process.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

ENV = "ABLATE_DEVICE_GATE"
"""The variable naming the gate's lock file; unset or empty: no gate."""


class DeviceGate:
    """The gate at ``path``: ``take`` blocks until this process holds it, ``release`` frees it.

    ``waited_s`` (seconds ``take`` waited), ``taken_at`` and ``released_at`` (epoch seconds)
    tell a run's compiling, waiting and training apart in its ``done.json``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self.waited_s: float | None = None
        self.taken_at: float | None = None
        self.released_at: float | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> None:
        """Wait until no other process holds the gate, then hold it (at once if held here)."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        begun = time.perf_counter()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self.waited_s = time.perf_counter() - begun
        self.taken_at = time.time()
        self._fd = fd

    def release(self) -> None:
        """Free the gate (closing the only descriptor of the lock releases it)."""
        if self._fd is not None:
            self.released_at = time.time()
            os.close(self._fd)
            self._fd = None


def gate_from_env() -> DeviceGate | None:
    """The gate ``ABLATE_DEVICE_GATE`` names, or None where it names none."""
    path = os.environ.get(ENV, "")
    return DeviceGate(Path(path)) if path else None
