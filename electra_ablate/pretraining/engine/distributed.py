"""Data-parallel training under ``torchrun``: DistributedDataParallel, one process otherwise.

Each rank trains on its slice of the same global batch a single process would see
(``PackedBatches`` is a pure function of seed, step and rank), DDP averages the gradients while
backward runs, and rank 0 alone writes results. CPU uses gloo, GPUs nccl.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from electra_ablate.pretraining.objective import Objective


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str = "gloo"

    @classmethod
    def from_env(cls, device: torch.device) -> Distributed:
        """Join the process group ``torchrun`` describes in the environment (if any)."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1:
            return cls()
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if not dist.is_initialized():
            if device.type == "cuda":
                torch.cuda.set_device(local_rank)
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), world_size, local_rank, dist.get_backend())

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self, device: torch.device) -> torch.device:
        """This rank's device: its own GPU under torchrun."""
        if device.type == "cuda" and self.world_size > 1:
            return torch.device("cuda", self.local_rank)
        return device

    def wrap(self, objective: Objective, device: torch.device) -> nn.Module:
        """``objective`` wrapped in DDP, or itself in one process. Wrap again whenever the set
        of trainable parameters changes (a stage switch): DDP registers them when it is built.

        ``find_unused_parameters`` only where the objective says its stage leaves some trainable
        parameter out of a step (adversarial's baseline head during MLE warm-up): DDP must not
        wait for those, and searching for them costs a graph traversal every step.
        """
        if self.world_size == 1:
            return objective
        return nn.parallel.DistributedDataParallel(
            objective,
            device_ids=[device.index] if device.type == "cuda" else None,
            broadcast_buffers=False,  # no running statistics; vocabulary buffers never change
            find_unused_parameters=objective.leaves_parameters_unused(),
        )

    def mean(self, values: dict[str, float]) -> dict[str, float]:
        """The mean of each value over the ranks (every rank must call this, same keys)."""
        if self.world_size == 1 or not values:
            return values
        keys = sorted(values)
        on = torch.device("cuda", self.local_rank) if self.backend == "nccl" else None
        tensor = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=on)
        dist.all_reduce(tensor)
        return {k: float(v) / self.world_size for k, v in zip(keys, tensor.tolist(), strict=True)}

    def gather(self, obj: Any) -> list[Any]:
        if self.world_size == 1:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def close(self) -> None:
        """Leave the process group (torchrun expects every rank to), after every rank has got
        here and after the DDP wrappers of finished runs are freed. A wrapper holds the group
        through its reducer, and a trainer usually sits in a reference cycle, so without the
        collection the gloo group outlived ``destroy_process_group`` and was torn down during
        interpreter shutdown, where it sometimes aborted the rank ("terminate called without
        an active exception", seen under a loaded test suite)."""
        if self.world_size > 1 and dist.is_initialized():
            dist.barrier()
            gc.collect()
            dist.destroy_process_group()
