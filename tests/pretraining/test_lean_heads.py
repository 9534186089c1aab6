"""The memory-lean vocabulary computations equal the formulations they replaced (defect 11):
All-Tokens MLM's target log-probabilities and their gradients, the generator's sampling
distribution and its entropy/KL statistics."""

from __future__ import annotations

import electra_ablate.objectives.all_tokens_mlm as all_tokens_module
import pytest
import torch
import torch.nn.functional as F
from engine_helpers import CFG, UNIFORM

from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.conformance import contract_batch, contract_vocab
from electra_ablate.pretraining.components import sampling_log_probs, target_log_softmax
from electra_ablate.pretraining.components.losses import distribution_stats
from electra_ablate.pretraining.registry import build_objective


def old_target_log_softmax(logits, targets):
    return F.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def old_distribution_stats(log_probs, vocab):
    probs = log_probs.exp()
    nonzero = probs > 0
    plogp = torch.where(nonzero, probs * log_probs, 0.0)
    entropy = -plogp.sum(-1)
    cross = torch.where(nonzero, probs * vocab.log_unigram, 0.0).sum(-1)
    return entropy, (plogp.sum(-1) - cross)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_target_log_softmax_equals_log_softmax_then_gather_with_its_gradient(dtype):
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(2, 7, 50, generator=g) * 4).to(dtype)
    targets = torch.randint(0, 50, (2, 7), generator=g)
    upstream = torch.randn(2, 7, generator=g)
    grads = []
    for fn in (old_target_log_softmax, lambda x, t: target_log_softmax(x, t, chunk=3)):
        x = logits.clone().requires_grad_(True)
        out = fn(x, targets)
        (out * upstream).sum().backward()
        grads.append((out.detach(), x.grad))
    assert grads[1][0].dtype == torch.float32 and grads[1][1].dtype == dtype
    torch.testing.assert_close(grads[1][0], grads[0][0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grads[1][1], grads[0][1])


def test_distribution_stats_equal_the_elementwise_formulation():
    vocab = contract_vocab(40)
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, vocab.size, generator=g) * 3
    log_probs = sampling_log_probs(logits, vocab, 1.0)  # special tokens at -inf
    for new, old in zip(
        distribution_stats(log_probs, vocab), old_distribution_stats(log_probs, vocab), strict=True
    ):
        torch.testing.assert_close(new, old)
    unigram = torch.log_softmax(vocab.log_unigram / 0.5, dim=-1)  # the unigram generator's
    for new, old in zip(
        distribution_stats(unigram, vocab), old_distribution_stats(unigram, vocab), strict=True
    ):
        torch.testing.assert_close(new, old)
    with_special = torch.log_softmax(logits, dim=-1)  # mass on tokens the unigram never gives
    new_kl, old_kl = (
        distribution_stats(with_special, vocab)[1],
        old_distribution_stats(with_special, vocab)[1],
    )
    assert torch.equal(new_kl, old_kl) and bool(torch.isinf(new_kl).all())


def test_sampling_log_probs_equal_the_out_of_place_formulation():
    special = SpecialTokens()
    vocab = Vocab.uniform(30, special)
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(2))
    ids = torch.tensor(special.ids)
    for temperature in (1.0, 0.7):
        old = torch.log_softmax(logits.index_fill(-1, ids, float("-inf")) / temperature, dim=-1)
        assert torch.equal(sampling_log_probs(logits, vocab, temperature), old)
        assert torch.equal(sampling_log_probs(logits, special, temperature), old)


def test_all_tokens_mlm_loss_and_gradients_are_unchanged(monkeypatch):
    batch = contract_batch(CFG.vocab_size, batch_size=3, seq_len=24)
    results = []
    for formulation in (old_target_log_softmax, target_log_softmax):
        monkeypatch.setattr(all_tokens_module, "target_log_softmax", formulation)
        torch.manual_seed(0)
        objective = build_objective("all_tokens_mlm", CFG, {}, UNIFORM)
        out = objective(batch)
        out.loss.backward()
        grads = {n: p.grad.clone() for n, p in objective.named_parameters() if p.grad is not None}
        results.append((out.loss.detach(), grads))
    torch.testing.assert_close(results[1][0], results[0][0])
    assert results[1][1].keys() == results[0][1].keys()
    for name, grad in results[0][1].items():
        torch.testing.assert_close(results[1][1][name], grad, msg=name)
