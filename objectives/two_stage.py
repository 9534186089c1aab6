"""Two-stage ELECTRA (ELECTRA paper, Figure 3 right): train a generator of the discriminator's
size with MLM for part of the budget, then freeze it, initialise the discriminator from its
encoder (optional) and train the discriminator alone on replaced-token detection.

The paper runs n steps of each stage (``split_by: steps``, the default). Splitting by FLOPs
instead gives the discriminator stage fewer steps, since each of its steps also runs the frozen
generator forward.
"""

from __future__ import annotations

import torch
from pydantic import Field

from electra_ablate.plugin import (
    BackboneConfig,
    Batch,
    Discriminator,
    Encoder,
    Generator,
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    OutputPrior,
    Stage,
    StageSplit,
    StepOutput,
    Vocab,
    maskable,
    non_pad,
)


class TwoStageParams(ObjectiveParams):
    disc_weight: float = Field(50.0, gt=0.0, description="lambda on the stage-2 RTD loss")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature of G")
    generator_fraction: float = Field(0.5, gt=0.0, lt=1.0, description="budget share of stage 1")
    split_by: StageSplit = Field(
        "steps",
        description="share of the steps (paper) or of FLOPs",
        json_schema_extra={"paper": "steps"},
    )
    init_from_generator: bool = Field(True, description="start D from G's encoder weights")


class TwoStage(Objective):
    name = "two_stage"
    description = "Two-stage: G trained with MLM, then frozen; D (init from G) trained with RTD"
    Params = TwoStageParams

    def __init__(self, backbone: BackboneConfig, params: TwoStageParams, vocab: Vocab):
        super().__init__(backbone, params, vocab)
        self.generator = Generator(Encoder(backbone))
        self.discriminator = Discriminator(backbone)
        self.enter_stage(0)

    def stages(self) -> list[Stage]:
        fraction = self.params.generator_fraction
        return [Stage("generator_mlm", fraction), Stage("discriminator_rtd", 1.0 - fraction)]

    def stage_split(self) -> StageSplit:
        return self.params.split_by

    def enter_stage(self, index: int) -> None:
        super().enter_stage(index)
        training_generator = index == 0
        self.generator.requires_grad_(training_generator)
        self.discriminator.requires_grad_(not training_generator)
        if index == 1 and self.params.init_from_generator:
            self.discriminator.encoder.load_state_dict(self.generator.encoder.state_dict())
        self.train(self.training)

    def train(self, mode: bool = True) -> TwoStage:
        super().train(mode)
        if self.stage_index == 1:
            self.generator.eval()  # frozen: no dropout while it only samples
        return self

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        if self.stage_index == 0:
            c = self.generator.corrupt(batch, self.vocab, p.mask_rate, p.temperature)
            return StepOutput(c.mlm_loss, dict(c.metrics))
        with torch.no_grad():
            c = self.generator.corrupt(batch, self.vocab, p.mask_rate, p.temperature)
        weights = non_pad(batch, self.special.pad)
        replaceable = maskable(batch["input_ids"], self.vocab)
        d = self.discriminator.detect(batch, c.corrupted, c.replaced, weights, replaceable)
        return StepOutput(p.disc_weight * d.loss, {**c.metrics, **d.metrics})

    def kept_model(self) -> KeptModel:
        """Stage 1 keeps the generator (an MLM model so far); stage 2 the discriminator."""
        return self.generator.kept() if self.stage_index == 0 else self.discriminator.kept()

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        if self.stage_index == 0:
            return self.generator.flops_passes(seq_len, self.params.mask_rate)
        return [
            *self.generator.flops_passes(seq_len, self.params.mask_rate, trained=False),
            self.discriminator.flops_pass(seq_len),
        ]

    def output_priors(self) -> list[OutputPrior]:
        rate = self.params.mask_rate * (1.0 - self.vocab.collision())
        return [
            *self.generator.output_priors(self.vocab),
            *self.discriminator.output_priors(rate),
        ]
