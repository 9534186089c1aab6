"""The report's Data row prints the vocabulary size the study used (issue 54): with a
``tokenizer.vocab_file`` the file decides the size and the spec's ``tokenizer.vocab_size`` (its
default 30522) is never read, so the row must not print it as if it were."""

from __future__ import annotations

import json
from pathlib import Path

from test_report import make_study_dir

from electra_ablate.report import write_report
from electra_ablate.report.header import data_text, header

CORPUS = {"paths": ["corpus.txt.gz"], "max_documents": None, "heldout_fraction": 0.005}


def study_with(tokenizer: dict, **recorded) -> dict:
    """A study.json as ``provenance`` writes it: the spec's data section, then the prepared
    data's summary (``vocab_size`` among it)."""
    return {
        "name": "vocab",
        "spec": {"description": ""},
        "data": {"corpus": CORPUS, "tokenizer": tokenizer, "glue": "glue-dir", **recorded},
    }


def data_row(study: dict) -> str:
    text = header(study, Path("runs/vocab"), None, None)
    return next(line for line in text.splitlines() if line.startswith("| Data |"))


def test_a_vocab_file_shows_the_size_used_not_the_ignored_default():
    study = study_with(
        {"vocab_size": 30522, "lowercase": True, "vocab_file": "kept/1/vocab.txt"},
        documents={"train": 1336, "heldout": 7},
        vocab_size=4096,
    )
    row = data_row(study)
    assert "30522" not in row
    assert (
        "tokenizer.vocab_file=kept/1/vocab.txt; tokenizer.vocab_size=4096 (the vocab_file's; "
        "the spec's tokenizer.vocab_size is not used); tokenizer.lowercase=True"
    ) in row
    assert row.count("vocab_size=") == 1  # said once, in the tokenizer's settings
    assert "documents.train=1336; documents.heldout=7" in row


def test_an_older_record_takes_the_size_from_the_resolved_backbone():
    study = study_with({"vocab_size": 30522, "lowercase": True, "vocab_file": "my/vocab.txt"})
    study["backbone"] = {"vocab_size": 8000, "hidden_size": 64}
    assert "tokenizer.vocab_size=8000 (the vocab_file's;" in data_text(study)
    assert "30522" not in data_text(study)
    del study["backbone"]
    assert "tokenizer.vocab_size=the vocab_file's (not recorded)" in data_text(study)
    assert "30522" not in data_text(study)


def test_a_trained_vocabulary_shows_its_size_once():
    study = study_with({"vocab_size": 4096, "lowercase": True, "vocab_file": None}, vocab_size=4096)
    row = data_row(study)
    assert "tokenizer.vocab_size=4096; tokenizer.lowercase=True" in row
    assert row.count("vocab_size=") == 1


def test_a_trained_vocabulary_smaller_than_asked_shows_both():
    study = study_with({"vocab_size": 4096, "lowercase": True, "vocab_file": None}, vocab_size=3011)
    assert "tokenizer.vocab_size=3011 (trained; 4096 asked)" in data_row(study)


def test_a_study_without_tokenizer_settings_shows_none():
    row = data_row({"name": "bare", "data": {"corpus": CORPUS, "glue": "glue-dir"}})
    assert "vocab_size" not in row and "tokenizer" not in row
    assert row.startswith("| Data | corpus.paths=corpus.txt.gz; corpus.heldout_fraction=0.005;")


def test_the_written_report_prints_the_vocab_files_size(tmp_path):
    directory = make_study_dir(tmp_path / "vocab")
    study = json.loads((directory / "study.json").read_text())
    study["data"]["tokenizer"] = {"vocab_size": 30522, "lowercase": True, "vocab_file": "v.txt"}
    study["data"]["vocab_size"] = 2048
    (directory / "study.json").write_text(json.dumps(study))
    (directory / "results.parquet").unlink()  # pre-training only: the header is what is read
    text = write_report(directory).read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| Data |"))
    assert "tokenizer.vocab_file=v.txt; tokenizer.vocab_size=2048 (the vocab_file's;" in row
    assert "30522" not in row
