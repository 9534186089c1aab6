"""The bigram (signal the data holds) and token-identity (floor) reference detectors, on
synthetic languages whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.evaluation.probes.corruption_sources import BigramTable, corrupt, split_rows
from electra_ablate.evaluation.probes.reference_detectors import (
    TokenIdentityDetector,
    bigram_detector_scores,
)

SPECIAL = SpecialTokens()
VOCAB_SIZE = 60
FIRST_ORDINARY = 5
ORDINARY = VOCAB_SIZE - FIRST_ORDINARY


def framed(body: np.ndarray) -> np.ndarray:
    rows = len(body)
    cls, sep = np.full((rows, 1), SPECIAL.cls), np.full((rows, 1), SPECIAL.sep)
    return np.concatenate([cls, body, sep], axis=1)


def chain_language(rows: int, length: int, seed: int) -> np.ndarray:
    """Deterministic bigrams: every ordinary token t is always followed by t + 1 (wrapping)."""
    starts = np.random.default_rng(seed).integers(0, ORDINARY, rows)
    return framed(FIRST_ORDINARY + (starts[:, None] + np.arange(length)) % ORDINARY)


def skewed_unigram() -> Vocab:
    """A Zipf-like unigram over the ordinary ids (specials at 0)."""
    counts = torch.zeros(VOCAB_SIZE)
    counts[FIRST_ORDINARY:] = 1e4 / torch.arange(1, ORDINARY + 1).double() ** 1.1
    return Vocab(counts, SPECIAL)


def unigram_language(vocab: Vocab, rows: int, length: int, seed: int) -> np.ndarray:
    """Tokens drawn independently from ``vocab.unigram``: no bigram structure at all."""
    generator = torch.Generator().manual_seed(seed)
    body = torch.multinomial(vocab.unigram.double(), rows * length, True, generator=generator)
    return framed(body.view(rows, length).numpy())


def test_bigram_detector_finds_every_replacement_in_a_deterministic_language():
    train = chain_language(400, 30, seed=0)
    bigrams = BigramTable.from_sequences(train, VOCAB_SIZE, SPECIAL.ids)
    heldout = chain_language(200, 30, seed=1)
    vocab = Vocab.uniform(VOCAB_SIZE, SPECIAL)
    for source in ("uniform", "unigram"):
        text = corrupt(heldout, source, vocab, bigrams, seed=0)
        scores = bigram_detector_scores(text.corrupted, bigrams)
        assert scores.shape == text.corrupted.shape and scores.dtype == torch.float32
        assert text.detection_auc(scores) > 0.99


def test_bigram_detector_is_at_chance_when_the_text_has_no_bigram_signal():
    """Text and replacements both drawn independently from one unigram: nothing for a count
    of pairs to find."""
    vocab = skewed_unigram()
    bigrams = BigramTable.from_sequences(
        unigram_language(vocab, 3000, 40, seed=0), VOCAB_SIZE, SPECIAL.ids
    )
    text = corrupt(unigram_language(vocab, 1000, 40, seed=1), "unigram", vocab, bigrams, seed=0)
    auc = text.detection_auc(bigram_detector_scores(text.corrupted, bigrams))
    assert auc == pytest.approx(0.5, abs=0.02)


def test_bigram_detector_reads_both_neighbours():
    """Trained on t -> t + 1, a token that fits its left neighbour but not its right one (the
    bigram source's kind of replacement) still scores above the tokens that fit both."""
    bigrams = BigramTable.from_sequences(chain_language(400, 30, seed=0), VOCAB_SIZE, SPECIAL.ids)
    row = chain_language(1, 10, seed=2)
    scores = bigram_detector_scores(torch.from_numpy(row), bigrams)[0]
    broken = row.copy()
    broken[0, 5] = FIRST_ORDINARY + (row[0, 5] - FIRST_ORDINARY + 7) % ORDINARY  # fits neither
    broken_scores = bigram_detector_scores(torch.from_numpy(broken), bigrams)[0]
    assert broken_scores[5] > broken_scores[4] > scores[4]
    assert broken_scores[5] > broken_scores[6] > scores[6]
    assert broken_scores[5] == broken_scores[1:-1].max()
    # the same inputs give the same scores
    assert torch.equal(broken_scores, bigram_detector_scores(torch.from_numpy(broken), bigrams)[0])


def test_token_identity_rates_are_smoothed_replacement_shares():
    text = corrupt(chain_language(50, 20, seed=0), "uniform", Vocab.uniform(VOCAB_SIZE), seed=0)
    detector = TokenIdentityDetector.fit(text, VOCAB_SIZE, prior_strength=2.0)
    ids = text.corrupted[text.replaceable]
    replaced = text.replaced[text.replaceable].double()
    overall = float(replaced.mean())
    for token in (FIRST_ORDINARY, FIRST_ORDINARY + 11, SPECIAL.cls):
        here = ids == token
        expected = (float(replaced[here].sum()) + 2.0 * overall) / (int(here.sum()) + 2.0)
        assert float(detector.rates[token]) == pytest.approx(expected)
    scores = detector.scores(text.corrupted)
    assert torch.equal(scores, detector.rates[text.corrupted].float())


def test_token_identity_detector_is_at_chance_under_unigram_replacements():
    """Text drawn from the unigram and replacements from the same unigram: which token sits at
    a position says almost nothing about whether it was replaced. (Only almost: a draw equal to
    the original is no replacement, so P(replaced | x) = rate * (1 - p(x)), and under a skewed
    unigram frequent tokens are replaced less often; a flat one leaves nothing.)"""
    counts = torch.zeros(VOCAB_SIZE)
    counts[FIRST_ORDINARY:] = 100.0 * (1 + torch.arange(ORDINARY) % 2)  # two frequency levels
    vocab = Vocab(counts, SPECIAL)
    text = corrupt(unigram_language(vocab, 2000, 40, seed=0), "unigram", vocab, seed=0)
    train, test = split_rows(len(text.original), 0.5, seed=0)
    detector = TokenIdentityDetector.fit(text.rows(train), VOCAB_SIZE)
    auc = text.rows(test).detection_auc(detector.scores(text.rows(test).corrupted))
    assert auc == pytest.approx(0.5, abs=0.02)


def test_token_identity_detector_sees_through_uniform_replacements():
    """Uniform replacements over-represent rare tokens, which the floor detector learns."""
    vocab = skewed_unigram()
    text = corrupt(unigram_language(vocab, 2000, 40, seed=0), "uniform", vocab, seed=0)
    train, test = split_rows(len(text.original), 0.5, seed=0)
    detector = TokenIdentityDetector.fit(text.rows(train), VOCAB_SIZE)
    assert text.rows(test).detection_auc(detector.scores(text.rows(test).corrupted)) > 0.75
