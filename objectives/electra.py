"""ELECTRA replaced-token detection (Clark et al. 2020), joint training:

    L = MLM(G) + lambda * BCE(D) over all non-pad tokens, lambda = 50.

The generator's samples are drawn without gradient, so D's loss reaches G only through the
embeddings they share (``tying``), never through the sampled tokens.
"""

from __future__ import annotations

import torch
from pydantic import Field

from electra_ablate.plugin import (
    BackboneConfig,
    Batch,
    Corruption,
    Discriminator,
    GeneratorParams,
    KeptModel,
    ModelPass,
    Objective,
    OutputPrior,
    StepOutput,
    Vocab,
    build_generator,
    maskable,
    non_pad,
)


class ElectraParams(GeneratorParams):
    disc_weight: float = Field(50.0, gt=0.0, description="lambda, weight of the discriminator loss")


class Electra(Objective):
    name = "electra"
    description = "ELECTRA: joint G (MLM) + D replaced-token detection over all tokens, lambda=50"
    Params = ElectraParams

    def __init__(self, backbone: BackboneConfig, params: ElectraParams, vocab: Vocab):
        super().__init__(backbone, params, vocab)
        self.discriminator = Discriminator(backbone)
        self.generator = build_generator(self.discriminator.encoder, params)

    def rtd_weights(self, batch: Batch, corruption: Corruption) -> torch.Tensor:
        """Which tokens carry the discriminator loss: every non-pad token."""
        return non_pad(batch, self.special.pad)

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        c = self.generator.corrupt(batch, self.vocab, p.mask_rate, p.temperature)
        weights = self.rtd_weights(batch, c)
        replaceable = maskable(batch["input_ids"], self.vocab)
        d = self.discriminator.detect(batch, c.corrupted, c.replaced, weights, replaceable)
        return StepOutput(c.mlm_loss + p.disc_weight * d.loss, {**c.metrics, **d.metrics})

    def kept_model(self) -> KeptModel:
        return self.discriminator.kept()

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [
            *self.generator.flops_passes(seq_len, self.params.mask_rate),
            self.discriminator.flops_pass(seq_len),
        ]

    def replaced_rate(self) -> float:
        """Share of scored tokens replaced while samples are frequency-like: the detection prior."""
        return self.params.mask_rate * (1.0 - self.vocab.collision())

    def output_priors(self) -> list[OutputPrior]:
        return [
            *self.generator.output_priors(self.vocab),
            *self.discriminator.output_priors(self.replaced_rate()),
        ]
