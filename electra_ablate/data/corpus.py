"""The pre-training corpus: reading, cleaning, documents, and the held-out split.

A *document* is a tuple of paragraphs that belong together: packing never lets a sequence
cross a document boundary, and the held-out split moves whole documents. Two input shapes are
recognised line by line, so one folder can mix them:

- WikiExtractor output: each ``<doc ...>`` ... ``</doc>`` block is one document, its first line
  (the repeated title) is dropped, and blocks with nothing after the title (stubs, redirects)
  are dropped.
- Plain text (books, hub datasets): blank lines end paragraphs, wrapped lines are joined, and
  consecutive paragraphs are grouped into documents of about ``BOOK_DOCUMENT_WORDS`` words, so
  a novel yields many documents instead of one that the held-out split could only take whole.
  Project Gutenberg boilerplate is cut: text before a ``*** START OF ...`` line and from an
  ``*** END OF ...`` line onwards.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from electra_ablate.data.config import CorpusSpec
from electra_ablate.data.paths import file_hash, resolve_path
from electra_ablate.infra.errors import DataError

Document = tuple[str, ...]

CLEANING_VERSION = 1
"""Part of every cache key: bump it when a cleaning rule changes so old caches are rebuilt."""

BOOK_DOCUMENT_WORDS = 2000

_GUTENBERG_START = re.compile(r"^\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
_GUTENBERG_END = re.compile(r"^\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)


def clean_documents(lines: Iterable[str]) -> Iterator[Document]:
    """Documents from the lines of one file (or one hub split), cleaned as the module says."""
    plain = _PlainDocuments()
    wiki: list[str] | None = None  # lines of the open <doc> block, title line included
    for raw in lines:
        line = raw.strip()
        if wiki is not None:
            if line == "</doc>":
                if len(wiki) > 1:
                    yield tuple(wiki[1:])
                wiki = None
            elif line:
                wiki.append(line)
        elif line.startswith("<doc ") and line.endswith(">"):
            if document := plain.take():
                yield document
            wiki = []
        elif _GUTENBERG_START.match(line):
            plain.take()  # everything before the marker is Project Gutenberg's header
        elif _GUTENBERG_END.match(line):
            break
        elif document := (plain.add_line(line) if line else plain.end_paragraph()):
            yield document
    if wiki is not None and len(wiki) > 1:
        yield tuple(wiki[1:])  # a file cut off inside its last <doc> block
    if document := plain.take():
        yield document


class _PlainDocuments:
    """Plain text grouped into documents of whole paragraphs, about BOOK_DOCUMENT_WORDS each."""

    def __init__(self) -> None:
        self.paragraphs: list[str] = []
        self.lines: list[str] = []  # of the paragraph being read
        self.words = 0
        self.paragraph_words = 0

    def add_line(self, line: str) -> Document | None:
        words = line.split()
        self.lines.append(" ".join(words))
        self.words += len(words)
        self.paragraph_words += len(words)
        if self.paragraph_words >= BOOK_DOCUMENT_WORDS:  # a file without blank lines
            return self.end_paragraph()
        return None

    def end_paragraph(self) -> Document | None:
        """Close the paragraph; the document once it is long enough."""
        if self.lines:
            self.paragraphs.append(" ".join(self.lines))
            self.lines, self.paragraph_words = [], 0
        return self.take() if self.words >= BOOK_DOCUMENT_WORDS else None

    def take(self) -> Document | None:
        if self.lines:
            self.paragraphs.append(" ".join(self.lines))
        document = tuple(self.paragraphs)
        self.paragraphs, self.lines, self.words, self.paragraph_words = [], [], 0, 0
        return document or None


def read_lines(path: Path) -> Iterator[str]:
    """Lines of a text file, gzipped or not, without a byte-order mark."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="replace") as f:
            yield from f
    except (OSError, EOFError) as e:
        raise DataError(f"cannot read corpus file {path}: {e}") from e


@dataclass(frozen=True)
class CorpusSource:
    """The files (or the hub dataset) a corpus is read from, in reading order."""

    files: tuple[Path, ...]
    hub: str | None
    text_column: str
    max_documents: int | None

    def fingerprint(self) -> dict:
        """What the documents depend on: file contents (not names or dates), or the hub name."""
        return {
            "files": [file_hash(f) for f in self.files],
            "hub": self.hub,
            "text_column": self.text_column if self.hub else None,
            "max_documents": self.max_documents,
            "cleaning": CLEANING_VERSION,
        }

    def documents(self) -> Iterator[Document]:
        if self.hub is not None:
            stream = clean_documents(_hub_lines(self.hub, self.text_column))
        else:
            stream = itertools.chain.from_iterable(
                clean_documents(read_lines(f)) for f in self.files
            )
        return itertools.islice(stream, self.max_documents)


def corpus_source(spec: CorpusSpec, spec_dir: Path | None = None) -> CorpusSource:
    """Resolve the spec's corpus: each path is a file, a folder (every file under it) or a glob."""
    files: list[Path] = []
    for raw in spec.paths:
        path = resolve_path(raw, spec_dir)
        if path.is_file():
            found = [path]
        elif path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        else:
            found = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
            found = [p for p in found if p.is_file()]
        if not found:
            raise DataError(f"corpus path {raw!r} ({path}) matches no files")
        files.extend(found)
    return CorpusSource(tuple(files), spec.hub, spec.text_column, spec.max_documents)


def hub_name_and_config(name: str) -> tuple[str, str | None]:
    """``path:config`` explicitly, or the last part of ``name/config`` / ``org/name/config``."""
    if ":" in name:
        path, config = name.split(":", 1)
        return path, config or None
    parts = name.split("/")
    if len(parts) == 1:
        return name, None
    return "/".join(parts[:-1]), parts[-1]


def _hub_lines(name: str, text_column: str) -> Iterator[str]:
    import datasets

    path, config = hub_name_and_config(name)
    try:
        split = datasets.load_dataset(path, config, split="train")
    except Exception as e:  # offline, unknown name, bad config: all one message for the user
        raise DataError(
            f"cannot load hub corpus {name!r} (dataset {path!r}, config {config!r}): {e}"
        ) from e
    if text_column not in split.column_names:
        raise DataError(
            f"hub corpus {name!r} has no column {text_column!r} "
            f"(found: {', '.join(split.column_names)})"
        )
    for start in range(0, len(split), 10_000):
        for text in split[start : start + 10_000][text_column]:
            yield from (text or "").split("\n")


def heldout_split(
    documents: list[Document], fraction: float
) -> tuple[list[Document], list[Document]]:
    """(train, held-out): a document is held out when its content hash falls below ``fraction``.

    Hashing the content keeps each document on its side of the split however the corpus is
    ordered or limited. At least one document is held out so the held-out metrics exist.
    """
    if len(documents) < 2:
        raise DataError(
            f"the corpus has {len(documents)} document(s) after cleaning; "
            "need at least 2 (one for training, one held out)"
        )
    scores = [_unit_hash(d) for d in documents]
    heldout = {i for i, s in enumerate(scores) if s < fraction}
    if not heldout:
        heldout = {min(range(len(documents)), key=scores.__getitem__)}
    if len(heldout) == len(documents):
        heldout.discard(max(range(len(documents)), key=scores.__getitem__))
    train = [d for i, d in enumerate(documents) if i not in heldout]
    return train, [documents[i] for i in sorted(heldout)]


def _unit_hash(document: Document) -> float:
    digest = hashlib.blake2b("\n".join(document).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
