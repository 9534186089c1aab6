"""Output biases start at zero, as in the original ELECTRA code (docs/design.md): an untrained
generator then samples almost uniformly. Starting them at the data's priors is an opt-in, per
head kind (``pretrain.prior_bias``): MLM heads at the log token frequencies, a generator's head
likewise (which turns it into a unigram sampler at step 0), detection heads and All-Tokens'
copy gate at their base rates."""

from __future__ import annotations

import math

import pytest
import torch
from objective_names import BUILT_IN

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import MLMHead, TokenBinaryHead
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.pretraining.components import sampling_log_probs
from electra_ablate.pretraining.components.losses import distribution_stats
from electra_ablate.pretraining.objective import PRIOR_KINDS, logit
from electra_ablate.pretraining.registry import build_objective, init_output_biases

SPECIAL = SpecialTokens()
VOCAB = 120
CFG = preset("micro").with_overrides(vocab_size=VOCAB, max_seq_len=32)


def zipf_vocab() -> Vocab:
    counts = 1000.0 / torch.arange(1, VOCAB + 1, dtype=torch.float64)
    counts[list(SPECIAL.ids)] = 500.0  # present in the data, but never a prediction target
    return Vocab(counts, SPECIAL)


def build(name: str, **params) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_objective(name, CFG, params, zipf_vocab())


def test_unigram_is_smoothed_frequencies_of_ordinary_tokens_only():
    vocab = zipf_vocab()
    probs = vocab.unigram.double()
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-6)
    ordinary = probs[len(SPECIAL.ids) :]
    assert (ordinary[:-1] > ordinary[1:]).all(), "frequency order kept"
    assert (probs[list(SPECIAL.ids)] == 0).all(), "special tokens are never predicted or sampled"
    assert torch.equal(vocab.ordinary_ids, torch.arange(len(SPECIAL.ids), VOCAB))
    assert math.isclose(vocab.collision(), float((probs**2).sum()), rel_tol=1e-6)
    assert torch.isfinite(vocab.prior_logits()).all()


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_output_bias_starts_at_zero_by_default(name):
    objective = build(name)
    heads = [m for m in objective.modules() if isinstance(m, (MLMHead, TokenBinaryHead))]
    assert heads
    for head in heads:
        bias = head.bias if isinstance(head, MLMHead) else head.logit.bias
        assert not bias.any()


def generator_entropy(objective) -> float:
    generator = objective.generator
    hidden = torch.randn(64, generator.encoder.cfg.hidden_size)
    logits = generator.head(hidden, generator.encoder.embeddings.word.weight)
    entropy, _ = distribution_stats(sampling_log_probs(logits, SPECIAL, 1.0), objective.vocab)
    return float(entropy.mean())


def test_an_untrained_generator_samples_nearly_uniformly_unless_its_prior_is_opted_in():
    """The start of the paper's curriculum: with zero biases the generator's sampling entropy is
    the uniform one; the opt-in generator prior makes it a unigram sampler from step 0."""
    vocab = zipf_vocab()
    ordinary = vocab.ordinary_ids
    uniform = math.log(len(ordinary))
    unigram = float(-(vocab.unigram[ordinary] * vocab.log_unigram[ordinary]).sum())
    assert generator_entropy(build("electra")) > uniform - 0.02
    with_prior = build("electra")
    init_output_biases(with_prior, ["generator"])
    assert generator_entropy(with_prior) < unigram + 0.02
    assert uniform - unigram > 0.3


@pytest.mark.parametrize("name", ["bert_mlm", "replace_mlm", "all_tokens_mlm", "electra"])
def test_opted_in_mlm_heads_start_at_the_log_frequencies(name):
    objective = build(name)
    embeddings_before = {
        id(m): m.weight.clone() for m in objective.modules() if isinstance(m, torch.nn.Embedding)
    }
    assert "mlm" in init_output_biases(objective, PRIOR_KINDS) or name == "electra"
    heads = [m for m in objective.modules() if isinstance(m, MLMHead)]
    for head in heads:
        torch.testing.assert_close(head.bias.detach(), objective.vocab.prior_logits())
    for m in objective.modules():  # weights are untouched: only biases move
        if isinstance(m, torch.nn.Embedding):
            assert torch.equal(m.weight, embeddings_before[id(m)])


def test_prior_kinds_are_chosen_one_by_one():
    objective = build("electra")
    assert init_output_biases(objective, ["detection"]) == ["detection"]
    assert not objective.generator.head.bias.any(), "the generator's head was not asked for"
    assert objective.discriminator.head.logit.bias.item() != 0.0
    objective = build("electra")
    assert init_output_biases(objective, ["generator"]) == ["generator"]
    torch.testing.assert_close(
        objective.generator.head.bias.detach(), objective.vocab.prior_logits()
    )
    assert objective.discriminator.head.logit.bias.item() == 0.0


def test_detection_heads_start_at_the_replaced_rate_of_the_positions_they_are_scored_on():
    differs = 1.0 - zipf_vocab().collision()
    cases = {"electra": 0.15 * differs, "electra_15": differs, "two_stage": 0.15 * differs}
    for name, rate in cases.items():
        objective = build(name)
        init_output_biases(objective, ["detection"])
        bias = objective.discriminator.head.logit.bias.item()
        assert math.isclose(bias, logit(rate), rel_tol=1e-5)
    all_tokens = build("all_tokens_mlm")
    init_output_biases(all_tokens, ["detection"])
    copy_rate = 1.0 - 0.15 * differs
    assert math.isclose(all_tokens.copy_gate.bias.item(), logit(copy_rate), rel_tol=1e-5)


def test_a_prior_bias_leaves_no_base_rate_to_fit():
    """The gradient on the detection bias is the base-rate error the network would otherwise
    fit by moving every token's state; at the prior it is a small fraction of that at zero."""
    g = torch.Generator().manual_seed(0)
    vocab = zipf_vocab()
    ids = torch.multinomial(vocab.unigram, 16 * 32, replacement=True, generator=g).view(16, 32)
    ids[:, 0], ids[:, -1] = SPECIAL.cls, SPECIAL.sep
    batch = {
        "input_ids": ids,
        "token_type_ids": torch.zeros_like(ids),
        "attention_mask": torch.ones_like(ids),
    }
    grads = {}
    for start_at_prior in (False, True):
        objective = build("electra")
        if start_at_prior:
            init_output_biases(objective, PRIOR_KINDS)
        torch.manual_seed(1)
        objective(batch).loss.backward()
        grads[start_at_prior] = objective.discriminator.head.logit.bias.grad.abs().item()
    assert grads[True] < 0.2 * grads[False], grads
