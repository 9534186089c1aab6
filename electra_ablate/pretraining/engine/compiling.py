"""``torch.compile`` of a training step's forward, as ``pretrain.compile`` asks.

Every objective's training forward traces to one graph (tests/pretraining/test_compile.py), so
compiling it fuses the step's small element-wise ops and the attention masking into a few
kernels. Random ops (mask selection, BERT's corruption, sampling, dropout) run as in eager mode
(``fallback_random``): a compiled run draws the masks and samples an eager run draws, so
compiling changes only float rounding, never what an objective computes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

CompileOption = bool | Literal["auto"]


def use_compile(option: CompileOption, device: torch.device) -> bool:
    """``auto``: on CUDA only (on the CPU it showed no clear gain for its minutes of
    compilation: bench/RESULTS.md)."""
    if option == "auto":
        return device.type == "cuda"
    return bool(option)


def compiled(module: torch.nn.Module) -> Callable:
    """``module`` compiled with static shapes and eager-mode random numbers."""
    import torch._inductor.config as inductor_config

    inductor_config.fallback_random = True
    return torch.compile(module, dynamic=False)
