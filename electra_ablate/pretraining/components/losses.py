"""Masked losses and the statistics that say whether a model has learnt anything yet.

Accuracy and precision/recall at a threshold cannot tell "learnt nothing" from "ranks weakly",
so every objective also logs what its loss gained over the best context-free predictor:
``*_nats_learnt`` is the frequency-only (unigram) loss minus the model's MLM loss, or the entropy
of the batch's replaced/original labels minus the detection loss. Zero means "at the prior";
the discriminator's ROC-AUC (0.5 = no ranking) shows learning that a threshold hides.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from electra_ablate.backbone.tokens import Vocab


def masked_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    weights = weights.to(values.dtype)
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def masked_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Mean CE over the weighted slots of [B, K, V] logits (unused slots weigh 0)."""
    ce = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    return masked_mean(ce.view_as(targets), weights)


class _TargetLogSoftmax(torch.autograd.Function):
    """log softmax(logits)[target] per row, keeping no [rows, V] tensor but the logits.

    ``F.log_softmax(...).gather(...)`` saves the log-probabilities for backward and its gather
    scatters a second [rows, V] gradient; here the forward takes the log-sum-exp in fp32 row
    chunks, and the backward writes the one gradient (onehot - softmax) * grad in place.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
        lse = torch.cat([torch.logsumexp(c.float(), dim=-1) for c in logits.split(chunk)])
        ctx.save_for_backward(logits, targets, lse)
        return logits.gather(-1, targets[:, None]).squeeze(-1).float() - lse

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        logits, targets, lse = ctx.saved_tensors
        grad_logits = logits.float().sub(lse[:, None]).exp_().mul_(-grad[:, None])
        grad_logits.scatter_add_(-1, targets[:, None], grad[:, None])
        return grad_logits.to(logits.dtype), None, None


def target_log_softmax(
    logits: torch.Tensor, targets: torch.Tensor, chunk: int = 4096
) -> torch.Tensor:
    """``F.log_softmax(logits.float(), -1).gather(-1, targets)`` for logits [..., V] and
    targets [...], computed in fp32 with about half the peak memory (``_TargetLogSoftmax``)."""
    flat = _TargetLogSoftmax.apply(logits.flatten(0, -2), targets.flatten(), chunk)
    return flat.view(targets.shape)


def masked_accuracy(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    return masked_mean((logits.argmax(-1) == targets).float(), weights).detach()


@torch.no_grad()
def mlm_metrics(
    prefix: str,
    logits: torch.Tensor,
    targets: torch.Tensor,
    weights: torch.Tensor,
    loss: torch.Tensor,
    vocab: Vocab,
) -> dict[str, torch.Tensor]:
    """``<prefix>_loss``, ``_acc`` and ``_nats_learnt`` (unigram loss minus the model's)."""
    valid = weights.bool()  # unused slots may hold special tokens, which have no unigram loss
    unigram_loss = masked_mean(torch.where(valid, vocab.unigram_nats(targets), 0.0), valid)
    return {
        f"{prefix}_loss": loss.detach(),
        f"{prefix}_acc": masked_accuracy(logits, targets, weights),
        f"{prefix}_nats_learnt": unigram_loss - loss.detach(),
    }


def binary_entropy(p: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of a Bernoulli(p): the loss of the best constant predictor."""
    p = p.double()
    return (torch.special.entr(p) + torch.special.entr(1 - p)).float()


@torch.no_grad()
def roc_auc(scores: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """P(a random positive scores above a random negative), ties counting half (Mann-Whitney).

    0.5 means no ranking at all. A batch with only one class has no ranking to measure and
    also gives 0.5.

    Computed with static shapes and no host sync (a GPU step never waits for it, and it
    compiles into the step): every position is sorted, the unweighted ones as +inf so they
    sort last, and each group of tied scores gets the average rank of its weighted members.
    """
    keep = weights.bool().flatten()
    s = torch.where(keep, scores.flatten().float(), float("inf"))
    y = (labels.bool().flatten() & keep).double()
    n_pos = y.sum()
    n_neg = keep.double().sum() - n_pos
    sorted_scores, order = torch.sort(s)
    new_group = torch.ones_like(keep)
    new_group[1:] = sorted_scores[1:] != sorted_scores[:-1]
    group = new_group.long().cumsum(0) - 1  # tied scores share a group, groups in score order
    members = torch.zeros_like(s, dtype=torch.double).scatter_add_(0, group, keep[order].double())
    average_rank = members.cumsum(0) - (members - 1) / 2  # 1-based, tied averaged
    rank_sum = (average_rank[group] * y[order]).sum()
    auc = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg).clamp(min=1)
    return torch.where((n_pos > 0) & (n_neg > 0), auc, 0.5).float()


@torch.no_grad()
def distribution_stats(log_probs: torch.Tensor, vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Entropy of each sampling distribution in ``log_probs`` [..., V] and its KL divergence
    from the unigram distribution, in nats. A generator at the unigram solution has KL 0 and
    the unigram entropy; an untrained one is near-uniform (high entropy, KL > 0); a collapsed
    one has low entropy.

    Two [..., V] tensors live at once (the probabilities and p log p, zeroed in place where
    p = 0); the cross term is a product with the [V] log-unigram vector, whose special tokens
    (log 0) count only where a distribution gives them mass (then it is -inf, as p log 0 is)."""
    probs = log_probs.exp()
    impossible = probs == 0
    plogp = (probs * log_probs).masked_fill_(impossible, 0.0)
    entropy = -plogp.sum(-1)
    del plogp, impossible
    unseen = torch.isinf(vocab.log_unigram)
    cross = probs @ vocab.log_unigram.masked_fill(unseen, 0.0)
    cross = torch.where(probs @ unseen.to(probs.dtype) > 0, float("-inf"), cross)
    return entropy, (-entropy - cross)
