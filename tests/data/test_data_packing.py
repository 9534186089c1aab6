"""Packing invariants, checked on synthetic token ids where each document owns an id range."""

from __future__ import annotations

import numpy as np
import pytest

from electra_ablate.backbone.tokens import SpecialTokens
from electra_ablate.data.packing import PackingConfig, SequencePacker, padded_table, split_sentences

SPECIAL = SpecialTokens()
L = 32


def synthetic_documents(count: int, seed: int = 0) -> list[list[list[int]]]:
    """Document d's tokens are 1000*(d+1) + k, so every token says which document it came from."""
    rng = np.random.default_rng(seed)
    documents = []
    for d in range(count):
        sentences = [int(n) for n in rng.integers(1, 20, size=rng.integers(1, 15))]
        sentences.append(int(rng.integers(40, 80)))  # longer than any example: must be cut
        tokens = iter(range(1000 * (d + 1), 1000 * (d + 2)))
        documents.append([[next(tokens) for _ in range(n)] for n in sentences])
    return documents


def pack_all(documents, config=PackingConfig()):
    packer = SequencePacker(L, SPECIAL, config)
    return [(d, ex) for d, doc in enumerate(documents) for ex in packer.pack(doc)]


def test_examples_are_cls_a_sep_b_sep_from_one_document():
    examples = pack_all(synthetic_documents(60))
    singles = 0
    for document, (ids, types) in examples:
        assert 3 <= len(ids) <= L and len(types) == len(ids)
        assert ids[0] == SPECIAL.cls and ids[-1] == SPECIAL.sep
        seps = [i for i, t in enumerate(ids) if t == SPECIAL.sep]
        assert len(seps) in (1, 2)
        text = [t for t in ids if t not in (SPECIAL.cls, SPECIAL.sep)]
        assert text and all(t // 1000 == document + 1 for t in text)
        assert text == sorted(text)  # consecutive sentences, in order
        first_sep = seps[0]
        assert types[: first_sep + 1] == [0] * (first_sep + 1)
        assert types[first_sep + 1 :] == [1] * (len(ids) - first_sep - 1)
        if len(seps) == 1:
            singles += 1
        else:
            assert seps[1] == len(ids) - 1 and seps[1] > first_sep + 1  # B is not empty
    assert 0 < singles < len(examples)


def test_long_sentences_are_cut_into_pieces_not_dropped():
    document = [list(range(1000, 1100))]  # one 100-token sentence, examples hold 29 tokens
    config = PackingConfig(short_target_prob=0.0)
    packed = [ids for _, (ids, _) in pack_all([document], config)]
    text = [t for ids in packed for t in ids if t not in (SPECIAL.cls, SPECIAL.sep)]
    assert text == document[0]


def test_probabilities_of_single_segment_and_short_examples():
    documents = synthetic_documents(3000)

    def two_segment_share(prob: float) -> float:
        config = PackingConfig(single_segment_prob=prob, short_target_prob=0.0)
        return np.mean([ids.count(SPECIAL.sep) == 2 for _, (ids, _) in pack_all(documents, config)])

    # Examples that would have two segments keep them with probability 1 - 0.3.
    assert 0.6 < two_segment_share(0.3) / two_segment_share(0.0) < 0.8

    none = PackingConfig(single_segment_prob=0.0, short_target_prob=0.0)
    full = [len(ids) for _, (ids, _) in pack_all(documents, none)]
    short = PackingConfig(single_segment_prob=0.0, short_target_prob=0.5)
    mixed = [len(ids) for _, (ids, _) in pack_all(documents, short)]
    assert np.mean(mixed) < np.mean(full) - 1


def test_packing_is_deterministic_under_its_seed():
    documents = synthetic_documents(50)
    assert pack_all(documents) == pack_all(documents)
    assert pack_all(documents) != pack_all(documents, PackingConfig(seed=7))


def test_padded_table_is_fixed_length_with_pad_zero():
    examples = [([2, 10, 3], [0, 0, 0]), ([2, 11, 3, 12, 3], [0, 0, 0, 1, 1])]
    table = padded_table(examples, 8, SPECIAL.pad)
    ids = np.asarray(table.column("input_ids").to_pylist())
    types = np.asarray(table.column("token_type_ids").to_pylist())
    assert ids.tolist() == [[2, 10, 3, 0, 0, 0, 0, 0], [2, 11, 3, 12, 3, 0, 0, 0]]
    assert types.tolist() == [[0] * 8, [0, 0, 0, 1, 1, 0, 0, 0]]


@pytest.mark.parametrize(
    ("paragraph", "sentences"),
    [
        ("One. Two! Three? four", ["One.", "Two!", "Three? four"]),
        (
            'He said "Go." Then 3 left. (Aside.) End',
            ['He said "Go."', "Then 3 left.", "(Aside.)", "End"],
        ),
        ("No end", ["No end"]),
        ("", []),
    ],
)
def test_split_sentences(paragraph, sentences):
    assert split_sentences(paragraph) == sentences
