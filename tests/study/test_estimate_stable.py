"""The dry-run's estimate is stable (issue 43): steps are timed on one thread and the workers'
threads enter through a speed-up kept within [1, threads], so a busy core that stalls every
multi-thread step cannot multiply the estimate; ``--dry-run`` says what it is doing meanwhile,
and prints its plan with whole names at 80 columns, a range and the load it was measured at."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch
import yaml
from ablate_cli import SMOKE, ablate

from electra_ablate.study import estimate


def fake_stepper(one_thread_s: float, many_threads_s: float):
    """A ``stepper`` whose step takes ``one_thread_s`` on one thread, else ``many_threads_s``."""

    @contextmanager
    def stepper(study, unit, clock=None):
        yield lambda: one_thread_s if torch.get_num_threads() == 1 else many_threads_s

    return stepper


UNIT = SimpleNamespace(plan=SimpleNamespace(total_steps=1000))
CPU_STUDY = SimpleNamespace(device="cpu")


def test_on_a_cpu_steps_are_timed_in_cpu_time_which_waiting_for_a_core_does_not_add_to():
    clock = estimate.compute_clock(CPU_STUDY)
    assert clock is time.process_time
    start = clock()
    time.sleep(0.2)  # what a time-sliced step loses while another process has the core
    assert clock() - start < 0.05
    assert estimate.compute_clock(SimpleNamespace(device="cuda")) is time.perf_counter


def test_a_busy_core_that_stalls_threaded_steps_does_not_multiply_the_estimate(monkeypatch):
    # two threads, one of them fighting another process for its core: 20x slower per step
    monkeypatch.setattr(estimate, "stepper", fake_stepper(0.1, 2.0))
    assert estimate.thread_speedup(None, UNIT, threads=2) == 1.0
    assert estimate.time_steps(CPU_STUDY, UNIT).median == 0.1


def test_the_speedup_is_measured_and_never_beyond_the_thread_count(monkeypatch):
    monkeypatch.setattr(estimate, "stepper", fake_stepper(0.1, 0.0625))
    assert estimate.thread_speedup(None, UNIT, threads=2) == pytest.approx(1.6)
    monkeypatch.setattr(estimate, "stepper", fake_stepper(0.1, 0.001))
    assert estimate.thread_speedup(None, UNIT, threads=2) == 2.0
    assert estimate.thread_speedup(None, UNIT, threads=1) == 1.0


def test_timing_never_steps_past_the_plans_end(monkeypatch):
    calls = []

    @contextmanager
    def stepper(study, unit, clock=None):
        yield lambda: calls.append(1) or 0.1

    monkeypatch.setattr(estimate, "stepper", stepper)
    short = SimpleNamespace(plan=SimpleNamespace(total_steps=3))
    estimate.time_steps(CPU_STUDY, short)
    assert len(calls) == 2  # + the warm-up step the real stepper takes: 3
    calls.clear()
    estimate.thread_speedup(None, short, threads=2)
    assert len(calls) == 2


@pytest.mark.slow
def test_dry_run_shows_progress_and_a_whole_plan_at_80_columns(smoke_env, tmp_path):
    spec = yaml.safe_load(SMOKE.read_text())
    spec["budget"] = {"steps": 8, "steps_of": "my_electra", "checkpoints": [1.0]}
    spec["objectives"] = [
        {"name": "bert_mlm"},
        {"name": "electra", "label": "my_electra"},
    ]
    spec["finetune"] = {"tasks": ["rte"], "seeds": [0], "caps": {"rte": 32}}
    # a small corpus: the data is prepared for the status line to name, not for its size
    spec["data"]["corpus"]["max_documents"] = 400
    spec["data"]["tokenizer"]["vocab_size"] = 2048
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec))
    # a data cache of its own: preparing the data is the slow step the status line must name
    env = {**smoke_env, "COLUMNS": "80", "ABLATE_CACHE": str(tmp_path / "cache")}
    result = ablate("run", path, "--dry-run", "--out", tmp_path / "out", env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    # piped: plain lines on stderr say what it is doing before the plan appears
    assert "preparing the data" in result.stderr
    assert "timing bert_mlm's steps (1 of 2 objectives)" in result.stderr
    assert "timing rte" in result.stderr
    out = result.stdout
    assert "…" not in out and max(len(line) for line in out.splitlines()[:-1]) <= 80
    for name in ("my_electra", "bert_mlm", "electra", "no pre-training"):
        assert name in out
    last = out.splitlines()[-1]
    assert last.startswith("still to do: about ") and " (range " in last
    assert f"on {os.cpu_count()} cores" in last
    assert not (tmp_path / "out" / "pretrain").exists()
