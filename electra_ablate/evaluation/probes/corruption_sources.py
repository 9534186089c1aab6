"""Fixed corruption sources for replaced-token detection that does not move with a generator.

A discriminator's own detection metrics are on-policy: they are measured against its
generator's current samples, a moving target. To ask what an encoder carries, the same held-out
text is corrupted the same way for every kept encoder, with a fixed seed, by one of three
sources of increasing plausibility:

- ``uniform``: any ordinary token, equally likely (BERT's "random token"); most replacements are
  rare words, so token identity alone gives a lot away.
- ``unigram``: the training data's token frequencies (``Vocab.unigram``, what the paper's
  unigram generator and every generator on its unigram plateau sample); token identity gives
  nothing away, so detection needs context.
- ``bigram``: the training data's continuation of the original left neighbour; plausible next
  to the left neighbour, so detection needs the right context or more than one neighbour.

Positions are chosen as pre-training chooses them (``masking.select_masked``: a uniformly random
subset of round(rate * n) of each row's maskable positions), but from a private generator, so a
corruption is a pure function of (text, source, rate, seed) whatever the global RNG. For one
seed the three sources pick the same positions and differ only in what they put there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import torch
from scipy import sparse

from electra_ablate.backbone.config import max_predictions
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.pretraining.components.losses import roc_auc
from electra_ablate.pretraining.components.masking import maskable

CorruptionSource = Literal["uniform", "unigram", "bigram"]
CORRUPTION_SOURCES: tuple[str, ...] = ("uniform", "unigram", "bigram")

_COUNT_ROWS_PER_CHUNK = 1 << 15  # rows of [N, L] ids counted at once: bounds the pair-key memory


def _as_long(input_ids: np.ndarray | torch.Tensor) -> torch.Tensor:
    """[N, L] int64 on the CPU (a copy, so the caller's array is never written)."""
    if isinstance(input_ids, torch.Tensor):
        return input_ids.detach().to("cpu", torch.long, copy=True)
    return torch.from_numpy(np.array(input_ids, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class BigramTable:
    """Counts of adjacent token pairs in training sequences: ``counts[a, b]`` is how often ``b``
    directly follows ``a``.

    A scipy CSR matrix [V, V], so a 30,522-token vocabulary costs memory for the pairs that
    occur (millions), not for the 9e8 that could. Pairs of two special tokens (``[SEP] [PAD]``,
    ``[PAD] [PAD]``) are not counted: they say nothing about text, and neither the bigram source
    (which samples ordinary tokens) nor the bigram detector (which scores ordinary tokens, each
    of whose pairs has an ordinary side) ever asks for one. Pairs with one special side are
    counted: ``[CLS] x`` says how often ``x`` opens a sequence, ``x [SEP]`` how often it closes a
    segment.
    """

    counts: sparse.csr_array
    special_ids: tuple[int, ...]

    @classmethod
    def from_sequences(
        cls,
        input_ids: np.ndarray | torch.Tensor,
        vocab_size: int,
        special_ids: tuple[int, ...] | list[int],
    ) -> BigramTable:
        """Count the adjacent pairs of every row of ``input_ids`` [N, L] (packed training
        sequences), in chunks of rows so memory stays bounded on a large corpus."""
        if isinstance(input_ids, torch.Tensor):
            input_ids = input_ids.detach().cpu().numpy()
        ids = np.asarray(input_ids)
        if ids.ndim != 2:
            raise ValueError(f"input_ids must be [N, L], got shape {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
            raise ValueError(f"input_ids hold ids outside [0, {vocab_size})")
        is_special = np.zeros(vocab_size, dtype=bool)
        is_special[[i for i in special_ids if 0 <= i < vocab_size]] = True
        counts = sparse.csr_array((vocab_size, vocab_size), dtype=np.int64)
        for start in range(0, len(ids), _COUNT_ROWS_PER_CHUNK):
            chunk = ids[start : start + _COUNT_ROWS_PER_CHUNK].astype(np.int64)
            left, right = chunk[:, :-1].ravel(), chunk[:, 1:].ravel()
            keep = ~(is_special[left] & is_special[right])
            keys, n = np.unique(left[keep] * vocab_size + right[keep], return_counts=True)
            rows, cols = np.divmod(keys, vocab_size)
            counts = counts + sparse.csr_array(
                (n.astype(np.int64), (rows, cols)), shape=(vocab_size, vocab_size)
            )
        counts.sum_duplicates()
        counts.sort_indices()
        return cls(counts, tuple(int(i) for i in special_ids))

    @property
    def vocab_size(self) -> int:
        return self.counts.shape[0]

    @property
    def total(self) -> int:
        """Number of counted pairs."""
        return int(self.counts.sum())

    @cached_property
    def left_totals(self) -> np.ndarray:
        """[V]: how often each token is the left side of a counted pair, c(a, .)."""
        return np.asarray(self.counts.sum(axis=1)).ravel().astype(np.int64)

    @cached_property
    def right_totals(self) -> np.ndarray:
        """[V]: how often each token is the right side of a counted pair, c(., b)."""
        return np.asarray(self.counts.sum(axis=0)).ravel().astype(np.int64)

    def pair_counts(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """c(left[i], right[i]) for each i (int64; 0 for a pair never seen)."""
        left, right = np.asarray(left, np.int64), np.asarray(right, np.int64)
        if left.size == 0:
            return np.zeros(left.shape, np.int64)
        return np.asarray(self.counts[left.ravel(), right.ravel()]).reshape(left.shape)

    @cached_property
    def _continuations(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The counts restricted to ordinary right tokens, as (row start in the cumulative
        counts [V], cumulative counts [nnz], right ids [nnz], row totals [V]): what sampling
        ``b ~ c(a, b)`` with a binary search needs."""
        ordinary = np.ones(self.vocab_size, dtype=bool)
        ordinary[[i for i in self.special_ids if 0 <= i < self.vocab_size]] = False
        table = self.counts.copy()
        table.data[~ordinary[table.indices]] = 0
        table.eliminate_zeros()
        table.sort_indices()
        cumulative = np.cumsum(table.data, dtype=np.int64)
        row_start = np.concatenate([[0], cumulative])[table.indptr[:-1]]
        totals = np.asarray(table.sum(axis=1)).ravel().astype(np.int64)
        return (
            torch.from_numpy(row_start),
            torch.from_numpy(cumulative),
            torch.from_numpy(table.indices.astype(np.int64)),
            torch.from_numpy(totals),
        )

    def sample_continuations(
        self, left: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """For each id in ``left``, a next token drawn from the counts c(left, b) over ordinary
        ``b`` (never a special token), and whether ``left`` has any ordinary continuation at
        all (where it has none the sample is meaningless and the caller falls back)."""
        row_start, cumulative, right_ids, totals = self._continuations
        left = left.long()
        total = totals[left]
        draw = torch.rand(left.shape, generator=generator, dtype=torch.float64)
        if len(right_ids) == 0:  # no ordinary continuation anywhere
            return torch.zeros_like(left), torch.zeros_like(left, dtype=torch.bool)
        offset = torch.floor(draw * total.double()).long()  # uniform integer in [0, total)
        entry = torch.searchsorted(cumulative, row_start[left] + offset, right=True)
        return right_ids[entry.clamp(max=len(cumulative) - 1)], total > 0


@dataclass(frozen=True, eq=False)
class CorruptedText:
    """Text with some positions replaced, and the labels a detector is scored against.

    All [N, L]: ``original`` and ``corrupted`` ids (int64); ``selected``, the positions a
    replacement was drawn for; ``replaced``, where ``corrupted`` differs from ``original``
    (drawing the original token back is no replacement, as in ``masking.replace_at``);
    ``replaceable``, the positions any replacement could hit (``masking.maskable``: not padding,
    not a special token), the only positions detection is scored over, because a detector that
    knows only that ``[CLS]`` and ``[SEP]`` are never replaced would otherwise look better than
    chance.
    """

    original: torch.Tensor
    corrupted: torch.Tensor
    replaced: torch.Tensor
    replaceable: torch.Tensor
    selected: torch.Tensor

    def rows(self, index: np.ndarray | torch.Tensor) -> CorruptedText:
        """The same corruption restricted to some rows (e.g. one side of ``split_rows``)."""
        index = torch.as_tensor(np.asarray(index), dtype=torch.long)
        return CorruptedText(
            self.original[index],
            self.corrupted[index],
            self.replaced[index],
            self.replaceable[index],
            self.selected[index],
        )

    def detection_auc(self, scores: torch.Tensor) -> float:
        """ROC-AUC of per-token ``scores`` (higher = more likely replaced) against ``replaced``,
        over the ``replaceable`` positions only. ``scores`` is [N, L], or [M] at the replaceable
        positions in row-major order (``scores[replaceable]``, what a probe on
        ``token_features(..., where=replaceable)`` gives)."""
        scores = torch.as_tensor(scores).cpu()
        if scores.shape == self.replaced.shape:
            return float(roc_auc(scores, self.replaced, self.replaceable))
        labels = self.replaced[self.replaceable]
        if scores.shape != labels.shape:
            raise ValueError(
                f"scores {tuple(scores.shape)} are neither [N, L] = {tuple(self.replaced.shape)} "
                f"nor one per replaceable position ({len(labels)})"
            )
        return float(roc_auc(scores, labels, torch.ones_like(labels)))

    def sequence_of_replaceable(self) -> np.ndarray:
        """[M]: the row each replaceable position belongs to, in row-major order: the groups a
        probe over those positions validates by, and how to split them by ``split_rows``."""
        rows = torch.arange(len(self.replaceable))[:, None].expand_as(self.replaceable)
        return rows[self.replaceable].numpy()


def split_rows(n_rows: int, test_fraction: float = 0.5, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(train rows, test rows) of a seeded random split, each sorted.

    Detectors and probes are fitted on one side and scored on the other. The split is by
    sequence, never by token, so no test token has its own sequence's context in training.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    order = np.random.default_rng(seed).permutation(n_rows)
    n_test = min(max(1, round(n_rows * test_fraction)), n_rows - 1)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def select_positions(
    replaceable: torch.Tensor, rate: float, generator: torch.Generator
) -> torch.Tensor:
    """[N, L] bool: round(rate * n) random positions among each row's n replaceable ones.

    The count rule is ``select_masked``'s (at least one, at most ``max_predictions``, never more
    than n), so a probe corrupts text at the rate pre-training does; the subset is uniform.
    """
    batch, length = replaceable.shape
    n = replaceable.sum(1)
    count = torch.round(n.double() * rate).long().clamp(min=1, max=max_predictions(rate, length))
    count = torch.minimum(count, n)
    scores = torch.rand(batch, length, generator=generator, dtype=torch.float64)
    scores = scores + replaceable.double()  # every candidate ranks above every non-candidate
    order = scores.argsort(dim=1, descending=True)
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(length).expand(batch, -1))
    return rank < count[:, None]


def corrupt(
    input_ids: np.ndarray | torch.Tensor,
    source: str,
    vocab: Vocab,
    bigrams: BigramTable | None = None,
    rate: float = 0.15,
    seed: int = 0,
) -> CorruptedText:
    """Replace round(rate * n) random replaceable tokens of each row of ``input_ids`` [N, L]
    with samples from ``source`` (one of ``CORRUPTION_SOURCES``).

    ``uniform`` draws from ``vocab.ordinary_ids``; ``unigram`` from ``vocab.unigram`` (the
    training data's add-one smoothed frequencies, specials at 0); ``bigram`` from ``bigrams``'
    counts of continuations of each position's left neighbour in the original text, falling back
    to ``unigram`` where that neighbour has no ordinary continuation (or there is none). No
    source ever draws a special token. Deterministic for ``seed``, whatever the global RNG.
    """
    if source not in CORRUPTION_SOURCES:
        raise ValueError(f"unknown corruption source {source!r}; one of {CORRUPTION_SOURCES}")
    if source == "bigram" and bigrams is None:
        raise ValueError("the bigram source needs a BigramTable of the training data")
    if not 0.0 < rate < 1.0:
        raise ValueError(f"rate must be in (0, 1), got {rate}")
    original = _as_long(input_ids)
    if original.ndim != 2:
        raise ValueError(f"input_ids must be [N, L], got shape {tuple(original.shape)}")
    generator = torch.Generator().manual_seed(seed)
    replaceable = maskable(original, vocab.special)
    selected = select_positions(replaceable, rate, generator)
    n_samples = int(selected.sum())
    if source == "uniform":
        pick = torch.randint(len(vocab.ordinary_ids), (n_samples,), generator=generator)
        samples = vocab.ordinary_ids.cpu()[pick]
    else:
        samples = _unigram_samples(vocab, n_samples, generator)
    if source == "bigram" and n_samples:
        assert bigrams is not None
        padded = torch.cat([torch.full_like(original[:, :1], -1), original[:, :-1]], dim=1)
        left = padded[selected]  # the original left neighbour; -1 at the first position
        continuation, found = bigrams.sample_continuations(left.clamp(min=0), generator)
        samples = torch.where(found & (left >= 0), continuation, samples)
    corrupted = original.clone()
    corrupted[selected] = samples
    return CorruptedText(original, corrupted, corrupted != original, replaceable, selected)


def _unigram_samples(vocab: Vocab, n: int, generator: torch.Generator) -> torch.Tensor:
    if n == 0:
        return torch.zeros(0, dtype=torch.long)
    return torch.multinomial(vocab.unigram.cpu().double(), n, replacement=True, generator=generator)
