"""``prepare_pretraining``: the tokenizer and packed sequences a study pre-trains on, cached.

Two cache entries under the cache root, each built in a temporary folder and renamed into place:

- ``tokenizers/<key>/``: ``tokenizer.json``, ``vocab.txt``, ``meta.json`` (which records a hash
  of each of the other two); the key covers the corpus contents and the tokenizer settings, so
  every study on the same corpus shares it.
- ``pretraining/<key>/``: ``train/`` and ``heldout/`` (``datasets`` Arrow, ``save_to_disk``) and
  ``summary.json`` (which records the data fingerprint); the key adds the tokenizer,
  ``max_seq_len`` and the packing rules.

An entry is checked every time it is used, never trusted for having the right name: the
tokenizer's files against the hashes recorded when it was built and against each other
(``tokenizer_files_disagree``), the packed sequences against the recorded fingerprint (which
covers the tokenizer's files too) and the vocabulary's size. A damaged entry in the cache is
said in one line and rebuilt (it is derived data); one in a data bundle is refused
(``DamagedData``), as a bundle is never written into. Every use computed the fingerprint
already (0.03-0.08 s for the smoke data, 0.13-0.22 s for the objectives study's 168,200
sequences of 128 tokens, page cache warm or cold); comparing it and the other checks add
0.01-0.02 s.

Each build holds a lock on its entry (``.<key>.lock`` beside it, removed when done), so two
processes never build one entry at once, and whatever interrupted builds left behind
(``atomic_dir``'s ``.<key>.<random>.tmp`` folders and ``.<key>.old``) is removed by the next
preparation, once no process holds that entry's lock (``remove_leftovers``).

Building the cache uses ``datasets``; reading it (``load_prepared``) uses pyarrow alone, so a
compute node that runs a study from a data bundle needs no ``datasets`` (see
``electra_ablate.data.bundle``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pyarrow as pa
import torch
from rich.console import Console
from tokenizers import Tokenizer

from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.data.batches import column_matrix
from electra_ablate.data.bundle import active_bundle, bundled_pretraining, read_bundle
from electra_ablate.data.config import DataSpec
from electra_ablate.data.corpus import Document, corpus_source, heldout_split
from electra_ablate.data.packing import PackingConfig, SequencePacker, pack_documents
from electra_ablate.data.paths import cache_root, file_hash, resolve_path, settings_hash
from electra_ablate.data.tokenizer import (
    TRAINER_VERSION,
    TRAINING_SAMPLE_CHARS,
    load_tokenizer,
    load_vocab_file,
    save_tokenizer,
    special_tokens,
    tokenizer_files_disagree,
    train_wordpiece,
)
from electra_ablate.infra.errors import DataError, MixedData
from electra_ablate.infra.locks import FolderLock, current_holder, wait_message
from electra_ablate.infra.progress import warn
from electra_ablate.infra.storage import atomic_dir, atomic_write_text

PACKING_VERSION = 1
"""Part of the packed-data cache key: bump it when packing changes in a way the config misses."""

REMAKE_BUNDLE = "make it again with `ablate data prepare SPEC --bundle DIR`"


class DamagedData(DataError):
    """A tokenizer or packed-sequences folder whose files are not what was recorded when it was
    built, or do not agree with each other: rebuilt where it is the cache's, refused (exit 2)
    where it is a data bundle's. Never used: it would train on other data than its name says."""


@dataclass(frozen=True)
class PretrainingData:
    special: SpecialTokens
    vocab_size: int
    tokenizer_dir: Path
    train: pa.Table
    heldout: pa.Table
    summary: dict
    packed_dir: Path | None = None


