"""Reusable pieces objectives are assembled from: mask selection, corruption, the small
generator with its tied MLM head, sampling, and the metrics every objective logs.

Masked positions are kept as a static [B, K] slot tensor (K = max predictions per sequence),
with a ``valid`` flag for unused slots, so shapes never depend on the data and the MLM softmax
runs only at the selected positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from electra_ablate.config import max_predictions
from electra_ablate.model import Encoder, MLMHead, gather_positions
from electra_ablate.objective import Batch, ModelPass, ObjectiveParams
from electra_ablate.tokens import SpecialTokens

Tying = Literal["none", "embeddings", "all"]


@dataclass
class MaskedSlots:
    """Selected positions [B, K], which slots are real, and the original ids there."""

    positions: torch.Tensor
    valid: torch.Tensor
    originals: torch.Tensor

    def scatter(self, input_ids: torch.Tensor, replacements: torch.Tensor) -> torch.Tensor:
        """A copy of ``input_ids`` with valid slots set to ``replacements`` ([B, K])."""
        values = torch.where(self.valid, replacements, self.originals)
        return input_ids.scatter(1, self.positions, values)


def maskable(input_ids: torch.Tensor, special: SpecialTokens) -> torch.Tensor:
    """Positions that may be selected: not padding and not a special token."""
    return ~torch.isin(input_ids, torch.tensor(special.ids, device=input_ids.device))


def select_masked(input_ids: torch.Tensor, special: SpecialTokens, mask_rate: float) -> MaskedSlots:
    """Pick round(mask_rate * n) random maskable positions per sequence (at least one, at most K).

    A uniformly random subset of each row's candidates: random scores, candidates first, top-K.
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
    slots: MaskedSlots,
    special: SpecialTokens,
    vocab_size: int,
    mask_prob: float,
    random_prob: float,
) -> torch.Tensor:
    """Replacement ids for BERT's split: [MASK] / a random non-special token / unchanged."""
    u = torch.rand(slots.positions.shape, device=slots.positions.device)
    random_ids = torch.randint_like(slots.originals, len(special.ids), vocab_size)
    out = torch.where(u < mask_prob + random_prob, random_ids, slots.originals)
    return torch.where(u < mask_prob, torch.full_like(out, special.mask), out)


