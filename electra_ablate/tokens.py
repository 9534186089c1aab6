"""Special-token ids shared by the tokenizer, the objectives and fine-tuning."""

from __future__ import annotations

from dataclasses import dataclass

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of the special tokens; a tokenizer trained here puts them first, in this order."""

    pad: int = 0
    unk: int = 1
    cls: int = 2
    sep: int = 3
    mask: int = 4

    @property
    def ids(self) -> tuple[int, ...]:
        return (self.pad, self.unk, self.cls, self.sep, self.mask)