def prepare_pretraining(
    data: DataSpec,
    max_seq_len: int,
    *,
    spec_dir: Path | None = None,
    progress: bool = False,
    packing: PackingConfig = PackingConfig(),
) -> PretrainingData:
    """Build (or reuse) the tokenizer and the packed train / held-out sequences for ``data``."""
    root = cache_root(data.cache_dir, spec_dir)
    bundle = active_bundle() if data.cache_dir is None else None  # then root is the bundle
    console = Console(stderr=True, quiet=not progress)
    try:
        source = corpus_source(data.corpus, spec_dir)
    except DataError:  # no raw corpus here: an offline node reads a data bundle's copy
        if (bundled := bundled_pretraining(data, max_seq_len, packing.as_dict())) is None:
            raise
        return _load_bundled(*bundled)
    fraction = data.corpus.heldout_fraction
    corpus_key = {**source.fingerprint(), "heldout_fraction": fraction}
    if bundle is not None:
        return _from_bundle(bundle, data, spec_dir, corpus_key, max_seq_len, packing)
    remove_leftovers(root)
    timings: dict[str, float] = {}

    @functools.cache
    def documents() -> tuple[list[Document], list[Document]]:
        with _step(console, "reading and cleaning the corpus", timings, "read_s"):
            return heldout_split(list(source.documents()), fraction)

    tokenizer_dir = _tokenizer_dir(data, spec_dir, root, corpus_key, documents, console, progress)
    tokenizer = load_tokenizer(tokenizer_dir)
    special = special_tokens(tokenizer)

    packed_dir = (
        root / "pretraining" / _packed_name(tokenizer_dir.name, corpus_key, max_seq_len, packing)
    )

    def cached() -> PretrainingData:
        return load_prepared(tokenizer_dir, packed_dir)

    if (prepared := _reused(packed_dir, "summary.json", cached, say=True)) is not None:
        return prepared
    with _building(packed_dir):
        if (prepared := _reused(packed_dir, "summary.json", cached, say=False)) is not None:
            return prepared  # another process built it while this one waited
        with atomic_dir(packed_dir) as tmp:
            train_docs, heldout_docs = documents()
            with _step(console, "packing sequences", timings, "packing_s"):
                packer = SequencePacker(max_seq_len, special, packing)
                tables = {
                    "train": pack_documents(train_docs, tokenizer, packer),
                    "heldout": pack_documents(heldout_docs, tokenizer, packer),
                }
            if tables["train"].num_rows == 0:
                raise DataError("the corpus produced no training sequences")
            for split, table in tables.items():
                _save_quietly(table, tmp / split)
            meta = json.loads((tokenizer_dir / "meta.json").read_text())
            summary = {
                "fingerprint": data_fingerprint(tokenizer_dir, tables),
                "documents": {"train": len(train_docs), "heldout": len(heldout_docs)},
                **_sequence_stats(tables, special),
                "vocab_size": tokenizer.get_vocab_size(),
                "max_seq_len": max_seq_len,
                "seconds": {"tokenizer_s": meta["train_s"], **timings},
            }
            atomic_write_text(tmp / "summary.json", json.dumps(summary, indent=2))
    return load_prepared(tokenizer_dir, packed_dir)


T = TypeVar("T")


def _reused(directory: Path, marker: str, load: Callable[[], T], say: bool) -> T | None:
    """``load()``: the cache entry ``directory``, checked, where it is there (its ``marker``
    file is written last); None where it has to be built: absent, or damaged (said in one line
    when ``say``, as the entry is then built again)."""
    if not (directory / marker).is_file():
        return None
    try:
        return load()
    except DamagedData as exc:
        if say:
            warn(f"{exc}: rebuilding it")
        return None


@contextmanager
def _building(directory: Path) -> Iterator[None]:
    """Hold the build lock of the cache entry ``directory`` (waiting, with one line, while
    another process builds it), its leftovers from interrupted builds removed first. The lock
    file is removed before the lock is released (``FolderLock`` lets a waiter notice that)."""
    lock_file = directory.parent / f".{directory.name}.lock"
    lock = FolderLock(lock_file)
    lock.acquire(wait=True, on_wait=wait_message(directory))
    try:
        for leftover in directory.parent.glob(f".{directory.name}.*"):
            if _LEFTOVER.fullmatch(leftover.name):
                shutil.rmtree(leftover, ignore_errors=True)
        yield
    finally:
        lock_file.unlink(missing_ok=True)
        lock.release()


_LEFTOVER = re.compile(r"\.(?P<key>[0-9a-f]+)\.(?:.+\.tmp|old)")
"""What an interrupted ``atomic_dir`` leaves beside an entry: its temporary folder
(``.<key>.<random>.tmp``) or the entry it was swapping out (``.<key>.old``)."""


