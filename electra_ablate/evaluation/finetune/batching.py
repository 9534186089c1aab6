"""Encoded examples and dynamic padding: most of fine-tuning's speed on GLUE.

GLUE sentences are short (CoLA averages about 11 tokens), so padding every batch to 128 wastes
most of the compute. Training batches are bucketed by length: shuffle, sort within chunks of
``sort_chunk_batches`` batches, cut into batches, shuffle the batch order; each batch is padded
only to its own longest example (or as the recipe's ``padding`` says: ``loop.padded_length``).
Evaluation simply runs in length order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from electra_ablate.backbone.tokens import SpecialTokens

PAD_ID = SpecialTokens().pad


@dataclass(frozen=True)
class Examples:
    """Unpadded token ids of one split and their labels (class ids, or floats for regression)."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self.input_ids), dtype=np.int64, count=len(self))

    def subset(self, indices: Sequence[int]) -> Examples:
        return Examples(
            [self.input_ids[i] for i in indices],
            [self.token_type_ids[i] for i in indices],
            self.labels[np.asarray(indices, dtype=np.int64)],
        )

    def capped(self, cap: int | None) -> Examples:
        """A random subset of ``cap`` examples drawn with a fixed seed, in their original order,
        so every fine-tuning seed and every checkpoint trains on the same data; the one place
        any cap (training or evaluation, study or ``ablate finetune``) is applied."""
        if cap is None or cap >= len(self):
            return self
        keep = np.sort(np.random.default_rng(0).choice(len(self), size=cap, replace=False))
        return self.subset(keep)


def as_examples(data: Any) -> Examples:
    """Accept ``Examples``, a column mapping or a table (``input_ids``,
    ``token_type_ids``, ``label``), or a sequence of row dicts with the same keys."""
    if isinstance(data, Examples):
        return data
    keys = ("input_ids", "token_type_ids", "label")
    if isinstance(data, Mapping) or hasattr(data, "column_names"):
        columns = {key: list(data[key]) for key in keys}
    else:
        columns = {key: [row[key] for row in data] for key in keys}
    return Examples(
        [list(ids) for ids in columns["input_ids"]],
        [list(types) for types in columns["token_type_ids"]],
        np.asarray(columns["label"]),
    )


def train_batches(
    lengths: np.ndarray, batch_size: int, chunk_batches: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """One epoch of index batches of similar length, in random order.

    Sorting only within chunks keeps batches of mixed content (a global sort would make every
    epoch see the same batches); ``ceil(n / batch_size)`` batches per epoch, as without bucketing.
    """
    order = rng.permutation(len(lengths))
    chunk = batch_size * chunk_batches
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def eval_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    order = np.argsort(lengths, kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def collate(
    examples: Examples, indices: np.ndarray, pad_to: int | None = None
) -> dict[str, torch.Tensor]:
    """Pad the chosen examples to their longest (or to ``pad_to``), with an attention mask when
    a row is padded.

    Built in numpy and handed to torch whole: a tensor per row (and a slice assignment into the
    batch) would be host operations of their own, more than a third of an evaluation batch's
    (``bench/op_count.py``)."""
    rows = [examples.input_ids[i] for i in indices]
    lengths = np.fromiter((len(ids) for ids in rows), dtype=np.int64, count=len(rows))
    length = pad_to or int(lengths.max())
    filled = np.arange(length) < lengths[:, None]  # [B, L]: True where a row has a token
    input_ids = np.full((len(rows), length), PAD_ID, dtype=np.int64)
    token_type_ids = np.zeros((len(rows), length), dtype=np.int64)
    input_ids[filled] = np.concatenate(rows)
    token_type_ids[filled] = np.concatenate([examples.token_type_ids[i] for i in indices])
    batch = {
        "input_ids": torch.from_numpy(input_ids),
        "token_type_ids": torch.from_numpy(token_type_ids),
        "labels": torch.from_numpy(examples.labels[indices]),
    }
    if not filled.all():  # no mask means no padding (model.padding_mask)
        batch["attention_mask"] = torch.from_numpy(filled.astype(np.int64))
    return batch
