"""PackedBatches: a pure function of (seed, step), exact under resume and rank splitting."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from electra_ablate.data.batches import PackedBatches
from electra_ablate.data.packing import padded_table
from electra_ablate.infra.errors import DataError


def numbered_rows(n: int, length: int = 6) -> pa.Table:
    """Row i is [CLS] (i+10) [SEP] (pad...) with type 1 on its last real token: ids name rows."""
    examples = [([2, i + 10, 3], [0, 0, 1]) for i in range(n)]
    return padded_table(examples, length, pad=0)


def rows_of(batch: dict[str, torch.Tensor]) -> list[int]:
    return (batch["input_ids"][:, 1] - 10).tolist()


def test_batch_tensors():
    batch = PackedBatches(numbered_rows(20), batch_size=4, seed=0).batch(0)
    assert batch["input_ids"].shape == (4, 6) and batch["input_ids"].dtype == torch.int64
    assert batch["token_type_ids"].dtype == torch.int64
    assert batch["token_type_ids"][:, :3].tolist() == [[0, 0, 1]] * 4
    assert torch.equal(batch["attention_mask"], batch["input_ids"] != 0)
    assert batch["attention_mask"].sum(dim=1).tolist() == [3] * 4


def test_same_seed_same_batches_and_resume_is_exact():
    data = numbered_rows(50)
    run = PackedBatches(data, batch_size=8, seed=3)
    uninterrupted = [rows_of(run.batch(step)) for step in range(20)]
    resumed = PackedBatches(data, batch_size=8, seed=3)
    assert [rows_of(resumed.batch(step)) for step in range(12, 20)] == uninterrupted[12:]
    other_seed = PackedBatches(data, batch_size=8, seed=4)
    assert rows_of(other_seed.batch(0)) != uninterrupted[0]


def test_each_epoch_is_a_fresh_permutation_even_across_batch_boundaries():
    run = PackedBatches(numbered_rows(50), batch_size=8, seed=0)
    assert run.steps_per_epoch == 6
    stream = [row for step in range(25) for row in rows_of(run.batch(step))]  # 200 = 4 epochs
    epochs = [stream[i : i + 50] for i in range(0, 200, 50)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(50))
    assert epochs[0] != epochs[1]


def test_ranks_together_see_the_single_process_batch():
    data = numbered_rows(37)
    single = PackedBatches(data, batch_size=8, seed=5)
    ranks = [PackedBatches(data, batch_size=4, seed=5, rank=r, world_size=2) for r in range(2)]
    for step in (0, 1, 4, 9):
        assert rows_of(ranks[0].batch(step)) + rows_of(ranks[1].batch(step)) == rows_of(
            single.batch(step)
        )
    assert ranks[0].steps_per_epoch == single.steps_per_epoch == 4


def test_batch_larger_than_the_dataset_repeats_rows_across_epochs():
    run = PackedBatches(numbered_rows(3), batch_size=7, seed=0)
    rows = rows_of(run.batch(0))
    assert sorted(rows[:3]) == [0, 1, 2] and sorted(rows[3:6]) == [0, 1, 2]
    assert run.steps_per_epoch == 1


def test_bad_layout_and_empty_data():
    with pytest.raises(ValueError, match="rank=2/2"):
        PackedBatches(numbered_rows(4), batch_size=2, seed=0, rank=2, world_size=2)
    empty = padded_table([], 6, pad=0)
    with pytest.raises(DataError, match="empty"):
        PackedBatches(empty, batch_size=2, seed=0)


def test_works_on_a_selected_view():
    data = numbered_rows(10).take([9, 7, 5])
    rows = sorted(rows_of(PackedBatches(data, batch_size=3, seed=0).batch(0)))
    assert rows == [5, 7, 9]
    sliced = numbered_rows(10).slice(4, 3)  # a zero-copy view with an offset (the RTD probe's)
    assert sorted(rows_of(PackedBatches(sliced, batch_size=3, seed=0).batch(0))) == [4, 5, 6]
