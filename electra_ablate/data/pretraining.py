"""``prepare_pretraining``: the tokenizer and packed sequences a study pre-trains on, cached.

Two cache entries under the cache root, each built in a temporary folder and renamed into place
(so an interrupted build leaves nothing behind):

- ``tokenizers/<key>/``: ``tokenizer.json``, ``vocab.txt``, ``meta.json``; the key covers the
  corpus contents and the tokenizer settings, so every study on the same corpus shares it.
- ``pretraining/<key>/``: ``train/`` and ``heldout/`` (``datasets`` Arrow, ``save_to_disk``) and
  ``summary.json``; the key adds the tokenizer, ``max_seq_len`` and the packing rules.

Building the cache uses ``datasets``; reading it (``load_prepared``) uses pyarrow alone, so a
compute node that runs a study from a data bundle needs no ``datasets`` (see
``electra_ablate.data.bundle``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
from rich.console import Console

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
    train_wordpiece,
)
from electra_ablate.infra.errors import DataError, MixedData
from electra_ablate.infra.storage import atomic_dir, atomic_write_text

PACKING_VERSION = 1
"""Part of the packed-data cache key: bump it when packing changes in a way the config misses."""


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
        return load_prepared(*bundled)
    fraction = data.corpus.heldout_fraction
    corpus_key = {**source.fingerprint(), "heldout_fraction": fraction}
    if bundle is not None:
        return _from_bundle(bundle, data, spec_dir, corpus_key, max_seq_len, packing)
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
    if not (packed_dir / "summary.json").is_file():
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
        prepared = load_prepared(*bundled)
        raise MixedData(
            f"the data bundle {bundle} holds data {prepared.summary['fingerprint']}, made from "
            f"another corpus or tokenizer than the one here (its tokenizer {bundled[0].name}, "
            f"this corpus's {tokenizer}): use the bundle made from this data, or run without it"
        )
    return load_prepared(*bundled)


def load_prepared(tokenizer_dir: Path, packed_dir: Path) -> PretrainingData:
    """A tokenizer folder and a packed-sequences folder, as built above (cache or bundle)."""
    tokenizer = load_tokenizer(tokenizer_dir)
    train = read_arrow_split(packed_dir / "train")
    heldout = read_arrow_split(packed_dir / "heldout")
    summary = json.loads((packed_dir / "summary.json").read_text())
    # From the files as they are now (a fraction of a second), never from a record of them: a
    # cache or bundle whose files changed since they were built shows another fingerprint.
    summary["fingerprint"] = data_fingerprint(tokenizer_dir, {"train": train, "heldout": heldout})
    return PretrainingData(
        special=special_tokens(tokenizer),
        vocab_size=tokenizer.get_vocab_size(),
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
    digest = hashlib.blake2b(digest_size=8)
    for name in TOKENIZER_FILES:
        digest.update(name.encode() + b"\0" + (Path(tokenizer_dir) / name).read_bytes())
    for split in sorted(tables):
        for column in ("input_ids", "token_type_ids"):
            digest.update(f"{split}/{column}\0".encode())
            for chunk in tables[split].column(column).chunks:  # the same bytes, however chunked
                digest.update(np.ascontiguousarray(chunk.flatten().to_numpy(zero_copy_only=False)))
    return digest.hexdigest()


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
    settings = data.tokenizer
    key = _tokenizer_key(data, spec_dir, corpus_key)
    directory = root / "tokenizers" / settings_hash(key)
    if (directory / "meta.json").is_file():
        return directory
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
        meta = {"settings": key, "train_s": timings.get("train_s", 0.0)}
        atomic_write_text(tmp / "meta.json", json.dumps(meta, indent=2))
    return directory


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
