"""The device gate (``electra_ablate.infra.device_gate``): one holder at a time, the next waiting
until it lets go or dies, and the variable that names it. Holders are two opens of one file in
this process (a flock belongs to an open file description) or a child process; every wait is
bounded by a timeout, and nothing asserts how fast anything ran."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from electra_ablate.infra.device_gate import ENV, DeviceGate, gate_from_env

TIMEOUT_S = 60.0


def take_in_thread(gate: DeviceGate) -> tuple[threading.Thread, threading.Event]:
    taken = threading.Event()

    def take() -> None:
        gate.take()
        taken.set()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread, taken


def test_a_second_holder_waits_until_the_first_lets_go(tmp_path):
    path = tmp_path / "card" / "device.lock"  # its folder is made
    first, second = DeviceGate(path), DeviceGate(path)
    first.take()
    assert first.held and first.waited_s is not None and first.taken_at is not None
    thread, taken = take_in_thread(second)
    assert not taken.wait(0.3)  # held: it waits (however long it is given)
    assert not second.held
    first.release()
    assert first.released_at is not None and not first.held
    assert taken.wait(TIMEOUT_S), "the gate was let go but the waiter never took it"
    thread.join(TIMEOUT_S)
    assert second.held and second.taken_at >= first.released_at
    assert second.waited_s > 0
    second.release()
    second.release()  # twice: nothing more
    first.take()  # free again: taken at once
    first.release()


@pytest.mark.slow  # process: a holder process dies
def test_a_holder_that_dies_lets_the_gate_go(tmp_path):
    path = tmp_path / "device.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from electra_ablate.infra.device_gate import DeviceGate\n"
            f"DeviceGate({str(path)!r}).take()\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        gate = DeviceGate(path)
        thread, taken = take_in_thread(gate)
        assert not taken.wait(0.3)
        holder.kill()  # never releases: the kernel does
        holder.wait(TIMEOUT_S)
        assert taken.wait(TIMEOUT_S), "a dead holder kept the gate"
        thread.join(TIMEOUT_S)
        gate.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_the_variable_names_the_gate_and_unset_or_empty_names_none(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    assert gate_from_env() is None
    monkeypatch.setenv(ENV, "")
    assert gate_from_env() is None
    monkeypatch.setenv(ENV, str(tmp_path / "device.lock"))
    gate = gate_from_env()
    assert gate is not None and gate.path == Path(tmp_path / "device.lock") and not gate.held
