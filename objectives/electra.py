"""ELECTRA replaced-token detection (Clark et al. 2020), joint training:

    L = MLM(G) + lambda * BCE(D) over all non-pad tokens, lambda = 50.

The generator's samples are drawn without gradient, so D's loss reaches G only through the
embeddings they share (``tying``), never through the sampled tokens.
"""

from __future__ import annotations

import torch
from pydantic import Field

from electra_ablate.components import (
    Corruption,
    GeneratorParams,
    build_generator,
    generator_pass,
    non_pad,
    rtd_loss,
    rtd_metrics,
)
from electra_ablate.config import BackboneConfig
from electra_ablate.model import Encoder, TokenBinaryHead
from electra_ablate.objective import Batch, KeptModel, ModelPass, Objective, StepOutput
from electra_ablate.tokens import SpecialTokens


class ElectraParams(GeneratorParams):
    disc_weight: float = Field(50.0, gt=0.0, description="lambda, weight of the discriminator loss")


class Electra(Objective):
    name = "electra"
    description = "ELECTRA: joint G (MLM) + D replaced-token detection over all tokens, lambda=50"
    Params = ElectraParams

    def __init__(self, backbone: BackboneConfig, params: ElectraParams, special: SpecialTokens):
        super().__init__(backbone, params, special)
        self.discriminator = Encoder(backbone)
        self.disc_head = TokenBinaryHead(backbone)
        self.generator = build_generator(self.discriminator, params)

    def rtd_weights(self, batch: Batch, corruption: Corruption) -> torch.Tensor:
        """Which tokens carry the discriminator loss: every non-pad token."""
        return non_pad(batch, self.special)

    def disc_logits(self, batch: Batch, corrupted: torch.Tensor) -> torch.Tensor:
        hidden = self.discriminator(
            corrupted, batch.get("token_type_ids"), batch.get("attention_mask")
        )
        return self.disc_head(hidden)

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        c = self.generator.corrupt(batch, self.special, p.mask_rate, p.temperature)
        logits = self.disc_logits(batch, c.corrupted)
        weights = self.rtd_weights(batch, c)
        disc_loss = rtd_loss(logits, c.replaced, weights)
        metrics = {
            **c.metrics,
            "disc_loss": disc_loss.detach(),
            **rtd_metrics(logits, c.replaced, weights),
        }
        return StepOutput(c.mlm_loss + p.disc_weight * disc_loss, metrics)

    def kept_model(self) -> KeptModel:
        return KeptModel(self.discriminator, "discriminator", self.disc_head)

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [
            generator_pass(self.generator, seq_len, self.params.mask_rate),
            ModelPass(self.backbone, "binary", seq_len),
        ]
