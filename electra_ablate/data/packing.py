"""Packing documents into fixed-length ``[CLS] A [SEP] B [SEP]`` pre-training sequences.

The rules are ELECTRA's (``build_pretraining_dataset.py`` in google-research/electra): sentences
of one document are gathered until they fill the target length; A takes about half of them and
B the rest; with probability ``single_segment_prob`` the example has only A (as classification
inputs do), and with probability ``short_target_prob`` the next example aims at a random
shorter length, so the model also sees short, padded inputs. Two deliberate differences: the
three special tokens count towards the target, so full-length examples are not routinely cut,
and once B has started no later sentence goes back to A, so A and B are each contiguous text.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer

from electra_ablate.backbone.tokens import SpecialTokens
from electra_ablate.data.corpus import Document

Sentence = list[int]

# A sentence ends at . ! or ? (plus closing quotes/brackets) before whitespace and a capital,
# digit or opening quote. Wrong splits ("Mr. Smith") only move a segment boundary.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s+[\"'“‘(\[]?[A-Z0-9])")


@dataclass(frozen=True)
class PackingConfig:
    single_segment_prob: float = 0.1
    short_target_prob: float = 0.05
    min_short_target: int = 5
    seed: int = 12345

    def as_dict(self) -> dict:
        return asdict(self)


def split_sentences(paragraph: str) -> list[str]:
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        sentences.append(paragraph[start : match.end()].strip())
        start = match.end()
    sentences.append(paragraph[start:].strip())
    return [s for s in sentences if s]


def tokenize_documents(documents: Sequence[Document], tokenizer: Tokenizer) -> list[list[Sentence]]:
    """Each document as its list of sentences, each sentence as token ids (no special tokens)."""
    sentences, owners = [], []
    for i, document in enumerate(documents):
        for paragraph in document:
            split = split_sentences(paragraph)
            sentences.extend(split)
            owners.extend([i] * len(split))
    encoded = tokenizer.encode_batch_fast(sentences, add_special_tokens=False)
    tokenized: list[list[Sentence]] = [[] for _ in documents]
    for owner, encoding in zip(owners, encoded, strict=True):
        if encoding.ids:
            tokenized[owner].append(encoding.ids)
    return tokenized


class SequencePacker:
    """Turns tokenised documents into packed examples; its random state runs across documents,
    so the output depends only on the input order and the seed."""

    def __init__(self, max_seq_len: int, special: SpecialTokens, config: PackingConfig) -> None:
        self.max_seq_len = max_seq_len
        self.special = special
        self.config = config
        self.rng = random.Random(config.seed)
        self.target = self._next_target()

    def pack(self, document: list[Sentence]) -> Iterator[tuple[list[int], list[int]]]:
        """(input_ids, token_type_ids) of each example from one document, unpadded."""
        budget = self.max_seq_len - 3
        gathered: list[Sentence] = []
        length = 0
        for sentence in document:
            # A sentence longer than any example is cut into pieces instead of being truncated.
            for start in range(0, len(sentence), budget):
                piece = sentence[start : start + budget]
                gathered.append(piece)
                length += len(piece)
                if length >= self.target - 3:
                    yield self._example(gathered)
                    gathered, length = [], 0
        if gathered:
            yield self._example(gathered)

    def _example(self, sentences: list[Sentence]) -> tuple[list[int], list[int]]:
        if self.rng.random() < self.config.single_segment_prob:
            first_target = math.inf
        else:
            first_target = (self.target - 3) // 2
        first: list[int] = []
        second: list[int] = []
        for sentence in sentences:
            # A sentence joins A while B is empty and A is empty or has room for it; the first
            # sentence that would overflow A goes there half of the time, so A's length varies.
            if not second and (
                not first
                or len(first) + len(sentence) < first_target
                or (len(first) < first_target and self.rng.random() < 0.5)
            ):
                first += sentence
            else:
                second += sentence
        first = first[: self.max_seq_len - 2]
        second = second[: max(0, self.max_seq_len - len(first) - 3)]
        self.target = self._next_target()

        s = self.special
        ids = [s.cls, *first, s.sep]
        types = [0] * len(ids)
        if second:
            ids += [*second, s.sep]
            types += [1] * (len(second) + 1)
        return ids, types

    def _next_target(self) -> int:
        if self.rng.random() < self.config.short_target_prob:
            return self.rng.randint(self.config.min_short_target, self.max_seq_len)
        return self.max_seq_len


def pack_documents(
    documents: Sequence[Document],
    tokenizer: Tokenizer,
    packer: SequencePacker,
    chunk_documents: int = 2000,
) -> pa.Table:
    """All examples from ``documents``, in order; tokenised a chunk at a time so memory holds
    token lists for one chunk only."""
    tables = []
    for start in range(0, len(documents), chunk_documents):
        tokenized = tokenize_documents(documents[start : start + chunk_documents], tokenizer)
        examples = [example for document in tokenized for example in packer.pack(document)]
        tables.append(padded_table(examples, packer.max_seq_len, packer.special.pad))
    if not tables:
        return padded_table([], packer.max_seq_len, packer.special.pad)
    return pa.concat_tables(tables).combine_chunks()


def padded_table(
    examples: Sequence[tuple[list[int], list[int]]], max_seq_len: int, pad: int
) -> pa.Table:
    """Examples padded to ``max_seq_len`` as fixed-size list columns (numpy gives [N, L])."""
    input_ids = np.full((len(examples), max_seq_len), pad, dtype=np.int32)
    token_type_ids = np.zeros((len(examples), max_seq_len), dtype=np.int8)
    for row, (ids, types) in enumerate(examples):
        input_ids[row, : len(ids)] = ids
        token_type_ids[row, : len(types)] = types
    return pa.table(
        {
            "input_ids": pa.FixedSizeListArray.from_arrays(input_ids.reshape(-1), max_seq_len),
            "token_type_ids": pa.FixedSizeListArray.from_arrays(
                token_type_ids.reshape(-1), max_seq_len
            ),
        }
    )
