"""Batches of packed sequences as a pure function of (seed, step).

The stream of rows is an endless run of epochs, each a fresh permutation of the dataset seeded
by (seed, epoch). Step ``s`` owns the global rows ``[s*g, (s+1)*g)`` of that stream, with
``g = batch_size * world_size``, and rank ``r`` takes its ``batch_size`` slice. Nothing depends
on what ran before, so a resumed run sees exactly the rows of an uninterrupted one, and two
ranks of batch ``b`` together see exactly the single-process batch ``2b``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from electra_ablate.infra.errors import DataError


def column_matrix(table: pa.Table, name: str) -> np.ndarray:
    """A fixed-length list column as an [N, L] array, zero-copy from the memory-mapped Arrow."""
    column = table.column(name).combine_chunks()
    if not pa.types.is_fixed_size_list(column.type):
        raise DataError(f"column {name!r} is not a fixed-length packed column ({column.type})")
    return (
        column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), column.type.list_size)
    )


class PackedBatches:
    def __init__(
        self,
        dataset: pa.Table,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size <= 0 or not 0 <= rank < world_size:
            raise ValueError(f"bad batch layout: batch_size={batch_size} rank={rank}/{world_size}")
        self.input_ids = column_matrix(dataset, "input_ids")
        self.token_type_ids = column_matrix(dataset, "token_type_ids")
        if len(self.input_ids) == 0:
            raise DataError("the packed pre-training dataset is empty")
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.global_batch = batch_size * world_size
        self._permutations: dict[int, np.ndarray] = {}

    @property
    def num_rows(self) -> int:
        return len(self.input_ids)

    @property
    def steps_per_epoch(self) -> int:
        """Whole global batches in one pass over the data (at least 1)."""
        return max(1, self.num_rows // self.global_batch)

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        """This rank's rows of global batch ``step``: int64 ids and type ids, and a bool mask
        [B, L] when a row is padded (none when every row is full, so attention needs none)."""
        start = step * self.global_batch + self.rank * self.batch_size
        positions = np.arange(start, start + self.batch_size, dtype=np.int64)
        epochs, offsets = np.divmod(positions, self.num_rows)
        rows = np.empty_like(positions)
        for epoch in np.unique(epochs):
            here = epochs == epoch
            rows[here] = self._permutation(int(epoch))[offsets[here]]
        ids = self.input_ids[rows].astype(np.int64)
        batch = {
            "input_ids": torch.from_numpy(ids),
            "token_type_ids": torch.from_numpy(self.token_type_ids[rows].astype(np.int64)),
        }
        if (ids == 0).any():  # decided here, on the host: no mask means no padding (model.py)
            batch["attention_mask"] = batch["input_ids"] != 0
        return batch

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._permutations:
            if len(self._permutations) >= 2:  # steps move forward: keep this epoch and the next
                self._permutations.pop(min(self._permutations))
            rng = np.random.default_rng([self.seed, epoch])
            self._permutations[epoch] = rng.permutation(self.num_rows)
        return self._permutations[epoch]
