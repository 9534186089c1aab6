"""``ablate run SPEC --shard I/N``: one of N machines' share of a study, with no scheduler.

Every machine plans the same units from the same spec and keeps its own share, so the split
must come out the same everywhere: it is computed from the plan only, never from timings
measured on the machine (``estimate.py``'s wall-time model measures, so two machines could
disagree). A unit's cost is its pre-training FLOPs (the cost the worker pool orders its runs
by); a unit travels with all of its fine-tunes, so no shard waits for another's checkpoints.
Units are dealt longest first, each to the shard with the least work so far (FLOPs, then
fine-tunes, then the lowest shard number), which balances runs of unequal budgets and spreads
units with no pre-training (a baseline, a reference scorer) by their fine-tunes.

Shards write into their own folders (merged afterwards with ``ablate merge``) or into one
shared folder. For the shared folder each shard holds the study lock *shared* and its own
shard lock exclusively (``study.shard-I-of-N.lock``): shards run side by side, one shard
cannot run twice, and a whole-study ``ablate run`` or ``ablate clean`` (which hold the study
lock exclusively) waits or stops while any shard runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from electra_ablate.infra.errors import InputError
from electra_ablate.scaleout.workers import unit_cost
from electra_ablate.study.units import Unit

SHARD_PATTERN = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``, numbered from 1 as a researcher types it."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``"2/3"`` -> ``Shard(2, 3)``; anything else is one line naming the problem (exit 2)."""
    match = SHARD_PATTERN.match(text)
    if match is None:
        raise InputError(f"--shard {text!r}: expected I/N, e.g. --shard 1/2")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise InputError(f"--shard {text}: I must be between 1 and N (here N = {count})")
    return Shard(index, count)


def split_units(
    units: list[Unit], count: int, cost: Callable[[Unit], float], finetunes: Callable[[Unit], int]
) -> list[list[int]]:
    """The indices of ``units`` in each of ``count`` shards, each shard in plan order."""
    order = sorted(range(len(units)), key=lambda i: (-cost(units[i]), -finetunes(units[i]), i))
    loads = [(0.0, 0, shard) for shard in range(count)]
    shards: list[list[int]] = [[] for _ in range(count)]
    for i in order:
        flops, jobs, shard = min(loads)
        shards[shard].append(i)
        loads[shard] = (flops + cost(units[i]), jobs + finetunes(units[i]), shard)
    return [sorted(indices) for indices in shards]


def shard_units(units: list[Unit], shard: Shard, finetunes: Callable[[Unit], int]) -> list[Unit]:
    """This shard's units, in plan order."""
    indices = split_units(units, shard.count, unit_cost, finetunes)[shard.index - 1]
    return [units[i] for i in indices]
