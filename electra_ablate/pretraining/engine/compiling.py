"""``torch.compile`` of a training step's forward, as ``pretrain.compile`` asks.

Every objective's training forward traces to one graph (tests/pretraining/test_compile.py), so
compiling it fuses the step's small element-wise ops and the attention masking into a few
kernels. Random ops (mask selection, BERT's corruption, sampling, dropout) run as in eager mode
(``fallback_random``): a compiled run draws the masks and samples an eager run draws, so
compiling changes only float rounding, never what an objective computes.

``reduce-overhead`` also captures the compiled step in CUDA graphs (``torch.compile``'s mode of
that name): a pre-training batch has static shapes, so the step replays as one launch instead of
hundreds, which is what keeps a GPU busy at ELECTRA-Small's ~3 ms steps. CUDA only, and not yet
measured on a GPU, so it is an explicit option and never what ``auto`` picks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

CompileOption = bool | Literal["auto", "reduce-overhead"]
CUDA_GRAPHS = "reduce-overhead"


def use_compile(option: CompileOption, device: torch.device) -> bool:
    """``auto``: on CUDA only (on the CPU it showed no clear gain for its minutes of
    compilation: bench/RESULTS.md)."""
    if option == "auto":
        return device.type == "cuda"
    return bool(option)


def compiled(
    module: torch.nn.Module, mode: CompileOption = True, dynamic: bool = False
) -> Callable:
    """``module`` compiled with eager-mode random numbers; with ``mode`` ``reduce-overhead``,
    replayed as CUDA graphs. Static shapes by default (a pre-training batch never changes
    shape); ``dynamic`` for inputs whose lengths vary from batch to batch (fine-tuning's
    dynamic padding), which then compile once, not once per length."""
    import torch._inductor.config as inductor_config

    inductor_config.fallback_random = True
    return torch.compile(module, dynamic=dynamic, mode=CUDA_GRAPHS if mode == CUDA_GRAPHS else None)
