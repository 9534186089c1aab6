"""The WordPiece tokenizer: trained on the corpus, or loaded from an existing vocabulary.

Whatever the origin, the cached folder holds a ``tokenizer.json`` with the BERT normaliser,
pre-tokeniser and the ``[CLS] A [SEP] B [SEP]`` template (so sentence pairs encode the same way
here, in fine-tuning and in a ``transformers`` export) and the matching ``vocab.txt``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import WordPiece

from electra_ablate.backbone.tokens import SPECIAL_TOKENS, SpecialTokens
from electra_ablate.data.corpus import Document
from electra_ablate.infra.errors import DataError

TRAINING_SAMPLE_CHARS = 20_000_000
"""Train on at most about this many characters: a stride sample of the documents. WordPiece
statistics settle long before that while training time grows with it (shared 72 MB corpus on
2 cores: 8-17 s for the sample, 30 s for all of it, held-out [UNK] rate 0.0% either way)."""

TRAINER_VERSION = 2
"""Part of the trained tokenizer's cache key: 2 is the deterministic training of
``train_wordpiece`` (1 let the library number ties, differently in every process)."""


def special_tokens(tokenizer: Tokenizer) -> SpecialTokens:
    """The ids of ``[PAD] [UNK] [CLS] [SEP] [MASK]``; padding elsewhere assumes ``[PAD]`` is 0."""
    ids = {name: tokenizer.token_to_id(name) for name in SPECIAL_TOKENS}
    missing = [name for name, i in ids.items() if i is None]
    if missing:
        raise DataError(f"the tokenizer's vocabulary lacks {' '.join(missing)}")
    if ids["[PAD]"] != 0:
        raise DataError(f"the tokenizer has [PAD] at id {ids['[PAD]']}; it must be id 0")
    return SpecialTokens(
        pad=ids["[PAD]"], unk=ids["[UNK]"], cls=ids["[CLS]"], sep=ids["[SEP]"], mask=ids["[MASK]"]
    )


def train_wordpiece(
    documents: Sequence[Document], vocab_size: int, lowercase: bool, progress: bool = False
) -> Tokenizer:
    """A WordPiece tokenizer trained on (a stride sample of) ``documents``, the same vocabulary
    with the same ids in every process.

    The ``tokenizers`` trainer is not deterministic on its own: it numbers the ``##x``
    continuation characters in the order it meets them in a hash map (a random order per
    process), breaks ties between equally frequent merges by those ids, and cuts the alphabet
    at ``limit_alphabet`` among equally frequent characters in hash order, so two processes
    could train different vocabularies (and pack the corpus differently). Everything it would
    decide by hash order is decided here first, by a stable key, and handed to it:

    1. the alphabet: the ``ALPHABET_LIMIT`` most frequent characters of the normalised sample,
       ties broken by code point (given as ``initial_alphabet``, so the trainer's own cut keeps
       exactly these);
    2. the continuation characters: a first trainer pass that stops before any merge finds which
       ``##x`` occur; the real pass gets them, sorted, right after the special tokens, so they
       have fixed ids before it meets them and every tie it breaks by id is broken the same way.

    The merges themselves are then deterministic (counts are sums; ties go by id). Ids: the
    special tokens 0..4 in ``SPECIAL_TOKENS`` order (matching ``SpecialTokens``), the ``##x``
    characters, the alphabet by code point, then the merged pieces in the order they were made.
    """
    total = sum(len(p) for d in documents for p in d)
    stride = max(1, math.ceil(total / TRAINING_SAMPLE_CHARS))
    sample = documents[::stride]

    def paragraphs() -> Iterator[str]:
        for document in sample:
            yield from document

    alphabet = _alphabet(paragraphs(), lowercase)
    found = _train(paragraphs(), 1, list(SPECIAL_TOKENS), alphabet, lowercase, False)
    continuation = sorted(t for t in found.get_vocab() if t.startswith("##"))
    trained = _train(
        paragraphs(), vocab_size, [*SPECIAL_TOKENS, *continuation], alphabet, lowercase, progress
    )
    # Rebuilt from the vocabulary: the ``##x`` tokens were special only to fix their ids.
    vocab = trained.get_vocab(with_added_tokens=False)
    tokenizer = _bert_wordpiece(WordPiece(vocab, unk_token="[UNK]"), lowercase)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    _add_template(tokenizer)
    return tokenizer


ALPHABET_LIMIT = 1000
"""Characters kept as single-character tokens (the rest become ``[UNK]``), as in the
``tokenizers`` BERT WordPiece recipe."""


def _alphabet(paragraphs: Iterator[str], lowercase: bool) -> list[str]:
    """The ``ALPHABET_LIMIT`` most frequent non-space characters after BERT normalisation,
    ties broken by code point: the trainer would break them in hash order."""
    normalizer = _bert_wordpiece(WordPiece(unk_token="[UNK]"), lowercase).normalizer
    counts: Counter[str] = Counter()
    for paragraph in paragraphs:
        counts.update(normalizer.normalize_str(paragraph))
    ranked = sorted((c for c in counts if not c.isspace()), key=lambda c: (-counts[c], c))
    return sorted(ranked[:ALPHABET_LIMIT])


def _train(
    paragraphs: Iterator[str],
    vocab_size: int,
    special: list[str],
    alphabet: list[str],
    lowercase: bool,
    progress: bool,
) -> Tokenizer:
    tokenizer = _bert_wordpiece(WordPiece(unk_token="[UNK]"), lowercase)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=special,
        limit_alphabet=ALPHABET_LIMIT,
        initial_alphabet=alphabet,
        continuing_subword_prefix="##",
        show_progress=progress,
    )
    tokenizer.train_from_iterator(paragraphs, trainer)
    return tokenizer


def load_vocab_file(path: Path, lowercase: bool) -> Tokenizer:
    """An existing tokenizer: a BERT ``vocab.txt`` or a WordPiece ``tokenizer.json``."""
    if path.suffix == ".json":
        try:
            loaded = Tokenizer.from_file(str(path))
        except Exception as e:  # the tokenizers library raises a bare Exception on bad JSON
            raise DataError(f"cannot read tokenizer {path}: {e}") from e
        vocab = loaded.get_vocab(with_added_tokens=True)
        if not isinstance(loaded.model, WordPiece):
            raise DataError(f"tokenizer {path} is not a WordPiece tokenizer")
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
        vocab = {token: i for i, token in enumerate(lines) if token}
        if len(vocab) != len(lines):
            raise DataError(f"vocab file {path} has empty or repeated lines")
    missing = [token for token in SPECIAL_TOKENS if token not in vocab]
    if missing:
        raise DataError(f"tokenizer vocab file {path} lacks {' '.join(missing)}")
    tokenizer = _bert_wordpiece(WordPiece(vocab, unk_token="[UNK]"), lowercase)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))  # never split "[MASK]" written in text
    _add_template(tokenizer)
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, directory: Path) -> None:
    """``tokenizer.json`` plus ``vocab.txt`` (one token per line, line number = id)."""
    tokenizer.save(str(directory / "tokenizer.json"))
    by_id = sorted(tokenizer.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise DataError("the tokenizer's ids are not contiguous from 0; cannot write vocab.txt")
    (directory / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in by_id), encoding="utf-8")


def load_tokenizer(directory: Path) -> Tokenizer:
    return Tokenizer.from_file(str(Path(directory) / "tokenizer.json"))


def tokenizer_files_disagree(directory: Path) -> str | None:
    """Why ``vocab.txt`` and ``tokenizer.json`` in ``directory`` are not one vocabulary (the same
    tokens with the same ids), or None where they are. Both are written together from one
    tokenizer (``save_tokenizer``); a folder where they differ was damaged since, and a model
    trained or exported with one would tokenize differently from the other."""
    directory = Path(directory)
    try:
        lines = (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        return f"its vocab.txt cannot be read ({exc})"
    try:
        vocab = load_tokenizer(directory).get_vocab(with_added_tokens=True)
    except Exception as exc:  # the tokenizers library raises a bare Exception on bad JSON
        first_line = next(iter(str(exc).splitlines()), repr(exc))
        return f"its tokenizer.json cannot be read ({first_line})"
    by_id = [token for token, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    if by_id == lines:
        return None
    if len(by_id) != len(lines):
        return f"its vocab.txt has {len(lines)} tokens, its tokenizer.json {len(by_id)}"
    first = next(i for i, (a, b) in enumerate(zip(lines, by_id, strict=True)) if a != b)
    return (
        f"its vocab.txt and tokenizer.json differ at id {first} "
        f"({lines[first]!r} and {by_id[first]!r})"
    )


def _bert_wordpiece(model: WordPiece, lowercase: bool) -> Tokenizer:
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    return tokenizer


def _add_template(tokenizer: Tokenizer) -> None:
    special = special_tokens(tokenizer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", special.cls), ("[SEP]", special.sep)],
    )
