"""Which positions an objective corrupts, and how: mask selection, BERT's 80/10/10 split, and
putting sampled replacements into the input.

Masked positions are kept as a static [B, K] slot tensor (K = max predictions per sequence),
with a ``valid`` flag for unused slots, so shapes never depend on the data and an MLM softmax
runs only at the selected positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from electra_ablate.backbone.config import max_predictions
from electra_ablate.backbone.tokens import SpecialTokens, Vocab, special_at


@dataclass
class MaskedSlots:
    """Selected positions [B, K], which slots are real, and the original ids there.

    What every consumer (``scatter``, ``mask_of``, ``MaskedLM``, the losses) relies on, so a
    selection rule of one's own (spans, whole words) that builds one keeps it:

    - ``positions`` (long), ``valid`` (bool) and ``originals`` (long) are all [B, K], with K the
      same for every row and step: ``max_predictions(mask_rate, L)``, the count an MLM head's
      ``ModelPass`` declares, so shapes stay static; a row that selects fewer leaves its other
      slots invalid (they need not come last);
    - a row's K positions are distinct, invalid slots included: ``scatter`` writes every slot
      (an invalid one writes its original back) and a repeated index leaves the write order
      undefined;
    - valid slots lie only where ``maskable`` is True (no special token, no padding): nothing
      downstream checks it;
    - ``originals`` is ``input_ids.gather(1, positions)``: the targets an MLM is scored on.
    """

    positions: torch.Tensor
    valid: torch.Tensor
    originals: torch.Tensor

    def scatter(self, input_ids: torch.Tensor, replacements: torch.Tensor) -> torch.Tensor:
        """A copy of ``input_ids`` with valid slots set to ``replacements`` ([B, K])."""
        values = torch.where(self.valid, replacements, self.originals)
        return input_ids.scatter(1, self.positions, values)

    def mask_of(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B, L] bool: True at the valid selected positions."""
        return torch.zeros_like(input_ids, dtype=torch.bool).scatter(1, self.positions, self.valid)


def maskable(input_ids: torch.Tensor, special: SpecialTokens | Vocab) -> torch.Tensor:
    """Positions that may be selected: not padding and not a special token (pass the
    objective's ``Vocab`` inside a training step: see ``tokens.special_at``)."""
    return ~special_at(input_ids, special)


def select_masked(
    input_ids: torch.Tensor, special: SpecialTokens | Vocab, mask_rate: float
) -> MaskedSlots:
    """Pick round(mask_rate * n) random maskable positions per sequence (at least one, at most K).

    A uniformly random subset of each row's candidates: random scores, candidates first, top-K.
    Inside a training step pass the objective's ``self.vocab``, as the built-in objectives do;
    bare ``SpecialTokens`` are accepted too, but their ids are copied from the host at every
    call (``maskable``).
    """
    batch, length = input_ids.shape
    k_max = max_predictions(mask_rate, length)
    candidates = maskable(input_ids, special)
    n = candidates.sum(1)
    count = torch.clamp(torch.round(n.float() * mask_rate).long(), min=1, max=k_max)
    count = torch.minimum(count, n)
    scores = torch.rand(batch, length, device=input_ids.device) + candidates.float()
    positions = scores.topk(k_max, dim=1).indices
    valid = torch.arange(k_max, device=input_ids.device)[None, :] < count[:, None]
    return MaskedSlots(positions, valid, input_ids.gather(1, positions))


def bert_corruption(
    slots: MaskedSlots, vocab: Vocab, mask_prob: float, random_prob: float
) -> torch.Tensor:
    """Replacement ids for BERT's split: [MASK] / a random ordinary token / unchanged.

    Random tokens are drawn uniformly from every id that is not special, wherever the special
    tokens sit in the vocabulary (an external BERT vocab has [CLS] at 101 and [unused*] ids).
    """
    u = torch.rand(slots.positions.shape, device=slots.positions.device)
    pick = torch.randint_like(slots.originals, 0, len(vocab.ordinary_ids))
    random_ids = vocab.ordinary_ids[pick]
    out = torch.where(u < mask_prob + random_prob, random_ids, slots.originals)
    return torch.where(u < mask_prob, torch.full_like(out, vocab.special.mask), out)


@dataclass
class Replacement:
    """An input with some tokens replaced, and which tokens now differ from the original."""

    corrupted: torch.Tensor  # [B, L]
    replaced: torch.Tensor  # [B, L] long: 1 where the token differs from the original
    replaced_frac: torch.Tensor  # share of the valid slots whose sample differs (detached)


def replace_at(input_ids: torch.Tensor, slots: MaskedSlots, samples: torch.Tensor) -> Replacement:
    """Put ``samples`` ([B, K]) at the valid slots. A position is labelled replaced only if its
    sample differs from the original token: sampling the original back is no replacement."""
    corrupted = slots.scatter(input_ids, samples)
    differs = (samples != slots.originals) & slots.valid
    frac = (differs.sum().float() / slots.valid.sum().clamp(min=1)).detach()
    return Replacement(corrupted, (corrupted != input_ids).long(), frac)
