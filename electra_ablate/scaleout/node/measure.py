"""Helpers the benchmarks share: synthetic packed batches, the engine's optimizer settings,
step timing, this machine's peak matmul rate, per-process memory high-water marks, and a count
of the host operations a step dispatches."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from electra_ablate.backbone.tokens import SpecialTokens
from electra_ablate.pretraining.config import PretrainSpec


def packed_batch(
    batch_size: int, seq_len: int, vocab_size: int, device: torch.device, seed: int
) -> dict[str, torch.Tensor]:
    """Real-looking packed sequences: uniform non-special ids between [CLS] and [SEP], no padding.

    Throughput does not depend on which ids appear, only on shapes and on padding, and pre-training
    batches are packed full.
    """
    special = SpecialTokens()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(special.ids), vocab_size, (batch_size, seq_len), generator=g)
    ids[:, 0], ids[:, -1] = special.cls, special.sep
    return {
        "input_ids": ids.to(device),
        "token_type_ids": torch.zeros_like(ids).to(device),
        "attention_mask": torch.ones_like(ids).to(device),
    }


def adamw(params: Iterable[nn.Parameter], spec: PretrainSpec) -> torch.optim.AdamW:
    """AdamW as the engine configures it (no decay on 1-D tensors); shared tensors listed once."""
    unique = list({id(p): p for p in params if p.requires_grad}.values())
    groups = [
        {"params": [p for p in unique if p.ndim >= 2], "weight_decay": spec.weight_decay},
        {"params": [p for p in unique if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=spec.learning_rate, betas=spec.adam_betas, eps=spec.adam_eps
    )


def timed(step: Callable[[], object], device: torch.device) -> float:
    """Seconds one call of ``step`` takes, waiting for queued GPU work on both ends."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def peak_matmul_flops(device: torch.device, dtype: torch.dtype, repeats: int = 5) -> float:
    """Best FLOP/s of a large square matmul: the denominator of MFU, measured, not looked up."""
    size = 8192 if device.type == "cuda" else 2048
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    torch.mm(a, b)  # warm-up: thread pool, kernel selection
    best = min(timed(lambda: torch.mm(a, b), device) for _ in range(repeats))
    return 2 * size**3 / best


def peak_rss_mb() -> float:
    """This process's resident-memory high-water mark in MiB.

    On Linux ``VmHWM`` of this process's own address space: ``ru_maxrss`` would also carry the
    parent's high-water mark across fork + exec, which blurs a child's measurement.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024  # bytes vs KiB


def run_json_child(args: list[str]) -> dict[str, float]:
    """Run ``python <args>`` and parse the JSON object it prints last (one line)."""
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


METADATA = frozenset(
    {
        "aten.view",
        "aten._unsafe_view",
        "aten.t",
        "aten.transpose",
        "aten.permute",
        "aten.expand",
        "aten.detach",
        "aten.alias",
        "aten.unsqueeze",
        "aten.squeeze",
        "aten.select",
        "aten.slice",
        "aten.unbind",
        "aten.as_strided",
        "aten._reshape_alias",
    }
)
"""Ops that only make a new view of a tensor: a dispatch on the host, no kernel."""


class OpCounter(TorchDispatchMode):
    """Counts every op that reaches the dispatcher while active, by overload packet."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    def summary(self) -> dict[str, Any]:
        total = sum(self.ops.values())
        metadata = sum(n for op, n in self.ops.items() if op in METADATA)
        return {
            "ops": total,
            "kernel_ops": total - metadata,
            "metadata_ops": metadata,
            "top": dict(self.ops.most_common(12)),
        }


def counted(fn: Any) -> OpCounter:
    """Run ``fn`` once to warm up (lazy state, the optimizer's buffers), then once counted."""
    fn()
    with OpCounter() as counter:
        fn()
    return counter
