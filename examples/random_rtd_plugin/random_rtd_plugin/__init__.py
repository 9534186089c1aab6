"""Replaced-token detection with no generator: the selected tokens are replaced by uniformly
random tokens and a discriminator learns to spot them. It is the limit of ELECTRA's generator
size going to zero, which the paper reports as clearly worse (the task is too easy): a useful
floor for the generator-size ablation, and a worked example of a third-party objective.
"""

from __future__ import annotations

import torch
from pydantic import Field

from electra_ablate.plugin import (
    BackboneConfig,
    Batch,
    Discriminator,
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    OutputPrior,
    StepOutput,
    Vocab,
    maskable,
    non_pad,
    replace_at,
    select_masked,
)


class RandomRTDParams(ObjectiveParams):
    disc_weight: float = Field(1.0, gt=0.0, description="scale of the detection loss")


class RandomReplacementDetection(Objective):
    name = "random_rtd"
    description = "RTD against uniformly random replacements (no generator); example plugin"
    Params = RandomRTDParams

    def __init__(self, backbone: BackboneConfig, params: RandomRTDParams, vocab: Vocab):
        super().__init__(backbone, params, vocab)
        self.discriminator = Discriminator(backbone)

    def forward(self, batch: Batch) -> StepOutput:
        slots = select_masked(batch["input_ids"], self.vocab, self.params.mask_rate)
        ordinary = self.vocab.ordinary_ids
        samples = ordinary[torch.randint_like(slots.originals, 0, len(ordinary))]
        r = replace_at(batch["input_ids"], slots, samples)
        weights = non_pad(batch, self.special.pad)
        replaceable = maskable(batch["input_ids"], self.vocab)
        d = self.discriminator.detect(batch, r.corrupted, r.replaced, weights, replaceable)
        metrics = {**d.metrics, "replaced_frac": r.replaced_frac}
        return StepOutput(self.params.disc_weight * d.loss, metrics)

    def kept_model(self) -> KeptModel:
        return self.discriminator.kept()

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [self.discriminator.flops_pass(seq_len)]

    def output_priors(self) -> list[OutputPrior]:
        """A uniform draw equals the original once in len(ordinary_ids) tries."""
        rate = self.params.mask_rate * (1.0 - 1.0 / len(self.vocab.ordinary_ids))
        return self.discriminator.output_priors(rate)
