"""Generators: what corrupts the input of the replaced-token objectives.

``Generator`` is ELECTRA's small MLM: it reads the input with the selected positions set to
[MASK], predicts the originals there (its MLM loss), and its samples, drawn without gradient,
replace them. ``UnigramGenerator`` is the paper's unigram generator (Figure 3, left): samples
from the training data's token frequencies, nothing to train. Both log what the sampling
distribution looks like (entropy, KL from the unigram distribution), which is how a generator's
curriculum, its unigram plateau and an adversarial generator's mode collapse show up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator
from torch import nn

from electra_ablate.backbone.config import max_predictions
from electra_ablate.backbone.model import DisentangledEmbeddings, Encoder
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.pretraining.components.losses import (
    distribution_stats,
    masked_cross_entropy,
    masked_mean,
    mlm_metrics,
)
from electra_ablate.pretraining.components.masked_lm import MaskedLM
from electra_ablate.pretraining.components.masking import MaskedSlots, replace_at, select_masked
from electra_ablate.pretraining.objective import Batch, ModelPass, ObjectiveParams, OutputPrior

Tying = Literal["none", "embeddings", "all", "gdes"]


class GeneratorParams(ObjectiveParams):
    """Params of objectives that corrupt their input with samples from a generator."""

    generator: Literal["mlm", "unigram"] = Field(
        "mlm",
        description="mlm: a small MLM trained jointly; unigram: samples from the corpus's token "
        "frequencies, nothing trained (the paper's unigram generator)",
    )
    generator_size: float = Field(0.25, gt=0.0, le=1.0, description="generator width / main width")
    tying: Tying = Field(
        "embeddings",
        json_schema_extra={"paper": "embeddings"},  # §3.2: tied token embeddings
        description="what G shares with the main model: none; embeddings (token, position, "
        "type tables and their LayerNorm); all (one encoder); gdes (DeBERTa-v3's "
        "gradient-disentangled sharing: G trains the tables, the main model reads them "
        "through a stop-gradient plus a zero-initialised residual of its own)",
    )
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature of G")
    mask_token_share: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="share of the selected slots a trained generator reads as [MASK]; the "
        "others it reads as their original token (the original code: 0.85). The generator is "
        "scored and the main model corrupted at every selected slot either way. Unset: [MASK] "
        "at every selected slot (a departure every report states); left out of a run's id "
        "while unset",
        json_schema_extra={
            "paper": 0.85,
            "unset": "the generator reads [MASK] at every selected slot (the original code: "
            "85% [MASK], 15% the original token; mask_token_share: 0.85)",
        },
    )

    @model_serializer(mode="wrap")
    def _unset_options_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An option added after runs were named (``mask_token_share``) is left out of the dump
        while unset, so a run's id (its params' dump) does not change."""
        dumped = handler(self)
        if self.mask_token_share is None:
            dumped.pop("mask_token_share", None)
        return dumped

    @model_validator(mode="after")
    def _all_needs_same_size(self) -> GeneratorParams:
        if self.tying == "all" and self.generator_size != 1.0:
            raise ValueError("tying 'all' needs generator_size 1.0 (G and D of the same size)")
        if self.generator == "unigram" and self.mask_token_share is not None:
            raise ValueError(
                "mask_token_share does nothing with generator 'unigram' (it reads no input): "
                "leave it out"
            )
        return self

    def inapplicable(self) -> frozenset[str]:
        """A unigram generator reads no input: ``mask_token_share`` means nothing there."""
        return frozenset({"mask_token_share"}) if self.generator == "unigram" else frozenset()


@dataclass
class Corruption:
    """What the generator produced for one batch."""

    slots: MaskedSlots
    mlm_loss: torch.Tensor  # the generator's MLM loss (0 for a unigram generator)
    hidden: torch.Tensor | None  # [B, K, H_G] generator states at the slots (None: unigram)
    logits: torch.Tensor | None  # [B, K, V] generator logits at the slots (None: unigram)
    samples: torch.Tensor  # [B, K]
    corrupted: torch.Tensor  # [B, L] input with valid slots replaced by samples
    replaced: torch.Tensor  # [B, L] 1 where the corrupted token differs from the original
    metrics: dict[str, torch.Tensor]


def generator_input(
    slots: MaskedSlots, vocab: Vocab, mask_token_share: float | None
) -> torch.Tensor:
    """What the generator reads at the selected slots [B, K]: [MASK] everywhere (None), or
    [MASK] at a ``mask_token_share`` of them and the original token at the rest, each slot
    drawn on its own (the original code's ``pretrain_helpers.mask``: 85% [MASK]). No draw
    while unset, so the random stream of earlier runs is unchanged."""
    mask = torch.full_like(slots.originals, vocab.special.mask)
    if mask_token_share is None:
        return mask
    u = torch.rand(slots.originals.shape, device=slots.originals.device)
    return torch.where(u < mask_token_share, mask, slots.originals)


def without_special(logits: torch.Tensor, special: SpecialTokens | Vocab) -> torch.Tensor:
    """Logits with the special tokens' columns at -inf: the distribution samples are drawn from.

    A generator is only ever trained to predict ordinary tokens, but an untrained one would
    otherwise sample [MASK], [PAD] or [CLS] into the main model's input now and then, and the
    replaced-token objectives promise that model never sees [MASK]. Pass the objective's
    ``Vocab`` inside a training step: its ``is_special`` buffer is already on the device.
    """
    if isinstance(special, Vocab):
        return logits.masked_fill(special.is_special, float("-inf"))
    ids = torch.tensor(special.ids, device=logits.device)
    return logits.index_fill(-1, ids, float("-inf"))


