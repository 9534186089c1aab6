"""A small corpus to build a data cache from (``write_wiki``), and how tests damage a prepared
cache as a stray write would: packed ids overwritten in place, file names and sizes unchanged
(``electra_ablate.data.pretraining`` must notice)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from electra_ablate.data.batches import column_matrix

WORDS = [
    "the",
    "a",
    "river",
    "town",
    "old",
    "new",
    "king",
    "queen",
    "walked",
    "found",
    "built",
    "songs",
    "of",
    "in",
    "and",
    "over",
    "under",
    "village",
    "mountain",
    "sailed",
    "wrote",
    "famous",
    "quiet",
    "northern",
    "bridge",
    "market",
    "church",
    "school",
    "born",
    "played",
    "team",
    "season",
    "league",
    "music",
    "album",
    "released",
    "station",
    "railway",
    "opened",
]


def write_wiki(path: Path, documents: int, seed: int = 0) -> None:
    """A WikiExtractor-style file: a stub every fifth article, capitalised sentences."""
    rng = random.Random(seed)
    blocks = []
    for d in range(documents):
        title = f"Article {d}"
        body = []
        if d % 5:
            for _ in range(rng.randint(1, 4)):
                sentences = [
                    " ".join(rng.choices(WORDS, k=rng.randint(4, 14))).capitalize() + "."
                    for _ in range(rng.randint(1, 5))
                ]
                body.append(" ".join(sentences))
        blocks.append(f'<doc id="{d}" url="?curid={d}" title="{title}">\n{title}\n\n')
        blocks.append("\n".join(body) + "\n</doc>\n")
    path.write_text("".join(blocks), encoding="utf-8")


def rewrite_split(folder: Path, change: Callable[[np.ndarray], object]) -> None:
    """Overwrite a saved split's Arrow files in place with ``change(ids)`` as their ids: the
    damage a stray write does, names and sizes unchanged."""
    state = json.loads((folder / "state.json").read_text())
    for entry in state["_data_files"]:
        path = folder / entry["filename"]
        table = pa.ipc.open_stream(pa.py_buffer(path.read_bytes())).read_all()
        ids = column_matrix(table, "input_ids").copy()
        change(ids)
        column = pa.FixedSizeListArray.from_arrays(ids.reshape(-1), ids.shape[1])
        table = table.set_column(table.schema.get_field_index("input_ids"), "input_ids", column)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as out:
            out.write_table(table)
        data = sink.getvalue().to_pybytes()
        assert len(data) == path.stat().st_size
        with open(path, "r+b") as f:  # in place, as a memory-mapped reader sees a stray write
            f.write(data)


def swap_two_words(ids: np.ndarray) -> None:
    """In-vocabulary damage: the two lowest ids after the special tokens trade places."""
    a, b = np.unique(ids[ids > 4], return_counts=True)[0][:2]
    ids[ids == a], ids[ids == b] = b, a