def remove_leftovers(root: Path) -> None:
    """Remove what interrupted builds left in the cache at ``root`` (``_LEFTOVER``), for entries
    no process is building now: a build holds its entry's lock for as long as its temporary
    folder exists (``_building``), so a live build's folder is never touched, and a killed one's
    goes the next time any study prepares its data here."""
    for kind in ("tokenizers", "pretraining"):
        folder = root / kind
        try:
            names = os.listdir(folder)
        except OSError:  # no such cache yet
            continue
        for name in names:
            found = _LEFTOVER.fullmatch(name)
            if found and current_holder(folder / f".{found['key']}.lock") is None:
                shutil.rmtree(folder / name, ignore_errors=True)


def data_vocab(data: PretrainingData) -> Vocab:
    """Token frequencies of the packed training set: the unigram distribution objectives use."""
    ids = column_matrix(data.train, "input_ids").ravel()
    counts = torch.from_numpy(np.bincount(ids, minlength=data.vocab_size)[: data.vocab_size])
    return Vocab(counts, data.special)


def _packed_name(tokenizer: str, corpus_key: dict, max_seq_len: int, packing: PackingConfig) -> str:
    return settings_hash(
        {
            "tokenizer": tokenizer,
            "corpus": corpus_key,
            "max_seq_len": max_seq_len,
            "packing": packing.as_dict(),
            "version": PACKING_VERSION,
        }
    )


def _from_bundle(
    bundle: Path,
    data: DataSpec,
    spec_dir: Path | None,
    corpus_key: dict,
    max_seq_len: int,
    packing: PackingConfig,
) -> PretrainingData:
    """The active bundle's data for ``data``, where the raw corpus is here too. A bundle is
    read-only to the studies that use it: one made for other settings or from another corpus
    is refused, never built into."""
    bundled = bundled_pretraining(data, max_seq_len, packing.as_dict())
    if bundled is None:
        raise DataError(
            f"the data bundle {bundle} holds no data for this spec's data settings (it was "
            f"made for study {read_bundle(bundle).get('study')!r}): make one for this spec with "
            "`ablate data prepare SPEC --bundle DIR`, or run without it; a bundle is never "
            "written into"
        )
    tokenizer = settings_hash(_tokenizer_key(data, spec_dir, corpus_key))
    expected = (tokenizer, _packed_name(tokenizer, corpus_key, max_seq_len, packing))
    if (bundled[0].name, bundled[1].name) != expected:
        prepared = _load_bundled(*bundled)
        raise MixedData(
            f"the data bundle {bundle} holds data {prepared.summary['fingerprint']}, made from "
            f"another corpus or tokenizer than the one here (its tokenizer {bundled[0].name}, "
            f"this corpus's {tokenizer}): use the bundle made from this data, or run without it"
        )
    return _load_bundled(*bundled)


def _load_bundled(tokenizer_dir: Path, packed_dir: Path) -> PretrainingData:
    """A data bundle's folders, checked like the cache's; a damaged one is refused in one line
    (a bundle is read-only to the studies that use it, so it is never rebuilt in place)."""
    try:
        return load_prepared(tokenizer_dir, packed_dir)
    except DamagedData as exc:
        bundle = packed_dir.parent.parent
        raise DamagedData(f"{exc}: the data bundle {bundle} is damaged; {REMAKE_BUNDLE}") from None


