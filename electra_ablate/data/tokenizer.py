"""The WordPiece tokenizer: trained on the corpus, or loaded from an existing vocabulary.

Whatever the origin, the cached folder holds a ``tokenizer.json`` with the BERT normaliser,
pre-tokeniser and the ``[CLS] A [SEP] B [SEP]`` template (so sentence pairs encode the same way
here, in fine-tuning and in a ``transformers`` export) and the matching ``vocab.txt``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import WordPiece

from electra_ablate.data.corpus import Document
from electra_ablate.errors import DataError
from electra_ablate.tokens import SPECIAL_TOKENS, SpecialTokens

TRAINING_SAMPLE_CHARS = 20_000_000
"""Train on at most about this many characters: a stride sample of the documents. WordPiece
statistics settle long before that while training time grows with it (shared 72 MB corpus on
2 cores: 8-17 s for the sample, 30 s for all of it, held-out [UNK] rate 0.0% either way)."""


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
    """A WordPiece tokenizer trained on (a stride sample of) ``documents``.

    The special tokens are handed to the trainer first, so they get ids 0..4 in
    ``SPECIAL_TOKENS`` order, matching ``SpecialTokens``.
    """
    total = sum(len(p) for d in documents for p in d)
    stride = max(1, math.ceil(total / TRAINING_SAMPLE_CHARS))
    sample = documents[::stride]

    def paragraphs() -> Iterator[str]:
        for document in sample:
            yield from document

    tokenizer = _bert_wordpiece(WordPiece(unk_token="[UNK]"), lowercase)
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        limit_alphabet=1000,
        continuing_subword_prefix="##",
        show_progress=progress,
    )
    tokenizer.train_from_iterator(paragraphs(), trainer, length=sum(len(d) for d in sample))
    _add_template(tokenizer)
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
