"""Fixed corruption sources for the replaced-token-detection probe, on small synthetic text."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.evaluation.probes.corruption_sources import (
    CORRUPTION_SOURCES,
    BigramTable,
    corrupt,
    split_rows,
)

SPECIAL = SpecialTokens()
VOCAB_SIZE = 40
FIRST_ORDINARY = 5


def packed_text(rows: int = 60, length: int = 32, seed: int = 0) -> np.ndarray:
    """[CLS] text [SEP] text [SEP] [PAD]... rows of random ordinary ids, some padded."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(FIRST_ORDINARY, VOCAB_SIZE, (rows, length))
    ids[:, 0] = SPECIAL.cls
    ids[:, length // 2] = SPECIAL.sep
    ids[:, -1] = SPECIAL.sep
    for row in range(0, rows, 3):  # every third row is short and padded
        end = int(rng.integers(length // 2 + 2, length - 1))
        ids[row, end] = SPECIAL.sep
        ids[row, end + 1 :] = SPECIAL.pad
    return ids


def chain_text(rows: int, length: int, seed: int = 0) -> np.ndarray:
    """A language where every ordinary token has exactly one continuation: t -> t + 1 (wrapping
    within the ordinary ids), between [CLS] and [SEP]."""
    rng = np.random.default_rng(seed)
    width = VOCAB_SIZE - FIRST_ORDINARY
    starts = rng.integers(0, width, rows)
    body = FIRST_ORDINARY + (starts[:, None] + np.arange(length - 2)) % width
    cls = np.full((rows, 1), SPECIAL.cls)
    sep = np.full((rows, 1), SPECIAL.sep)
    return np.concatenate([cls, body, sep], axis=1)


def vocab_of(ids: np.ndarray) -> Vocab:
    return Vocab(torch.from_numpy(np.bincount(ids.ravel(), minlength=VOCAB_SIZE)), SPECIAL)


def test_bigram_table_counts_adjacent_pairs_with_an_ordinary_side():
    ids = packed_text(rows=20)
    table = BigramTable.from_sequences(torch.from_numpy(ids), VOCAB_SIZE, SPECIAL.ids)
    expected = np.zeros((VOCAB_SIZE, VOCAB_SIZE), dtype=np.int64)
    for row in ids:
        for a, b in zip(row[:-1], row[1:], strict=True):
            if a >= FIRST_ORDINARY or b >= FIRST_ORDINARY:
                expected[a, b] += 1
    np.testing.assert_array_equal(table.counts.toarray(), expected)
    assert table.total == expected.sum()
    np.testing.assert_array_equal(table.left_totals, expected.sum(1))
    np.testing.assert_array_equal(table.right_totals, expected.sum(0))
    left, right = ids[:, :-1], ids[:, 1:]
    seen = table.pair_counts(left, right)
    np.testing.assert_array_equal(seen, expected[left, right])
    assert (seen[(left >= FIRST_ORDINARY) | (right >= FIRST_ORDINARY)] > 0).all()
    assert table.pair_counts(np.array([SPECIAL.pad]), np.array([SPECIAL.pad]))[0] == 0


def test_bigram_table_is_the_same_counted_in_chunks(monkeypatch):
    ids = packed_text(rows=50)
    whole = BigramTable.from_sequences(ids, VOCAB_SIZE, SPECIAL.ids)
    monkeypatch.setattr(
        "electra_ablate.evaluation.probes.corruption_sources._COUNT_ROWS_PER_CHUNK", 7
    )
    chunked = BigramTable.from_sequences(ids, VOCAB_SIZE, SPECIAL.ids)
    np.testing.assert_array_equal(whole.counts.toarray(), chunked.counts.toarray())


@pytest.mark.parametrize("source", CORRUPTION_SOURCES)
def test_corruption_hits_replaceable_positions_at_the_rate(source):
    ids = packed_text()
    bigrams = BigramTable.from_sequences(packed_text(seed=1), VOCAB_SIZE, SPECIAL.ids)
    text = corrupt(ids, source, vocab_of(ids), bigrams, rate=0.15, seed=3)
    original = torch.from_numpy(ids)
    assert torch.equal(text.original, original)
    assert torch.equal(text.replaceable, original >= FIRST_ORDINARY)
    assert not (text.selected & ~text.replaceable).any()
    assert torch.equal(text.corrupted[~text.selected], original[~text.selected])
    n = text.replaceable.sum(1).double()
    assert torch.equal(text.selected.sum(1), torch.round(n * 0.15).long().clamp(min=1))
    assert torch.equal(text.replaced, text.corrupted != original)
    assert not (text.replaced & ~text.selected).any()
    assert (text.corrupted[text.selected] >= FIRST_ORDINARY).all()  # never a special token


def test_sampling_the_original_back_is_no_replacement():
    """With two ordinary tokens, about half the draws give the original back: selected, not
    replaced."""
    ids = np.full((200, 20), FIRST_ORDINARY)
    ids[:, ::2] = FIRST_ORDINARY + 1
    vocab = Vocab(torch.tensor([0, 0, 0, 0, 0, 10, 10]), SPECIAL)
    text = corrupt(ids, "uniform", vocab, seed=0)
    share = text.replaced.sum() / text.selected.sum()
    assert 0.4 < share < 0.6
    assert torch.equal(text.replaced, text.corrupted != text.original)


@pytest.mark.parametrize("source", CORRUPTION_SOURCES)
def test_corruption_is_a_function_of_its_seed_not_of_the_global_rng(source):
    ids = packed_text()
    vocab = vocab_of(ids)
    bigrams = BigramTable.from_sequences(ids, VOCAB_SIZE, SPECIAL.ids)
    torch.manual_seed(1)
    np.random.seed(1)
    first = corrupt(ids, source, vocab, bigrams, seed=7)
    torch.manual_seed(2)
    np.random.seed(2)
    torch.rand(100)
    second = corrupt(ids, source, vocab, bigrams, seed=7)
    assert torch.equal(first.corrupted, second.corrupted)
    assert torch.equal(first.selected, second.selected)
    other = corrupt(ids, source, vocab, bigrams, seed=8)
    assert not torch.equal(first.selected, other.selected)


def test_sources_share_positions_for_one_seed_and_leave_the_input_alone():
    ids = packed_text()
    before = ids.copy()
    bigrams = BigramTable.from_sequences(ids, VOCAB_SIZE, SPECIAL.ids)
    texts = [corrupt(ids, s, vocab_of(ids), bigrams, seed=4) for s in CORRUPTION_SOURCES]
    for text in texts[1:]:
        assert torch.equal(text.selected, texts[0].selected)
    np.testing.assert_array_equal(ids, before)


def test_uniform_and_unigram_sources_follow_their_distributions():
    ids = np.full((400, 64), FIRST_ORDINARY)
    counts = torch.zeros(VOCAB_SIZE)
    counts[FIRST_ORDINARY] = 1000.0  # the unigram puts ~97% of its mass on one token
    vocab = Vocab(counts, SPECIAL)
    unigram = corrupt(ids, "unigram", vocab, rate=0.5, seed=0)
    uniform = corrupt(ids, "uniform", vocab, rate=0.5, seed=0)
    unigram_share = (unigram.corrupted[unigram.selected] == FIRST_ORDINARY).double().mean()
    uniform_share = (uniform.corrupted[uniform.selected] == FIRST_ORDINARY).double().mean()
    assert float(unigram_share) == pytest.approx(float(vocab.unigram[FIRST_ORDINARY]), abs=0.01)
    assert float(uniform_share) == pytest.approx(1 / len(vocab.ordinary_ids), abs=0.01)


def test_bigram_source_samples_the_left_neighbours_continuation():
    """In a language where each token has one continuation, every bigram replacement after an
    ordinary token is that token's successor, which is the original token itself: nothing there
    is replaced, though every selected position was drawn for. After [CLS], which any token may
    follow, replacements do happen."""
    ids = chain_text(rows=200, length=30)
    train = chain_text(rows=400, length=30, seed=1)
    bigrams = BigramTable.from_sequences(train, VOCAB_SIZE, SPECIAL.ids)
    text = corrupt(ids, "bigram", vocab_of(ids), bigrams, rate=0.3, seed=0)
    assert text.selected[:, 2:].any()
    assert not text.replaced[:, 2:].any()
    assert text.replaced[:, 1].any()


def test_bigram_source_follows_the_table_of_its_training_data():
    """Trained on t -> t + 1 and applied to t -> t + 2 text, every replacement is the left
    neighbour's successor under the table, so it differs from the original."""
    bigrams = BigramTable.from_sequences(chain_text(rows=200, length=30), VOCAB_SIZE, SPECIAL.ids)
    width = VOCAB_SIZE - FIRST_ORDINARY
    body = FIRST_ORDINARY + (np.arange(20)[None, :] * 2 + np.arange(30)[:, None]) % width
    ids = np.concatenate([np.full((30, 1), SPECIAL.cls), body, np.full((30, 1), SPECIAL.sep)], 1)
    text = corrupt(ids, "bigram", vocab_of(ids), bigrams, rate=0.3, seed=0)
    rows, cols = text.selected.nonzero(as_tuple=True)
    left = text.original[rows, cols - 1]
    successor = torch.where(
        left == SPECIAL.cls, -1, FIRST_ORDINARY + (left - FIRST_ORDINARY + 1) % width
    )
    at_first = left == SPECIAL.cls  # [CLS] is followed by every token: any ordinary draw
    assert torch.equal(text.corrupted[rows, cols][~at_first], successor[~at_first])
    assert (text.corrupted[rows, cols] >= FIRST_ORDINARY).all()
    assert text.replaced[rows, cols][~at_first].all()


def test_bigram_source_never_samples_specials_and_falls_back_to_unigram():
    """A left neighbour followed only by [SEP] in training has no ordinary continuation: the
    draw there comes from the unigram, never the table's special continuation."""
    last = VOCAB_SIZE - 1
    train = np.array([[SPECIAL.cls, FIRST_ORDINARY, last, SPECIAL.sep]] * 50)
    bigrams = BigramTable.from_sequences(train, VOCAB_SIZE, SPECIAL.ids)
    ids = np.array([[SPECIAL.cls, last, FIRST_ORDINARY, FIRST_ORDINARY, SPECIAL.sep]] * 300)
    counts = torch.zeros(VOCAB_SIZE)
    counts[FIRST_ORDINARY + 1] = 1e6  # the unigram almost surely draws this one
    text = corrupt(ids, "bigram", Vocab(counts, SPECIAL), bigrams, rate=0.5, seed=0)
    after_last = text.selected[:, 2]
    assert after_last.any()
    assert (text.corrupted[after_last, 2] == FIRST_ORDINARY + 1).all()
    assert (text.corrupted[text.selected] >= FIRST_ORDINARY).all()


def test_bad_arguments_name_the_problem():
    ids = packed_text()
    vocab = vocab_of(ids)
    with pytest.raises(ValueError, match="unknown corruption source"):
        corrupt(ids, "trigram", vocab)
    with pytest.raises(ValueError, match="BigramTable"):
        corrupt(ids, "bigram", vocab)
    with pytest.raises(ValueError, match="rate"):
        corrupt(ids, "uniform", vocab, rate=1.5)
    with pytest.raises(ValueError, match="outside"):
        BigramTable.from_sequences(ids + VOCAB_SIZE, VOCAB_SIZE, SPECIAL.ids)


def test_split_rows_is_seeded_disjoint_and_complete():
    train, test = split_rows(101, 0.5, seed=3)
    assert len(test) == 50 and len(train) == 51
    assert sorted(np.concatenate([train, test])) == list(range(101))
    again = split_rows(101, 0.5, seed=3)
    np.testing.assert_array_equal(train, again[0])
    assert not np.array_equal(test, split_rows(101, 0.5, seed=4)[1])


def test_detection_auc_counts_only_replaceable_positions():
    """Scores that only know special tokens are never replaced rank nothing among the
    replaceable positions."""
    ids = packed_text()
    text = corrupt(ids, "uniform", vocab_of(ids), seed=0)
    knows_specials = (~text.replaceable).float() * -1.0
    assert text.detection_auc(knows_specials) == pytest.approx(0.5)
    assert text.detection_auc(text.replaced.float()) == pytest.approx(1.0)
    at_replaceable = text.replaced[text.replaceable].float()
    assert text.detection_auc(at_replaceable) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="replaceable"):
        text.detection_auc(at_replaceable[:-1])
    half = text.rows(np.arange(10))
    assert torch.equal(half.corrupted, text.corrupted[:10])


def test_sequence_of_replaceable_names_each_positions_row():
    ids = packed_text()
    text = corrupt(ids, "uniform", vocab_of(ids), seed=0)
    rows = text.sequence_of_replaceable()
    assert len(rows) == int(text.replaceable.sum())
    np.testing.assert_array_equal(np.bincount(rows), text.replaceable.sum(1).numpy())
    assert (np.diff(rows) >= 0).all()