def load_prepared(tokenizer_dir: Path, packed_dir: Path) -> PretrainingData:
    """A tokenizer folder and a packed-sequences folder, as built above (cache or bundle),
    checked: ``DamagedData`` where the tokenizer's files are not the ones recorded, or the
    packed sequences' fingerprint is not the one ``summary.json`` recorded, or they hold ids
    the vocabulary lacks."""
    tokenizer = check_tokenizer(tokenizer_dir)
    try:
        train = read_arrow_split(packed_dir / "train")
        heldout = read_arrow_split(packed_dir / "heldout")
        summary = json.loads((packed_dir / "summary.json").read_text())
        recorded = summary["fingerprint"]
    except (DataError, OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        problem = str(exc) if isinstance(exc, DataError) else f"its summary.json: {exc!r}"
        raise DamagedData(f"{packed_dir} cannot be read ({problem}; damaged?)") from None
    # From the files as they are now (a fraction of a second), compared with the record of
    # them: a cache or bundle whose files changed since they were built is damaged.
    tables = {"train": train, "heldout": heldout}
    fingerprint, low, high = _packed_digest(tokenizer_dir, tables)
    if fingerprint != recorded:
        raise DamagedData(
            f"{packed_dir} does not match its recorded fingerprint (summary.json says "
            f"{recorded}, its files give {fingerprint}; damaged?)"
        )
    vocab_size = tokenizer.get_vocab_size()
    if low < 0 or high >= vocab_size:
        raise DamagedData(
            f"{packed_dir} holds token id {low if low < 0 else high}, outside its tokenizer's "
            f"{vocab_size} ids (damaged?)"
        )
    summary["fingerprint"] = fingerprint
    return PretrainingData(
        special=special_tokens(tokenizer),
        vocab_size=vocab_size,
        tokenizer_dir=tokenizer_dir,
        train=train,
        heldout=heldout,
        summary=summary,
        packed_dir=packed_dir,
    )


def read_arrow_split(folder: Path) -> pa.Table:
    """A split that ``datasets`` saved (``save_to_disk``), memory-mapped with pyarrow alone:
    ``state.json`` lists its Arrow stream files in order."""
    try:
        state = json.loads((folder / "state.json").read_text())
        files = [folder / entry["filename"] for entry in state["_data_files"]]
        tables = [pa.ipc.open_stream(pa.memory_map(str(f))).read_all() for f in files]
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowInvalid) as exc:
        raise DataError(f"packed sequences in {folder} cannot be read ({exc})") from None
    if not tables:
        raise DataError(f"packed sequences in {folder} list no data files")
    return pa.concat_tables(tables)


TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")


def data_fingerprint(tokenizer_dir: Path, tables: dict) -> str:
    """What a study pre-trains and fine-tunes on, as one short hash: the tokenizer's files and
    every packed sequence (ids and segment ids of both splits), not the folders' other files
    (``datasets`` writes a random fingerprint of its own into them). Two caches, bundles or
    machines with equal fingerprints hold the same data, byte for byte."""
    return _packed_digest(tokenizer_dir, tables)[0]


def _packed_digest(tokenizer_dir: Path, tables: dict) -> tuple[str, int, int]:
    """``data_fingerprint`` and the smallest and largest token id, in one pass over the ids."""
    digest = hashlib.blake2b(digest_size=8)
    for name in TOKENIZER_FILES:
        digest.update(name.encode() + b"\0" + (Path(tokenizer_dir) / name).read_bytes())
    low, high = 0, 0
    for split in sorted(tables):
        for column in ("input_ids", "token_type_ids"):
            digest.update(f"{split}/{column}\0".encode())
            for chunk in tables[split].column(column).chunks:  # the same bytes, however chunked
                values = np.ascontiguousarray(chunk.flatten().to_numpy(zero_copy_only=False))
                digest.update(values)
                if column == "input_ids" and values.size:
                    low, high = min(low, int(values.min())), max(high, int(values.max()))
    return digest.hexdigest(), low, high


