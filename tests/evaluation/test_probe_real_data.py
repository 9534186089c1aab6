"""The reference detectors on real English text (a subset of the shared corpus, vocabulary
4,096 as in the objectives study): what the fixed corruption sources leave for context and for
token identity to find."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_corpus import prepare_real_subset

from electra_ablate.data.batches import column_matrix
from electra_ablate.data.pretraining import data_vocab
from electra_ablate.evaluation.probes.corruption_sources import (
    CORRUPTION_SOURCES,
    BigramTable,
    corrupt,
    split_rows,
)
from electra_ablate.evaluation.probes.reference_detectors import (
    TokenIdentityDetector,
    bigram_detector_scores,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference_aucs(shared_data_dir: Path, session_dir: Path) -> dict[str, dict[str, float]]:
    _, data = prepare_real_subset(shared_data_dir, session_dir)  # tests/data reads it too
    vocab = data_vocab(data)
    bigrams = BigramTable.from_sequences(
        column_matrix(data.train, "input_ids"), data.vocab_size, data.special.ids
    )
    heldout = column_matrix(data.heldout, "input_ids")
    train, test = split_rows(len(heldout), 0.5, seed=0)
    aucs: dict[str, dict[str, float]] = {}
    for source in CORRUPTION_SOURCES:
        text = corrupt(heldout, source, vocab, bigrams, seed=0)
        scored = text.rows(test)
        identity = TokenIdentityDetector.fit(text.rows(train), data.vocab_size)
        aucs[source] = {
            "bigram": scored.detection_auc(bigram_detector_scores(scored.corrupted, bigrams)),
            "identity": scored.detection_auc(identity.scores(scored.corrupted)),
        }
    return aucs


def test_unigram_replacements_leave_context_the_only_signal(reference_aucs):
    aucs = reference_aucs["unigram"]
    assert aucs["bigram"] > 0.8
    assert 0.48 < aucs["identity"] < 0.56


def test_uniform_replacements_give_themselves_away_by_identity(reference_aucs):
    aucs = reference_aucs["uniform"]
    assert aucs["identity"] > 0.7
    assert aucs["bigram"] > aucs["identity"]


def test_bigram_replacements_are_harder_for_the_bigram_detector(reference_aucs):
    aucs = reference_aucs
    assert aucs["uniform"]["bigram"] > aucs["unigram"]["bigram"] > aucs["bigram"]["bigram"] > 0.6
