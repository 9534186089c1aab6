"""Features of a frozen kept encoder: shapes, determinism, and a model left as it was."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.backbone.tokens import SpecialTokens
from electra_ablate.evaluation.probes.frozen_features import (
    detection_logits,
    length_batches,
    pooled_features,
    token_features,
)
from electra_ablate.pretraining.objective import KeptModel

SPECIAL = SpecialTokens()
CFG = preset("micro").with_overrides(vocab_size=50, dropout=0.1, attention_dropout=0.1)


@pytest.fixture
def discriminator() -> KeptModel:
    torch.manual_seed(0)
    model = KeptModel(Encoder(CFG), "discriminator", TokenBinaryHead(CFG))
    model.encoder.train()  # as a training loop leaves it: dropout on
    model.head.train()
    return model


def packed(rows: int = 9, length: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, CFG.vocab_size, (rows, length), generator=generator)
    ids[:, 0], ids[:, -1] = SPECIAL.cls, SPECIAL.sep
    ids[::2, 10], ids[::2, 11:] = SPECIAL.sep, SPECIAL.pad
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    return ids, types


def state(model: KeptModel) -> dict[str, torch.Tensor]:
    tensors = {f"e.{k}": v for k, v in model.encoder.state_dict().items()}
    return tensors | {f"h.{k}": v for k, v in model.head.state_dict().items()}


def reference_hidden(model: KeptModel, ids: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
    model.encoder.eval()
    with torch.no_grad():
        hidden = model.encoder(ids, types, ids != SPECIAL.pad)
    model.encoder.train()
    return hidden


def test_token_features_are_the_eval_mode_hidden_states_as_pretraining_runs_them(discriminator):
    ids, types = packed()
    before = {k: v.clone() for k, v in state(discriminator).items()}
    features = token_features(discriminator, ids, types, batch_tokens=64)
    assert features.shape == (9, 16, CFG.hidden_size) and features.dtype == torch.float32
    assert not features.requires_grad
    torch.testing.assert_close(features, reference_hidden(discriminator, ids, types))
    again = token_features(discriminator, ids.numpy(), types.numpy(), batch_tokens=8192)
    torch.testing.assert_close(features, again, rtol=0, atol=1e-5)  # batching changes nothing
    assert torch.equal(features, token_features(discriminator, ids, types, batch_tokens=64))
    assert discriminator.encoder.training and discriminator.head.training  # mode put back
    after = state(discriminator)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in discriminator.encoder.parameters())


def test_token_features_at_chosen_positions_keep_row_major_order(discriminator):
    ids, types = packed()
    where = ids >= 5
    full = token_features(discriminator, ids, types)
    chosen = token_features(discriminator, ids, types, where=where, batch_tokens=32)
    assert chosen.shape == (int(where.sum()), CFG.hidden_size)
    torch.testing.assert_close(chosen, full[where], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="where"):
        token_features(discriminator, ids, types, where=where[:, :3])


def test_padding_is_hidden_from_the_real_tokens(discriminator):
    ids, types = packed()
    features = token_features(discriminator, ids, types)
    alone = token_features(discriminator, ids[:1, :11], types[:1, :11])
    torch.testing.assert_close(features[0, :11], alone[0], rtol=0, atol=1e-5)


def test_detection_logits_are_the_kept_head_on_frozen_features(discriminator):
    ids, types = packed()
    features = token_features(discriminator, ids, types)
    logits = detection_logits(discriminator, features)
    assert logits.shape == ids.shape and not logits.requires_grad
    assert discriminator.head.training  # mode put back
    discriminator.head.eval()
    with torch.no_grad():
        expected = discriminator.head(reference_hidden(discriminator, ids, types))
    torch.testing.assert_close(logits, expected)
    where = ids >= 5
    at = detection_logits(discriminator, token_features(discriminator, ids, types, where=where))
    torch.testing.assert_close(at, expected[where], rtol=0, atol=1e-5)
    mlm = KeptModel(Encoder(CFG), "mlm", MLMHead(CFG, CFG.embedding_size))
    with pytest.raises(ValueError, match="discriminator"):
        detection_logits(mlm, features)


def examples() -> dict[str, list]:
    rng = np.random.default_rng(0)
    rows, types = [], []
    for n in (3, 9, 5, 12, 4, 7, 3):
        rows.append([SPECIAL.cls, *rng.integers(5, CFG.vocab_size, n - 2).tolist(), SPECIAL.sep])
        types.append([0] * n)
    return {"input_ids": rows, "token_type_ids": types, "label": np.arange(len(rows))}


def test_pooled_features_are_cls_and_token_mean_in_example_order(discriminator):
    data = examples()
    pooled = pooled_features(discriminator, data, batch_tokens=24)
    assert pooled.shape == (7, 2 * CFG.hidden_size) and pooled.dtype == torch.float32
    for i, row in enumerate(data["input_ids"]):
        ids = torch.tensor([row])
        hidden = reference_hidden(discriminator, ids, torch.zeros_like(ids))[0]
        expected = torch.cat([hidden[0], hidden.mean(0)])
        torch.testing.assert_close(pooled[i], expected, rtol=0, atol=1e-5)
    assert torch.equal(pooled, pooled_features(discriminator, data, batch_tokens=24))
    assert discriminator.encoder.training
    empty = {"input_ids": [], "token_type_ids": [], "label": []}
    assert pooled_features(discriminator, empty).shape == (0, 2 * CFG.hidden_size)


def test_length_batches_cover_every_example_once_within_the_token_budget():
    lengths = np.array([5, 30, 2, 9, 9, 40, 3, 12, 7])
    batches = length_batches(lengths, batch_tokens=24)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) * lengths[batch].max() <= 24 or len(batch) == 1
    assert [b.tolist() for b in batches if len(b) == 1 and lengths[b[0]] > 24] == [[1], [5]]
    assert length_batches(np.array([], dtype=np.int64), 24) == []
