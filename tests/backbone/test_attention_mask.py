"""A batch without padding reaches SDPA with no mask (so a GPU may run its flash kernel), decided
on the host by the collate; a padded batch still masks its padding, with the same numbers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch
from engine_helpers import CFG, UNIFORM

from electra_ablate.backbone import model as model_module
from electra_ablate.data.batches import PackedBatches
from electra_ablate.data.packing import padded_table
from electra_ablate.evaluation.finetune.batching import Examples, collate
from electra_ablate.pretraining.registry import build_objective


def packed(lengths: list[int], seq_len: int = 12) -> pa.Table:
    examples = [([2, *range(10, 10 + n - 2), 3], [0] * n) for n in lengths]
    return padded_table(examples, seq_len, pad=0)


def sdpa_masks(monkeypatch, objective, batch) -> list[torch.Tensor | None]:
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, **kwargs):
        seen.append(attn_mask)
        return sdpa(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(model_module.F, "scaled_dot_product_attention", recording)
    objective(batch)
    return seen


def test_a_full_batch_reaches_sdpa_without_a_mask(monkeypatch):
    full = PackedBatches(packed([12] * 8), batch_size=4, seed=0).batch(0)
    assert "attention_mask" not in full
    objective = build_objective("electra", CFG.with_overrides(max_seq_len=12), {}, UNIFORM)
    masks = sdpa_masks(monkeypatch, objective, full)
    assert masks and all(m is None for m in masks)  # the generator's passes and the discriminator's


def test_a_padded_batch_still_masks_its_padding(monkeypatch):
    padded = PackedBatches(packed([12, 12, 12, 7] * 2), batch_size=8, seed=0).batch(0)
    assert torch.equal(padded["attention_mask"], padded["input_ids"] != 0)
    objective = build_objective("electra", CFG.with_overrides(max_seq_len=12), {}, UNIFORM)
    masks = sdpa_masks(monkeypatch, objective, padded)
    assert masks and all(m is not None and not bool(m.all()) for m in masks)


def test_no_mask_and_an_all_true_mask_give_the_same_encoding():
    torch.manual_seed(0)
    encoder = model_module.Encoder(CFG.with_overrides(dropout=0.0, attention_dropout=0.0)).eval()
    ids = torch.randint(5, CFG.vocab_size, (3, 16))
    with torch.no_grad():
        unmasked = encoder(ids)
        masked = encoder(ids, attention_mask=torch.ones_like(ids, dtype=torch.bool))
    torch.testing.assert_close(unmasked, masked)


def test_fine_tuning_batches_carry_a_mask_only_when_padded():
    examples = Examples(
        input_ids=[[2, 10, 3], [2, 11, 12, 3], [2, 13, 14, 3]],
        token_type_ids=[[0] * 3, [0] * 4, [0] * 4],
        labels=np.array([0, 1, 0]),
    )
    assert "attention_mask" not in collate(examples, np.array([1, 2]))
    mixed = collate(examples, np.array([0, 1]))
    assert mixed["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
