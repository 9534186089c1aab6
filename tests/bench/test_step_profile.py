"""``electra_ablate.scaleout.node.step_profile``: the per-step figures read from a profiler
trace (what bounds a GPU step), checked on a written trace whose answers are known, and on a
real CPU profile."""

from __future__ import annotations

import pytest
import torch

from electra_ablate.scaleout.node import step_profile


def event(cat: str, name: str, ts: float, dur: float, tid: int = 1) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


TRACE = {
    "traceEvents": [
        # two steps; each: an outer op calling an inner one, a launch and a kernel, a sync
        event("cpu_op", "aten::linear", 0, 100),
        event("cpu_op", "aten::mm", 10, 50),
        event("cuda_runtime", "cudaLaunchKernel", 20, 8),
        event("kernel", "gemm", 30, 40, tid=7),
        event("kernel", "gemm_overlapping", 50, 40, tid=8),  # overlaps: counted once
        event("cuda_runtime", "cudaStreamSynchronize", 150, 5),
        event("cpu_op", "aten::linear", 200, 100),
        event("cpu_op", "aten::mm", 210, 50),
        event("cuda_runtime", "cudaGraphLaunch", 220, 10),
        event("gpu_memcpy", "Memcpy DtoH", 240, 10, tid=7),
        event("cpu_instant_event", "ignored", 0, 0) | {"ph": "i"},
    ]
}


def test_a_written_trace_sums_to_the_figures_it_holds():
    summary = step_profile.summarize_trace(TRACE, steps=2, host_ms=0.5)
    assert summary["kernels"] == 1.0 and summary["copies"] == 0.5
    assert summary["launches"] == 1.0 and summary["graph_launches"] == 0.5
    assert summary["launch_ms"] == pytest.approx((8 + 10) / 1000 / 2)
    assert summary["syncs"] == 0.5
    assert summary["device_busy_ms"] == pytest.approx((60 + 10) / 1000 / 2)  # union, per step
    assert summary["device_idle_share"] == pytest.approx(1 - 0.035 / 0.5)
    assert summary["cpu_ops"] == 2.0
    top = {row["op"]: row for row in summary["top_ops"]}
    assert top["aten::linear"]["self_ms"] == pytest.approx(50 / 1000)  # 100 less its mm's 50
    assert top["aten::mm"]["self_ms"] == pytest.approx(50 / 1000)
    assert top["aten::mm"]["calls"] == 1.0


def test_the_union_of_intervals_counts_overlaps_once():
    assert step_profile.union_ms([(0, 1000), (500, 1500), (3000, 4000)]) == pytest.approx(2.5)
    assert step_profile.union_ms([(0, 1000), (100, 200)]) == pytest.approx(1.0)
    assert step_profile.union_ms([]) == 0.0


def test_a_real_cpu_step_is_profiled():
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 16)

    def step() -> None:
        layer(torch.randn(4, 16)).sum().backward()

    summary = step_profile.profile_steps(step, 3, torch.device("cpu"))
    assert summary["steps"] == 3 and summary["host_ms"] > 0
    assert summary["kernels"] == 0 and summary["device_busy_ms"] == 0  # no device here
    assert summary["cpu_ops"] > 3  # every step dispatches several operators
    assert any(row["op"].startswith("aten::") for row in summary["top_ops"])
