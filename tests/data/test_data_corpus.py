"""Corpus cleaning, documents and the held-out split."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from pydantic import ValidationError

from electra_ablate.data.config import CorpusSpec
from electra_ablate.data.corpus import (
    BOOK_DOCUMENT_WORDS,
    clean_documents,
    corpus_source,
    heldout_split,
    hub_name_and_config,
)
from electra_ablate.data.paths import cache_root
from electra_ablate.infra.errors import DataError

WIKI = """<doc id="1" url="?curid=1" title="Empty Stub">
Empty Stub


</doc>
<doc id="2" url="?curid=2" title="Alpha">
Alpha

Alpha is the first letter. It comes before beta.
History.
Alpha was used in Greece.

</doc>
<doc id="3" url="?curid=3" title="Beta">
Beta

Beta is the second letter.
</doc>
"""

BOOK = """\ufeffThe Project Gutenberg eBook header text
Release date: some day

*** START OF THE PROJECT GUTENBERG EBOOK 99 ***

CHAPTER I.

It was a dark and
stormy night.


The rain fell   in torrents.
*** END OF THE PROJECT GUTENBERG EBOOK 99 ***
Licence text that is not part of the book.
"""


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def test_wikiextractor_blocks_become_documents_without_markup_titles_or_stubs():
    documents = list(clean_documents(lines(WIKI)))
    assert documents == [
        (
            "Alpha is the first letter. It comes before beta.",
            "History.",
            "Alpha was used in Greece.",
        ),
        ("Beta is the second letter.",),
    ]


def test_gutenberg_boilerplate_is_cut_and_wrapped_lines_joined():
    documents = list(clean_documents(lines(BOOK)))
    assert documents == [
        ("CHAPTER I.", "It was a dark and stormy night.", "The rain fell in torrents.")
    ]


def test_books_split_into_documents_of_whole_paragraphs():
    paragraph = " ".join(["word"] * 300)
    text = "\n\n".join(f"{paragraph} p{i}" for i in range(20))
    documents = list(clean_documents(lines(text)))
    assert len(documents) == 3  # 20 paragraphs of 301 words, a new document every 2000+ words
    assert sum(len(d) for d in documents) == 20
    for document in documents[:-1]:
        assert sum(len(p.split()) for p in document) >= BOOK_DOCUMENT_WORDS
    assert documents[0][0].endswith("p0") and documents[-1][-1].endswith("p19")


def test_a_file_without_blank_lines_still_splits():
    text = "\n".join(" ".join(["w"] * 100) for _ in range(50))
    assert len(list(clean_documents(lines(text)))) == 3


def test_folder_of_plain_and_gzipped_files(tmp_path: Path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a_wiki.txt").write_text(WIKI)
    with gzip.open(tmp_path / "b" / "book.txt.gz", "wt", encoding="utf-8") as f:
        f.write(BOOK)
    (tmp_path / ".hidden").write_text("never read")
    source = corpus_source(CorpusSpec(paths=[str(tmp_path)]))
    assert [p.name for p in source.files] == ["a_wiki.txt", "book.txt.gz"]
    documents = list(source.documents())
    assert len(documents) == 3 and documents[2][0] == "CHAPTER I."

    limited = corpus_source(CorpusSpec(paths=["*.txt"], max_documents=1), spec_dir=tmp_path)
    assert [p.name for p in limited.files] == ["a_wiki.txt"]
    assert len(list(limited.documents())) == 1


def test_folder_reached_through_dotted_parts_is_read(tmp_path: Path):
    """Only names *inside* the folder count as hidden: the README's `$PWD/../shared/data` and a
    checkout under a dot-folder (e.g. ~/.cache) must still find the corpus."""
    corpus = tmp_path / ".cache" / "corpus"
    (corpus / ".git").mkdir(parents=True)
    (corpus / "a_wiki.txt").write_text(WIKI)
    (corpus / ".git" / "config").write_text("never read")
    (tmp_path / "main").mkdir()
    dotted = tmp_path / "main" / ".." / ".cache" / "corpus"
    source = corpus_source(CorpusSpec(paths=[str(dotted)]))
    assert [p.name for p in source.files] == ["a_wiki.txt"]


def test_fingerprint_follows_contents_not_dates(tmp_path: Path):
    path = tmp_path / "c.txt"
    path.write_text("one two three")
    spec = CorpusSpec(paths=[str(path)])
    before = corpus_source(spec).fingerprint()
    path.write_text("one two three")  # rewritten, same bytes, new mtime
    assert corpus_source(spec).fingerprint() == before
    path.write_text("one two four")
    assert corpus_source(spec).fingerprint() != before


def test_heldout_split_is_by_content_and_stable_under_reordering():
    documents = [(f"document number {i}.",) for i in range(400)]
    train, heldout = heldout_split(documents, 0.1)
    assert 20 <= len(heldout) <= 60 and len(train) + len(heldout) == 400
    assert not set(train) & set(heldout)
    train_rev, heldout_rev = heldout_split(documents[::-1], 0.1)
    assert set(heldout_rev) == set(heldout)
    # Limiting the corpus keeps every remaining document on its side.
    _, heldout_half = heldout_split(documents[:200], 0.1)
    assert set(heldout_half) == set(heldout) & set(documents[:200])


def test_heldout_split_always_has_both_sides():
    train, heldout = heldout_split([("a",), ("b",)], 0.001)
    assert len(train) == 1 and len(heldout) == 1
    with pytest.raises(DataError, match="need at least 2"):
        heldout_split([("only",)], 0.1)


def test_missing_paths_and_unset_data_dir_are_clear_errors(tmp_path: Path):
    with pytest.raises(DataError, match="matches no files"):
        corpus_source(CorpusSpec(paths=[str(tmp_path / "nothing*.txt")]))
    with pytest.raises(DataError, match="set ABLATE_DATA_DIR to the folder holding corpus/"):
        corpus_source(CorpusSpec(paths=["${ABLATE_DATA_DIR}/corpus"]))


def test_corpus_needs_exactly_one_source():
    with pytest.raises(ValidationError, match="exactly one"):
        CorpusSpec()
    with pytest.raises(ValidationError, match="exactly one"):
        CorpusSpec(paths=["x"], hub="wikitext/wikitext-2-raw-v1")


def test_hub_names():
    assert hub_name_and_config("wikitext/wikitext-103-raw-v1") == (
        "wikitext",
        "wikitext-103-raw-v1",
    )
    assert hub_name_and_config("Salesforce/wikitext/wikitext-2-raw-v1") == (
        "Salesforce/wikitext",
        "wikitext-2-raw-v1",
    )
    assert hub_name_and_config("org/name:") == ("org/name", None)
    assert hub_name_and_config("bookcorpus") == ("bookcorpus", None)


def test_hub_corpus_offline_is_a_clear_error():
    source = corpus_source(CorpusSpec(hub="wikitext/wikitext-2-raw-v1"))
    with pytest.raises(DataError, match="cannot load hub corpus 'wikitext/wikitext-2-raw-v1'"):
        list(source.documents())


def test_cache_root_precedence(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "env"))
    assert cache_root("rel", tmp_path) == tmp_path / "rel"
    assert cache_root(None, tmp_path) == tmp_path / "env"
    monkeypatch.delenv("ABLATE_CACHE")
    assert cache_root(None, None) == Path.home() / ".cache" / "electra-ablate"


def test_documents_end_between_paragraphs_not_inside_one():
    wrapped = "\n".join(" ".join(["w"] * 10) for _ in range(30))  # a 300-word paragraph
    text = "\n\n".join([wrapped] * 12)
    documents = list(clean_documents(lines(text)))
    assert [len(d) for d in documents] == [7, 5]
    assert all(len(p.split()) == 300 for d in documents for p in d)
