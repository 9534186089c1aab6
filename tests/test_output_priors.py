"""Output biases start at the data's priors: MLM heads at the log token frequencies, detection
heads at the base rate of "replaced" over the positions they are scored on, All-Tokens' copy
gate at the base rate of copying. With zero biases a post-LN encoder fits those base rates by
collapsing its token states (see ``Objective.init_output_biases``)."""

from __future__ import annotations

import math

import pytest
import torch

from electra_ablate.config import preset
from electra_ablate.model import MLMHead
from electra_ablate.objective import OutputPriors, build_objective, logit
from electra_ablate.tokens import SpecialTokens

SPECIAL = SpecialTokens()
VOCAB = 120
CFG = preset("micro").with_overrides(vocab_size=VOCAB, max_seq_len=32)


def zipf_counts() -> torch.Tensor:
    counts = 1000.0 / torch.arange(1, VOCAB + 1, dtype=torch.float64)
    counts[list(SPECIAL.ids)] = 500.0  # present in the data, but never a prediction target
    return counts


def build(name: str, **params) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_objective(name, CFG, params, SPECIAL)


def test_priors_are_smoothed_frequencies_of_ordinary_tokens():
    priors = OutputPriors.from_counts(zipf_counts(), SPECIAL)
    probs = priors.token_probs.double()
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-6)
    ordinary = probs[len(SPECIAL.ids) :]
    assert (ordinary[:-1] > ordinary[1:]).all(), "frequency order kept"
    assert (probs[list(SPECIAL.ids)] < ordinary.min()).all(), "special tokens counted out"
    assert math.isclose(priors.unigram_collision, float((probs**2).sum()), rel_tol=1e-6)


@pytest.mark.parametrize("name", ["bert_mlm", "replace_mlm", "all_tokens_mlm", "electra"])
def test_every_mlm_head_starts_at_the_log_frequencies(name):
    objective = build(name)
    priors = OutputPriors.from_counts(zipf_counts(), SPECIAL)
    embeddings_before = {
        id(m): m.weight.clone() for m in objective.modules() if isinstance(m, torch.nn.Embedding)
    }
    objective.init_output_biases(priors)
    heads = [m for m in objective.modules() if isinstance(m, MLMHead)]
    assert heads, "every one of these has an MLM head (main model's or generator's)"
    for head in heads:
        torch.testing.assert_close(head.bias.detach(), priors.log_probs)
    for m in objective.modules():  # weights are untouched: only biases move
        if isinstance(m, torch.nn.Embedding):
            assert torch.equal(m.weight, embeddings_before[id(m)])


def test_detection_heads_start_at_the_replaced_rate_of_the_positions_they_are_scored_on():
    priors = OutputPriors.from_counts(zipf_counts(), SPECIAL)
    differs = 1.0 - priors.unigram_collision
    cases = {"electra": 0.15 * differs, "electra_15": differs, "two_stage": 0.15 * differs}
    for name, rate in cases.items():
        objective = build(name)
        objective.init_output_biases(priors)
        assert math.isclose(objective.disc_head.logit.bias.item(), logit(rate), rel_tol=1e-5)
    all_tokens = build("all_tokens_mlm")
    all_tokens.init_output_biases(priors)
    copy_rate = 1.0 - 0.15 * differs
    assert math.isclose(all_tokens.copy_gate.bias.item(), logit(copy_rate), rel_tol=1e-5)


def test_a_prior_bias_leaves_no_base_rate_to_fit():
    """The gradient on the detection bias is the base-rate error the network would otherwise
    fit by moving every token's state; at the prior it is a small fraction of that at zero."""
    g = torch.Generator().manual_seed(0)
    priors = OutputPriors.from_counts(zipf_counts(), SPECIAL)
    ids = torch.multinomial(priors.token_probs, 16 * 32, replacement=True, generator=g)
    ids = ids.view(16, 32).clamp(min=len(SPECIAL.ids))
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
            objective.init_output_biases(priors)
        torch.manual_seed(1)
        objective(batch).loss.backward()
        grads[start_at_prior] = objective.disc_head.logit.bias.grad.abs().item()
    assert grads[True] < 0.2 * grads[False], grads
