"""Replaced-token detection with no generator: the selected tokens are replaced by uniformly
random tokens and a discriminator learns to spot them. It is the limit of ELECTRA's generator
size going to zero, which the paper reports as clearly worse (the task is too easy): a useful
floor for the generator-size ablation, and a worked example of a third-party objective.
"""

from __future__ import annotations

import torch
from pydantic import Field

from electra_ablate.components import non_pad, rtd_loss, rtd_metrics, select_masked
from electra_ablate.config import BackboneConfig
from electra_ablate.model import Encoder, TokenBinaryHead
from electra_ablate.objective import (
    Batch,
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    StepOutput,
)
from electra_ablate.tokens import SpecialTokens


class RandomRTDParams(ObjectiveParams):
    disc_weight: float = Field(1.0, gt=0.0, description="scale of the detection loss")


class RandomReplacementDetection(Objective):
    name = "random_rtd"
    description = "RTD against uniformly random replacements (no generator); example plugin"
    Params = RandomRTDParams

    def __init__(self, backbone: BackboneConfig, params: RandomRTDParams, special: SpecialTokens):
        super().__init__(backbone, params, special)
        self.discriminator = Encoder(backbone)
        self.disc_head = TokenBinaryHead(backbone)

    def forward(self, batch: Batch) -> StepOutput:
        input_ids = batch["input_ids"]
        slots = select_masked(input_ids, self.special, self.params.mask_rate)
        random_ids = torch.randint_like(
            slots.originals, len(self.special.ids), self.backbone.vocab_size
        )
        corrupted = slots.scatter(input_ids, random_ids)
        replaced = (corrupted != input_ids).long()
        hidden = self.discriminator(
            corrupted, batch.get("token_type_ids"), batch.get("attention_mask")
        )
        logits = self.disc_head(hidden)
        weights = non_pad(batch, self.special)
        disc_loss = rtd_loss(logits, replaced, weights)
        metrics = {"disc_loss": disc_loss.detach(), **rtd_metrics(logits, replaced, weights)}
        return StepOutput(self.params.disc_weight * disc_loss, metrics)

    def kept_model(self) -> KeptModel:
        return KeptModel(self.discriminator, "discriminator", self.disc_head)

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [ModelPass(self.backbone, "binary", seq_len)]
