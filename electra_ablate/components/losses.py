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

from electra_ablate.tokens import Vocab


def masked_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    weights = weights.to(values.dtype)
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def masked_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Mean CE over the weighted slots of [B, K, V] logits (unused slots weigh 0)."""
    ce = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    return masked_mean(ce.view_as(targets), weights)


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
    """
    keep = weights.bool()
    s, y = scores[keep].float(), labels[keep].bool()
    n_pos = y.sum().double()
    n_neg = y.numel() - n_pos
    if n_pos == 0 or n_neg == 0:
        return torch.tensor(0.5, device=scores.device)
    _, inverse, counts = torch.unique(s, return_inverse=True, return_counts=True)
    average_rank = counts.cumsum(0).double() - (counts.double() - 1) / 2  # 1-based, tied averaged
    rank_sum = average_rank[inverse][y].sum()
    return ((rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).float()


@torch.no_grad()
def distribution_stats(log_probs: torch.Tensor, vocab: Vocab) -> tuple[torch.Tensor, torch.Tensor]:
    """Entropy of each sampling distribution in ``log_probs`` [..., V] and its KL divergence
    from the unigram distribution, in nats. A generator at the unigram solution has KL 0 and
    the unigram entropy; an untrained one is near-uniform (high entropy, KL > 0); a collapsed
    one has low entropy."""
    probs = log_probs.exp()
    nonzero = probs > 0
    plogp = torch.where(nonzero, probs * log_probs, 0.0)
    entropy = -plogp.sum(-1)
    cross = torch.where(nonzero, probs * vocab.log_unigram, 0.0).sum(-1)
    return entropy, (plogp.sum(-1) - cross)
