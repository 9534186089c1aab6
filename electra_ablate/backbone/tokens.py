"""Special-token ids shared by the tokenizer, the objectives and fine-tuning, and the vocabulary
statistics objectives are built with."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

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


class Vocab(nn.Module):
    """What an objective knows about the token ids: which are special, and how often each
    ordinary one occurs in the training data.

    The unigram distribution is what a frequency-only model predicts (the plateau every MLM
    starts on), what the paper's unigram generator samples, and the reference that generator
    diagnostics are measured against. Special tokens have probability 0 (nothing ever predicts
    or samples them); ordinary tokens are add-one smoothed, so every one of them can be drawn.
    A module with non-persistent buffers: it follows its objective to the GPU and never enters
    a checkpoint.
    """

    unigram: torch.Tensor
    log_unigram: torch.Tensor
    ordinary_ids: torch.Tensor
    is_special: torch.Tensor

    def __init__(self, counts: torch.Tensor, special: SpecialTokens = SpecialTokens()) -> None:
        super().__init__()
        self.special = special
        is_special = torch.zeros(len(counts), dtype=torch.bool)
        is_special[[i for i in special.ids if i < len(counts)]] = True
        smoothed = torch.where(is_special, 0.0, counts.double() + 1.0)
        probs = smoothed / smoothed.sum()
        self.register_buffer("unigram", probs.float(), persistent=False)
        self.register_buffer("log_unigram", probs.log().float(), persistent=False)
        self.register_buffer("ordinary_ids", (~is_special).nonzero().squeeze(1), persistent=False)
        # [V] bool, on the objective's device: masking special ids needs no host-built tensor
        self.register_buffer("is_special", is_special, persistent=False)

    @classmethod
    def uniform(cls, size: int, special: SpecialTokens = SpecialTokens()) -> Vocab:
        """Every ordinary token equally likely: for tests, and objectives built without data."""
        return cls(torch.ones(size), special)

    @property
    def size(self) -> int:
        return len(self.unigram)

    def prior_logits(self) -> torch.Tensor:
        """Log unigram probabilities with the special tokens at the rarest ordinary token's value:
        finite everywhere, so an MLM bias can start there (the opt-in prior initialisation)."""
        floor = self.log_unigram[self.ordinary_ids].min()
        return torch.where(torch.isinf(self.log_unigram), floor, self.log_unigram)

    def collision(self) -> float:
        """Chance that a unigram sample equals the token it replaces (sum of p^2)."""
        return float((self.unigram.double() ** 2).sum())

    def unigram_nats(self, targets: torch.Tensor) -> torch.Tensor:
        """-log p_unigram(target) per position: a frequency-only model's loss there."""
        return -self.log_unigram[targets]


def special_at(input_ids: torch.Tensor, special: SpecialTokens | Vocab) -> torch.Tensor:
    """[...] bool: True where ``input_ids`` holds a special token (padding included).

    Given the objective's ``Vocab``, a lookup in its ``is_special`` buffer, already on the
    device; given bare ``SpecialTokens``, the ids are copied from the host at every call, which
    makes a GPU step wait (kept for callers outside a training step)."""
    if isinstance(special, Vocab):
        return special.is_special[input_ids]
    return torch.isin(input_ids, torch.tensor(special.ids, device=input_ids.device))
