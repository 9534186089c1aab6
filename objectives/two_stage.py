"""Two-stage ELECTRA (ELECTRA paper, Figure 3 right): train a generator of the discriminator's
size with MLM for part of the budget, then freeze it, initialise the discriminator from its
encoder (optional) and train the discriminator alone on replaced-token detection."""

from __future__ import annotations

import torch
from pydantic import Field

from electra_ablate.components import (
    Generator,
    generator_pass,
    non_pad,
    rtd_loss,
    rtd_metrics,
)
from electra_ablate.config import BackboneConfig
from electra_ablate.model import Encoder, TokenBinaryHead
from electra_ablate.objective import (
    Batch,
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    Stage,
    StepOutput,
)
from electra_ablate.tokens import SpecialTokens


class TwoStageParams(ObjectiveParams):
    disc_weight: float = Field(50.0, gt=0.0, description="lambda on the stage-2 RTD loss")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature of G")
    generator_fraction: float = Field(0.5, gt=0.0, lt=1.0, description="budget share of stage 1")
    init_from_generator: bool = Field(True, description="start D from G's encoder weights")


class TwoStage(Objective):
    name = "two_stage"
    description = "Two-stage: G trained with MLM, then frozen; D (init from G) trained with RTD"
    Params = TwoStageParams

    def __init__(self, backbone: BackboneConfig, params: TwoStageParams, special: SpecialTokens):
        super().__init__(backbone, params, special)
        self.generator = Generator(Encoder(backbone), backbone.vocab_size)
        self.discriminator = Encoder(backbone)
        self.disc_head = TokenBinaryHead(backbone)
        self.enter_stage(0)

    def stages(self) -> list[Stage]:
        f = self.params.generator_fraction
        return [Stage("generator_mlm", f), Stage("discriminator_rtd", 1.0 - f)]

    def enter_stage(self, index: int) -> None:
        super().enter_stage(index)
        training_generator = index == 0
        self.generator.requires_grad_(training_generator)
        self.discriminator.requires_grad_(not training_generator)
        self.disc_head.requires_grad_(not training_generator)
        if index == 1 and self.params.init_from_generator:
            self.discriminator.load_state_dict(self.generator.encoder.state_dict())
        self.train(self.training)

    def train(self, mode: bool = True) -> TwoStage:
        super().train(mode)
        if self.stage_index == 1:
            self.generator.eval()  # frozen: no dropout while it only samples
        return self

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        if self.stage_index == 0:
            c = self.generator.corrupt(batch, self.special, p.mask_rate, p.temperature)
            return StepOutput(c.mlm_loss, dict(c.metrics))
        with torch.no_grad():
            c = self.generator.corrupt(batch, self.special, p.mask_rate, p.temperature)
        hidden = self.discriminator(
            c.corrupted, batch.get("token_type_ids"), batch.get("attention_mask")
        )
        logits = self.disc_head(hidden)
        weights = non_pad(batch, self.special)
        disc_loss = rtd_loss(logits, c.replaced, weights)
        metrics = {
            **c.metrics,
            "disc_loss": disc_loss.detach(),
            **rtd_metrics(logits, c.replaced, weights),
        }
        return StepOutput(p.disc_weight * disc_loss, metrics)

    def kept_model(self) -> KeptModel:
        """Stage 1 keeps the generator (an MLM model so far); stage 2 the discriminator."""
        if self.stage_index == 0:
            return KeptModel(self.generator.encoder, "mlm", self.generator.head)
        return KeptModel(self.discriminator, "discriminator", self.disc_head)

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        if self.stage_index == 0:
            return [generator_pass(self.generator, seq_len, self.params.mask_rate)]
        return [
            generator_pass(self.generator, seq_len, self.params.mask_rate, trained=False),
            ModelPass(self.backbone, "binary", seq_len),
        ]
