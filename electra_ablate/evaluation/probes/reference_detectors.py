"""Two detectors that learn nothing from a model, to read a probe's ROC-AUC against.

- The **bigram detector** is "the signal the data holds": counts of adjacent pairs in the
  training data, read as pointwise mutual information between a token and each of its two
  neighbours. A token that fits neither neighbour is probably a replacement. No learning.
- The **token-identity detector** is "the floor": per token id, how often that id was a
  replacement in a training split of the same corruption. It sees no context at all, so it
  measures what a source gives away by its choice of tokens (a lot for ``uniform``, nearly
  nothing for ``unigram``).

Measured on the objectives study's held-out split (784 sequences of 128, WordPiece vocabulary
4,096; the bigram table from its 168,133 training sequences; rate 0.15, seed 0; ``split_rows``
seed 0: token identity fitted on one half of the rows, both scored on the other half),
ROC-AUC over the replaceable positions:

==============  =======  =======  ======
source          uniform  unigram  bigram
==============  =======  =======  ======
bigram          0.972    0.921    0.801
token identity  0.836    0.524    0.530
==============  =======  =======  ======

This reproduces the magnitudes in docs/design.md under unigram replacements (a bigram
detector with its own smoothing at 0.895, token identity at 0.50-0.52).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from electra_ablate.evaluation.probes.corruption_sources import BigramTable, CorruptedText

BIGRAM_SMOOTHING = 100.0
"""Dirichlet prior strength of the bigram detector's conditionals, in pseudo-counts.

A pair seen c(l, x) times after a neighbour seen c(l) times gives p(x | l) =
(c(l, x) + s * p(x)) / (c(l) + s): an unseen pair after a frequent neighbour is strong evidence,
after a rare one weak. 100 is the strength a bigram language model of the objectives study's
corpus picks: the held-out log-likelihood of p(x | l) over replaceable tokens is -4.971 /
-4.911 / -4.852 / -4.801 / -4.818 / -5.115 nats for s = 0.1 / 1 / 10 / 100 / 1,000 / 10,000.
Chosen by that likelihood, not by detection; the unigram-source AUC over all 784 held-out rows
moves little with it (0.902 / 0.906 / 0.912 / 0.920 / 0.922 / 0.912). Fixed, not fitted per
checkpoint, so every encoder is read against the same reference."""

IDENTITY_PRIOR_STRENGTH = 1.0
"""Pseudo-count pulling a rarely seen token's replacement rate towards the overall rate."""


def bigram_detector_scores(
    corrupted: torch.Tensor, bigrams: BigramTable, smoothing: float = BIGRAM_SMOOTHING
) -> torch.Tensor:
    """[N, L] scores, higher = more likely replaced: minus the smoothed PMI of each token with
    its left neighbour plus that with its right neighbour, in the corrupted text.

    For a token x between l and r, log p(x | l) / p(x) + log p(x | r) / p(x) is, under the naive
    assumption that the two neighbours are independent given x, the log likelihood ratio of "x
    is the original" against "x was drawn from the unigram distribution": the natural count-based
    detector for unigram replacements, and a fixed, conservative one for the other sources. A
    missing neighbour (the row's edge) contributes 0. Scores at special tokens and padding are
    computed but meaningless: score over ``replaceable``.
    """
    ids = np.asarray(torch.as_tensor(corrupted).cpu(), dtype=np.int64)
    if ids.ndim != 2:
        raise ValueError(f"corrupted must be [N, L], got shape {ids.shape}")
    vocab_size = bigrams.vocab_size
    pairs = bigrams.total
    # p(x) as the right side of a pair and as the left side, add-one smoothed so that a token
    # never seen in training (a uniform source draws those) still has a finite log-probability.
    p_right = (bigrams.right_totals + 1.0) / (pairs + vocab_size)
    p_left = (bigrams.left_totals + 1.0) / (pairs + vocab_size)
    pmi = np.zeros(ids.shape, dtype=np.float64)
    # with the left neighbour: p(x | l) against p(x) at position i = 1 .. L-1
    left, here = ids[:, :-1], ids[:, 1:]
    fits_left = (bigrams.pair_counts(left, here) + smoothing * p_right[here]) / (
        bigrams.left_totals[left] + smoothing
    )
    pmi[:, 1:] += np.log(fits_left) - np.log(p_right[here])
    # with the right neighbour: p(x | r) against p(x) at position i = 0 .. L-2
    here, right = ids[:, :-1], ids[:, 1:]
    fits_right = (bigrams.pair_counts(here, right) + smoothing * p_left[here]) / (
        bigrams.right_totals[right] + smoothing
    )
    pmi[:, :-1] += np.log(fits_right) - np.log(p_left[here])
    return torch.from_numpy(-pmi).float()


@dataclass(frozen=True)
class TokenIdentityDetector:
    """Per token id, a smoothed rate of being a replacement, fitted on a training split.

    ``rates[v] = (replaced at v + a * overall rate) / (replaceable positions showing v + a)``,
    counted over the replaceable positions of the corrupted training text; an id never seen there
    gets the overall rate. Scored on a held-out split it is the best a detector that ignores
    context can do (up to the smoothing). Under unigram replacements it stays just above 0.5:
    a draw equal to the original is no replacement, so P(replaced | x) = rate * (1 - p(x)) and
    frequent tokens are replaced slightly less often.
    """

    rates: torch.Tensor  # [V] float64

    @classmethod
    def fit(
        cls,
        train: CorruptedText,
        vocab_size: int,
        prior_strength: float = IDENTITY_PRIOR_STRENGTH,
    ) -> TokenIdentityDetector:
        ids = train.corrupted[train.replaceable]
        replaced = train.replaced[train.replaceable].double()
        seen = torch.bincount(ids, minlength=vocab_size).double()[:vocab_size]
        hits = torch.bincount(ids, weights=replaced, minlength=vocab_size)[:vocab_size]
        overall = float(replaced.mean()) if len(replaced) else 0.0
        return cls((hits + prior_strength * overall) / (seen + prior_strength))

    def scores(self, corrupted: torch.Tensor) -> torch.Tensor:
        """[N, L] fitted replacement rate of each token (out-of-range ids: the mean rate)."""
        corrupted = torch.as_tensor(corrupted).long().cpu()
        inside = (corrupted >= 0) & (corrupted < len(self.rates))
        rates = self.rates[corrupted.clamp(0, len(self.rates) - 1)]
        return torch.where(inside, rates, self.rates.mean()).float()
