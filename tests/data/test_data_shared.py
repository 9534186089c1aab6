"""The data pipeline on the real shared data (corpus subset, GLUE tasks present offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_corpus import MAX_DOCUMENTS, VOCAB_SIZE, prepare_real_subset

from electra_ablate.evaluation.glue.data import encode_glue, load_glue_task

pytestmark = pytest.mark.slow

GLUE_ROWS = {
    "cola": (8551, 1043),
    "sst2": (67349, 872),
    "mrpc": (3668, 408),
    "stsb": (5749, 1500),
    "rte": (2490, 277),
}


def test_prepare_real_corpus_subset_and_glue(shared_data_dir: Path, session_dir: Path):
    """A capped subset of the real corpus (the session's, which the probe tests read too) and
    every GLUE task encoded with its tokenizer."""
    spec, data = prepare_real_subset(shared_data_dir, session_dir)
    summary = data.summary
    assert summary["documents"]["train"] + summary["documents"]["heldout"] == MAX_DOCUMENTS
    assert summary["documents"]["heldout"] > 0 and summary["sequences"]["heldout"] > 0
    assert summary["sequences"]["train"] > 5000
    assert data.vocab_size == VOCAB_SIZE
    assert summary["unk_rate_heldout"] < 0.01

    for task, (train_rows, validation_rows) in GLUE_ROWS.items():
        splits = load_glue_task(spec.glue, task)
        assert (len(splits["train"]), len(splits["validation"])) == (train_rows, validation_rows)
        encoded = encode_glue(task, splits, data.tokenizer_dir, max_len=128)
        assert len(encoded.train["input_ids"]) == train_rows
        assert max(encoded.validation["length"]) <= 128


@pytest.mark.parametrize("task", ["cola", "sst2", "mrpc", "stsb"])
def test_real_tsv_and_parquet_copies_load_identically(shared_data: Path, task: str):
    from_parquet = load_glue_task(str(shared_data / "glue"), task)
    from_tsv = load_glue_task(str(shared_data / "glue_tsv"), task)
    for split in ("train", "validation"):
        assert len(from_tsv[split]) == GLUE_ROWS[task][split == "validation"]
        assert from_tsv[split].schema == from_parquet[split].schema
        assert from_tsv[split].to_pylist() == from_parquet[split].to_pylist()
