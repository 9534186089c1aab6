"""Numeric precision of a training step: which autocast dtype runs the matrix products.

``auto`` is bf16 autocast on CUDA (what every GPU since Ampere runs at full speed, with fp32's
range: no loss scaling) and fp32 on the CPU, where bf16 matrix products are far slower. ``fp16``
is for GPUs without bf16 (V100, T4): autocast to fp16 and a ``GradScaler`` that keeps small
gradients from flushing to zero. ``fp32`` runs everything in fp32. Under any of them the weights,
the optimizer state, the losses, the sampling distributions and the metrics stay in fp32
(objectives cast logits with ``.float()`` before a softmax), so only the encoders' matrix
products change precision.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from electra_ablate.backbone.config import Precision

__all__ = ["Precision", "autocast", "grad_scaler", "resolve_precision"]

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(precision: str, device: torch.device) -> str:
    """``auto`` -> bf16 on CUDA, fp32 elsewhere; anything else as asked."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    return precision


@contextmanager
def autocast(device: torch.device, precision: str = "auto") -> Iterator[None]:
    """Autocast to the resolved precision's dtype on ``device`` (nothing for fp32)."""
    resolved = resolve_precision(precision, device)
    if resolved == "fp32":
        yield
        return
    with torch.autocast(device.type, dtype=DTYPES[resolved]):
        yield


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler | None:
    """A loss scaler for fp16 (None otherwise: bf16 and fp32 have fp32's range)."""
    if resolve_precision(precision, device) != "fp16":
        return None
    return torch.amp.GradScaler(device.type)
