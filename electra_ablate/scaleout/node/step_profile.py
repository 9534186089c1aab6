"""What bounds a training step on a GPU: kernels, launches, host syncs and the card's busy time
per step, read from a ``torch.profiler`` trace.

A step the card finishes in a few milliseconds of arithmetic but the host needs tens of
milliseconds to dispatch is bound by the host: the remedy is fewer launches (fusion, CUDA graphs),
not faster kernels. This module profiles a few steps of any step function and sums the trace
into the numbers that tell the two apart:

- ``host_ms``: wall time per step (the device synchronised at both ends of the profiled steps);
- ``device_busy_ms``: the card's time in kernels, copies and sets per step (the union of their
  intervals, so overlapping streams are not counted twice);
- ``device_idle_share``: ``1 - device_busy_ms / host_ms``, the share of the step the card waits
  for the host;
- ``kernels``, ``copies``: device activities per step; ``launches``: runtime and driver calls
  that launch work (``cudaLaunchKernel``, ``cuLaunchKernel``, ``cudaGraphLaunch``, ...), with
  ``launch_ms`` the host time spent in them; ``graph_launches``: CUDA-graph replays;
- ``syncs``: host calls that wait for the device (stream, event and device synchronisation,
  blocking copies back to the host), the calls that stop the host from running ahead;
- ``top_ops``: the operators with the most host time of their own per step.

``bench/pretrain_throughput.py --profile N`` applies it to each of our sides (eager, compiled,
CUDA graphs). The summary works on any Chrome-format trace (``summarize_trace``), so it is tested
on a written one without a GPU (``tests/bench/test_step_profile.py``).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
"""Trace categories of work the card does."""
LAUNCH_CALLS = ("LaunchKernel", "LaunchCooperativeKernel", "GraphLaunch", "cuLaunch")
"""Substrings of the runtime/driver calls that put work on the card."""
SYNC_CALLS = ("Synchronize", "cudaMemcpy", "cuMemcpyDtoH")
"""Substrings of runtime/driver calls that can make the host wait (``cudaMemcpyAsync`` is only a
wait when it copies to pageable host memory; counting it is an upper bound on syncs)."""
TOP_OPS = 12


def union_ms(intervals: list[tuple[float, float]]) -> float:
    """Milliseconds covered by the union of ``(start_us, end_us)`` intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total / 1000.0


def summarize_trace(trace: dict[str, Any], steps: int, host_ms: float) -> dict[str, Any]:
    """Per-step figures from a Chrome-format trace of ``steps`` steps that took ``host_ms``
    each (see the module's docstring for what each means)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") in DEVICE_CATEGORIES]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    launches = [e for e in runtime if any(s in e["name"] for s in LAUNCH_CALLS)]
    syncs = [e for e in runtime if any(s in e["name"] for s in SYNC_CALLS)]
    busy = union_ms([(e["ts"], e["ts"] + e.get("dur", 0)) for e in device])
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    self_us: dict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    for op in ops:
        calls[op["name"]] += 1
        self_us[op["name"]] += op.get("dur", 0)
    # an op's own time: its duration less that of the ops it calls (nested on the same thread)
    for parent, child in nested_pairs(ops):
        self_us[parent["name"]] -= child.get("dur", 0)
    top = sorted(self_us.items(), key=lambda kv: -kv[1])[:TOP_OPS]
    per = 1.0 / steps
    return {
        "steps": steps,
        "host_ms": host_ms,
        "device_busy_ms": busy * per,
        "device_idle_share": max(0.0, 1.0 - busy * per / host_ms) if host_ms > 0 else None,
        "kernels": sum(e.get("cat") == "kernel" for e in device) * per,
        "copies": sum(e.get("cat") != "kernel" for e in device) * per,
        "launches": len(launches) * per,
        "launch_ms": sum(e.get("dur", 0) for e in launches) / 1000.0 * per,
        "graph_launches": sum("GraphLaunch" in e["name"] for e in launches) * per,
        "syncs": len(syncs) * per,
        "sync_calls": dict(Counter(e["name"] for e in syncs)),
        "cpu_ops": sum(calls.values()) * per,
        "top_ops": [
            {"op": name, "calls": calls[name] * per, "self_ms": us / 1000.0 * per}
            for name, us in top
        ],
    }


def nested_pairs(ops: list[dict[str, Any]]) -> list[tuple[dict, dict]]:
    """(parent, child) for each op directly inside another on the same thread."""
    pairs = []
    by_thread: dict[Any, list[dict]] = defaultdict(list)
    for op in ops:
        by_thread[(op.get("pid"), op.get("tid"))].append(op)
    for thread_ops in by_thread.values():
        stack: list[dict] = []
        for op in sorted(thread_ops, key=lambda e: (e["ts"], -e.get("dur", 0))):
            while stack and stack[-1]["ts"] + stack[-1].get("dur", 0) <= op["ts"]:
                stack.pop()
            if stack:
                pairs.append((stack[-1], op))
            stack.append(op)
    return pairs


def profile_steps(step: Callable[[], object], steps: int, device: torch.device) -> dict[str, Any]:
    """Run ``step`` ``steps`` times under ``torch.profiler`` and summarise the trace."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize(device)
    with torch.profiler.profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        host_ms = (time.perf_counter() - start) * 1000.0 / steps
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    return summarize_trace(trace, steps, host_ms)