def sampling_log_probs(
    logits: torch.Tensor, special: SpecialTokens | Vocab, temperature: float
) -> torch.Tensor:
    """log softmax(logits / T) over the ordinary tokens, without gradient (one [..., V]
    intermediate: the masked copy, divided in place)."""
    with torch.no_grad():
        scaled = without_special(logits.float(), special)
        if temperature != 1.0:
            scaled.div_(temperature)
        return torch.log_softmax(scaled, dim=-1)


@torch.no_grad()
def sample_tokens(log_probs: torch.Tensor) -> torch.Tensor:
    """One sample per row of ``log_probs`` [..., V], by inverting the CDF.

    One uniform per row and a binary search over the cumulative probabilities: the same
    distribution as Gumbel-max, without drawing and taking two logs of ``V`` uniforms per row,
    which made sampling a visible share of a small model's step on CPU.
    """
    cdf = log_probs.exp().cumsum_(-1)
    u = torch.rand(*cdf.shape[:-1], 1, device=cdf.device) * cdf[..., -1:]
    sampled = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    return sampled.clamp_(max=log_probs.shape[-1] - 1)


def _sampler_metrics(
    log_probs: torch.Tensor, valid: torch.Tensor, replaced_frac: torch.Tensor, vocab: Vocab
) -> dict[str, torch.Tensor]:
    entropy, kl = distribution_stats(log_probs, vocab)
    if entropy.dim() == 0:  # one distribution for every slot (the unigram generator)
        return {"gen_entropy": entropy, "gen_kl_unigram": kl, "replaced_frac": replaced_frac}
    return {
        "gen_entropy": masked_mean(entropy, valid),
        "gen_kl_unigram": masked_mean(kl, valid),
        "replaced_frac": replaced_frac,
    }


class Generator(MaskedLM):
    """A small MLM encoder whose samples corrupt the main model's input. ``mask_token_share``
    (``GeneratorParams``): the share of selected slots it reads as [MASK] (None: all)."""

    def __init__(self, encoder: Encoder, mask_token_share: float | None = None) -> None:
        super().__init__(encoder)
        self.mask_token_share = mask_token_share

    def corrupt(
        self, batch: Batch, vocab: Vocab, mask_rate: float, temperature: float
    ) -> Corruption:
        input_ids = batch["input_ids"]
        slots = select_masked(input_ids, vocab, mask_rate)
        masked_input = slots.scatter(
            input_ids, generator_input(slots, vocab, self.mask_token_share)
        )
        hidden, logits = self(batch, masked_input, slots)
        mlm_loss = masked_cross_entropy(logits, slots.originals, slots.valid)
        log_probs = sampling_log_probs(logits.detach(), vocab, temperature)
        samples = sample_tokens(log_probs)
        r = replace_at(input_ids, slots, samples)
        metrics = {
            **mlm_metrics("gen_mlm", logits, slots.originals, slots.valid, mlm_loss, vocab),
            **_sampler_metrics(log_probs, slots.valid, r.replaced_frac, vocab),
        }
        return Corruption(
            slots, mlm_loss, hidden, logits, samples, r.corrupted, r.replaced, metrics
        )

    def flops_passes(self, seq_len: int, mask_rate: float, trained: bool = True) -> list[ModelPass]:
        return [self.flops_pass(max_predictions(mask_rate, seq_len), trained)]

    def output_priors(self, vocab: Vocab) -> list[OutputPrior]:
        return [self.output_prior("generator", vocab)]


class UnigramGenerator(nn.Module):
    """Replacements drawn from the training data's token frequencies (tempered like a trained
    generator's softmax); no parameters, no loss, no FLOPs."""

    def corrupt(
        self, batch: Batch, vocab: Vocab, mask_rate: float, temperature: float
    ) -> Corruption:
        input_ids = batch["input_ids"]
        slots = select_masked(input_ids, vocab, mask_rate)
        log_probs = torch.log_softmax(vocab.log_unigram / temperature, dim=-1)
        flat = torch.multinomial(log_probs.exp(), slots.originals.numel(), replacement=True)
        samples = flat.view_as(slots.originals)
        r = replace_at(input_ids, slots, samples)
        metrics = _sampler_metrics(log_probs, slots.valid, r.replaced_frac, vocab)
        zero = torch.zeros((), device=input_ids.device)
        return Corruption(slots, zero, None, None, samples, r.corrupted, r.replaced, metrics)

    def flops_passes(self, seq_len: int, mask_rate: float, trained: bool = True) -> list[ModelPass]:
        return []

    def output_priors(self, vocab: Vocab) -> list[OutputPrior]:
        return []


def build_generator(main: Encoder, params: GeneratorParams) -> Generator | UnigramGenerator:
    """The generator for ``main``, sharing what ``params.tying`` says it shares.

    ``gdes`` hands ``main``'s embeddings to the generator, which owns and trains them, and
    gives ``main`` a ``DisentangledEmbeddings`` reading them (stop-gradient plus residuals that
    start at zero and draw nothing random): the initial weights are those ``embeddings`` gives
    for the same seed, and the tables have ``main``'s embedding size whatever the generator's
    width, as under ``embeddings``.
    """
    if params.generator == "unigram":
        return UnigramGenerator()
    if params.tying == "all":
        return Generator(main, params.mask_token_share)
    cfg = main.cfg.scaled(params.generator_size)
    embeddings = main.embeddings if params.tying in ("embeddings", "gdes") else None
    generator = Generator(Encoder(cfg, embeddings), params.mask_token_share)
    if params.tying == "gdes":
        main.embeddings = DisentangledEmbeddings(main.embeddings)
    return generator