def check_tokenizer(directory: Path) -> Tokenizer:
    """The tokenizer in ``directory``, once its files are shown to be the ones it was built
    with: the hashes ``meta.json`` recorded (a folder built before they were recorded has
    none; a bundle's copy keeps them), and ``vocab.txt`` agreeing with ``tokenizer.json``.
    ``DamagedData`` otherwise."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        recorded = meta.get("files", {})  # only names it must hold: a bundle is untrusted
        changed = [
            name
            for name in TOKENIZER_FILES
            if name in recorded and file_hash(directory / name) != recorded[name]
        ]
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise DamagedData(f"{directory} cannot be read ({exc!r}; damaged?)") from None
    if changed:
        raise DamagedData(
            f"{directory}: its {' and '.join(changed)} changed since it was built (damaged?)"
        )
    if (problem := tokenizer_files_disagree(directory)) is not None:
        raise DamagedData(f"{directory}: {problem} (damaged?)")
    return load_tokenizer(directory)


def _tokenizer_dir(
    data: DataSpec,
    spec_dir: Path | None,
    root: Path,
    corpus_key: dict,
    documents: Callable[[], tuple[list[Document], list[Document]]],
    console: Console,
    progress: bool,
) -> Path:
    """The cached tokenizer folder, built from the vocab file or trained on the train split."""
    key = _tokenizer_key(data, spec_dir, corpus_key)
    directory = root / "tokenizers" / settings_hash(key)

    def cached() -> Path:
        check_tokenizer(directory)
        return directory

    if _reused(directory, "meta.json", cached, say=True) is not None:
        return directory
    with _building(directory):
        if _reused(directory, "meta.json", cached, say=False) is not None:
            return directory  # another process built it while this one waited
        _build_tokenizer(directory, data, spec_dir, key, documents, console, progress)
    return directory


def _build_tokenizer(
    directory: Path,
    data: DataSpec,
    spec_dir: Path | None,
    key: dict,
    documents: Callable[[], tuple[list[Document], list[Document]]],
    console: Console,
    progress: bool,
) -> None:
    """Build the tokenizer folder ``directory`` (under its build lock, ``_building``)."""
    settings = data.tokenizer
    timings: dict[str, float] = {}
    with atomic_dir(directory) as tmp:
        if settings.vocab_file is not None:
            vocab_file = resolve_path(settings.vocab_file, spec_dir)
            tokenizer = load_vocab_file(vocab_file, settings.lowercase)
        else:
            train_docs, _ = documents()
            with _step(console, "training the WordPiece tokenizer", timings, "train_s"):
                tokenizer = train_wordpiece(
                    train_docs, settings.vocab_size, settings.lowercase, progress=progress
                )
        save_tokenizer(tokenizer, tmp)
        meta = {
            "settings": key,
            "train_s": timings.get("train_s", 0.0),
            "files": {name: file_hash(tmp / name) for name in TOKENIZER_FILES},
        }
        atomic_write_text(tmp / "meta.json", json.dumps(meta, indent=2))


def _tokenizer_key(data: DataSpec, spec_dir: Path | None, corpus_key: dict) -> dict:
    """What the tokenizer is built from: the vocab file's contents, or the corpus and the
    training settings."""
    settings = data.tokenizer
    if settings.vocab_file is not None:
        vocab_file = resolve_path(settings.vocab_file, spec_dir)
        if not vocab_file.is_file():
            raise DataError(f"tokenizer vocab file {vocab_file} does not exist")
        return {"vocab_file": file_hash(vocab_file), "lowercase": settings.lowercase}
    return {
        "corpus": corpus_key,
        "vocab_size": settings.vocab_size,
        "lowercase": settings.lowercase,
        "sample_chars": TRAINING_SAMPLE_CHARS,
        "trainer": TRAINER_VERSION,
    }


def _sequence_stats(tables: dict, special: SpecialTokens) -> dict:
    """Sequence and text-token counts (no [CLS]/[SEP]/padding), the padding share, and the
    held-out ``[UNK]`` rate as a share of its text tokens."""
    stats: dict = {"sequences": {}, "tokens": {}}
    for split, table in tables.items():
        ids = column_matrix(table, "input_ids")
        text = int((~np.isin(ids, (special.pad, special.cls, special.sep))).sum())
        stats["sequences"][split] = len(ids)
        stats["tokens"][split] = text
        if split == "train":
            stats["padding_fraction"] = round(float((ids == special.pad).mean()), 4)
        else:
            stats["unk_rate_heldout"] = int((ids == special.unk).sum()) / max(1, text)
    return stats


def _save_quietly(table: pa.Table, path: Path) -> None:
    import datasets  # only to build the cache: reading it needs pyarrow alone

    dataset = datasets.Dataset(table)
    was_disabled = datasets.utils.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        dataset.save_to_disk(str(path))
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()


@contextmanager
def _step(console: Console, message: str, timings: dict, name: str) -> Iterator[None]:
    start = time.perf_counter()
    with console.status(message) if console.is_terminal else nullcontext():
        yield
    timings[name] = round(time.perf_counter() - start, 2)