@torch.no_grad()
def sample_tokens(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Sample from softmax(logits / T) by inverting the CDF; no gradient flows through a sample.

    One uniform per row and a binary search over the cumulative probabilities: the same
    distribution as Gumbel-max, but without drawing and taking two logs of ``V`` uniforms per
    row, which made sampling a visible share of a small model's step on CPU.
    """
    with torch.no_grad():
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        cdf = probs.cumsum_(-1)
        u = torch.rand(*cdf.shape[:-1], 1, device=cdf.device) * cdf[..., -1:]
        sampled = torch.searchsorted(cdf, u, right=True).squeeze(-1)
        return sampled.clamp_(max=logits.shape[-1] - 1)


def without_special(logits: torch.Tensor, special: SpecialTokens) -> torch.Tensor:
    """Logits with the special tokens' columns at -inf: the distribution samples are drawn from.

    A generator is only ever trained to predict ordinary tokens, but an untrained one would
    otherwise sample [MASK], [PAD] or [CLS] into the main model's input now and then, and the
    replaced-token objectives promise that model never sees [MASK].
    """
    ids = torch.tensor(special.ids, device=logits.device)
    return logits.index_fill(-1, ids, float("-inf"))


def masked_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    weights = weights.to(values.dtype)
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def masked_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Mean CE over the weighted slots of [B, K, V] logits (unused slots weigh 0)."""
    ce = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    return masked_mean(ce.view_as(targets), weights)


def masked_accuracy(
    logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    return masked_mean((logits.argmax(-1) == targets).float(), weights).detach()


def rtd_metrics(
    logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Discriminator accuracy, and precision/recall on the "replaced" class, over ``weights``."""
    with torch.no_grad():
        w = weights.bool()
        predicted = (logits > 0) & w
        actual = labels.bool() & w
        true_pos = (predicted & actual).sum().float()
        return {
            "disc_acc": masked_mean((predicted == actual).float(), w),
            "disc_precision": true_pos / predicted.sum().clamp(min=1),
            "disc_recall": true_pos / actual.sum().clamp(min=1),
        }


class GeneratorParams(ObjectiveParams):
    """Params of objectives that corrupt their input with samples from a small MLM generator."""

    generator_size: float = Field(0.25, gt=0.0, le=1.0, description="generator width / main width")
    tying: Tying = Field("embeddings", description="what G shares with the main model")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature of G")

    @model_validator(mode="after")
    def _all_needs_same_size(self) -> GeneratorParams:
        if self.tying == "all" and self.generator_size != 1.0:
            raise ValueError("tying 'all' needs generator_size 1.0 (G and D of the same size)")
        return self


@dataclass
class Corruption:
    """What the generator produced for one batch."""

    slots: MaskedSlots
    mlm_loss: torch.Tensor
    hidden: torch.Tensor  # [B, K, H_G] generator hidden states at the masked slots
    logits: torch.Tensor  # [B, K, V] at the masked slots
    samples: torch.Tensor  # [B, K]
    corrupted: torch.Tensor  # [B, L] input with valid slots replaced by samples
    replaced: torch.Tensor  # [B, L] 1 where the corrupted token differs from the original
    metrics: dict[str, torch.Tensor]


class Generator(nn.Module):
    """A small MLM encoder whose output matrix is its token embedding matrix.

    It reads the input with every selected position set to [MASK] and predicts the originals
    there; its samples (drawn without gradient) corrupt the main model's input.
    """

    def __init__(self, encoder: Encoder, vocab_size: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = MLMHead(
            encoder.cfg.model_copy(update={"vocab_size": vocab_size}),
            encoder.embeddings.word.embedding_dim,
        )

    def hidden_at(self, batch: Batch, input_ids: torch.Tensor, slots: MaskedSlots) -> torch.Tensor:
        hidden = self.encoder(input_ids, batch.get("token_type_ids"), batch.get("attention_mask"))
        return gather_positions(hidden, slots.positions)

    def corrupt(
        self, batch: Batch, special: SpecialTokens, mask_rate: float, temperature: float
    ) -> Corruption:
        input_ids = batch["input_ids"]
        slots = select_masked(input_ids, special, mask_rate)
        masked_input = slots.scatter(input_ids, torch.full_like(slots.originals, special.mask))
        hidden = self.hidden_at(batch, masked_input, slots)
        logits = self.head(hidden, self.encoder.embeddings.word.weight)
        mlm_loss = masked_cross_entropy(logits, slots.originals, slots.valid)
        samples = sample_tokens(without_special(logits.detach(), special), temperature)
        corrupted = slots.scatter(input_ids, samples)
        replaced = (corrupted != input_ids).long()
        metrics = {
            "gen_mlm_loss": mlm_loss.detach(),
            "gen_mlm_acc": masked_accuracy(logits, slots.originals, slots.valid),
            "replaced_frac": masked_mean(
                (samples != slots.originals).float(), slots.valid
            ).detach(),
        }
        return Corruption(slots, mlm_loss, hidden, logits, samples, corrupted, replaced, metrics)


def build_generator(main: Encoder, params: GeneratorParams) -> Generator:
    """The generator for ``main``, sharing what ``params.tying`` says it shares."""
    if params.tying == "all":
        return Generator(main, main.cfg.vocab_size)
    cfg = main.cfg.scaled(params.generator_size)
    embeddings = main.embeddings if params.tying == "embeddings" else None
    return Generator(Encoder(cfg, embeddings), main.cfg.vocab_size)


def generator_pass(
    generator: Generator, seq_len: int, mask_rate: float, trained: bool = True
) -> ModelPass:
    return ModelPass(generator.encoder.cfg, "mlm", max_predictions(mask_rate, seq_len), trained)


def non_pad(batch: Batch, special: SpecialTokens) -> torch.Tensor:
    return batch["input_ids"] != special.pad


def rtd_loss(logits: torch.Tensor, replaced: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Replaced-token detection: BCE of the "replaced" logit, averaged over ``weights``."""
    bce = F.binary_cross_entropy_with_logits(logits.float(), replaced.float(), reduction="none")
    return masked_mean(bce, weights)
