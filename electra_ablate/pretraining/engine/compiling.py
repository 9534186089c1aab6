"""``torch.compile`` of a training step's forward, as ``pretrain.compile`` asks.

Every objective's training forward traces to one graph (tests/pretraining/test_compile.py), so
compiling it fuses the step's small element-wise ops and the attention masking into a few
kernels. Random ops (mask selection, BERT's corruption, sampling, dropout) run as in eager mode
(``fallback_random``): a compiled run draws the masks and samples an eager run draws, so
compiling changes only float rounding, never what an objective computes.

``reduce-overhead`` also captures the compiled step in CUDA graphs (``torch.compile``'s mode of
that name): a pre-training batch has static shapes, so the step replays as a few graph launches
instead of ~1,500 kernel launches. Measured on an H200
(docs/performance.md#the-electra-small-pre-training-step-on-one-h200):
ELECTRA-Small at batch 128 ran 80.0 steps/s against 21.3 compiled and 15.4 eager, the card busy
81% of the step instead of 22%, and a whole study ran under it. So ``auto`` picks it on CUDA in a
single process; under DDP (several processes) ``auto`` compiles without CUDA graphs, as
replaying graphs around DDP's gradient hooks has not been measured.

Everything this project compiles goes through ``compiled``, which first points torch's compile
caches at the folder ``ABLATE_COMPILE_CACHE`` names, once per process
(``electra_ablate.infra.compile_cache``): a process that never compiles (``ablate pack``, a
collect, a CPU study) neither imports what the cache's check needs nor writes a line about it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

import torch

from electra_ablate.infra.compile_cache import Activation, activate_from_env

CompileOption = bool | Literal["auto", "reduce-overhead"]
CUDA_GRAPHS = "reduce-overhead"


def use_compile(option: CompileOption, device: torch.device) -> bool:
    """``auto``: on CUDA only (on the CPU it showed no clear gain for its minutes of
    compilation: docs/performance.md#pretraincompile-on-the-cpu-against-both-peers)."""
    if option == "auto":
        return device.type == "cuda"
    return bool(option)


def compile_mode(
    option: CompileOption, device: torch.device, distributed: bool = False
) -> bool | str:
    """What ``option`` runs as here: False (eager), True (compiled) or ``reduce-overhead``
    (compiled and replayed as CUDA graphs). ``auto``: CUDA graphs on a single CUDA process,
    compiled under DDP, eager on the CPU."""
    if option != "auto":
        return option
    if not use_compile(option, device):
        return False
    return True if distributed else CUDA_GRAPHS


def compiled(
    module: torch.nn.Module, mode: CompileOption = True, dynamic: bool = False
) -> Callable:
    """``module`` compiled with eager-mode random numbers; with ``mode`` ``reduce-overhead``,
    replayed as CUDA graphs. Static shapes by default (a pre-training batch never changes
    shape); ``dynamic`` for inputs whose lengths vary from batch to batch (fine-tuning's
    dynamic padding), which then compile once, not once per length."""
    import torch._inductor.config as inductor_config

    use_compile_cache()
    inductor_config.fallback_random = True
    return torch.compile(module, dynamic=dynamic, mode=CUDA_GRAPHS if mode == CUDA_GRAPHS else None)


@functools.cache
def use_compile_cache() -> Activation | None:
    """This process's compile cache, settled at its first compile and never again: the folder
    ``ABLATE_COMPILE_CACHE`` names, or None where it names none."""
    return activate_from_env()
