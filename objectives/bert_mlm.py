"""BERT masked language modelling (Devlin et al. 2019): the baseline of every ablation."""

from __future__ import annotations

from pydantic import Field, model_validator

from electra_ablate.components import (
    bert_corruption,
    masked_accuracy,
    masked_cross_entropy,
    select_masked,
)
from electra_ablate.config import BackboneConfig, max_predictions
from electra_ablate.model import Encoder, MLMHead, gather_positions
from electra_ablate.objective import (
    Batch,
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    StepOutput,
)
from electra_ablate.tokens import SpecialTokens


class BertMLMParams(ObjectiveParams):
    mask_token_prob: float = Field(0.8, ge=0.0, le=1.0, description="selected -> [MASK]")
    random_token_prob: float = Field(0.1, ge=0.0, le=1.0, description="selected -> random token")

    @model_validator(mode="after")
    def _split_fits(self) -> BertMLMParams:
        if self.mask_token_prob + self.random_token_prob > 1.0:
            raise ValueError("mask_token_prob + random_token_prob must be at most 1")
        return self


class BertMLM(Objective):
    name = "bert_mlm"
    description = "BERT MLM: 15% selected (80% [MASK] / 10% random / 10% kept), CE at selected"
    Params = BertMLMParams

    def __init__(self, backbone: BackboneConfig, params: BertMLMParams, special: SpecialTokens):
        super().__init__(backbone, params, special)
        self.encoder = Encoder(backbone)
        self.head = MLMHead(backbone, backbone.embedding_size)

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        slots = select_masked(batch["input_ids"], self.special, p.mask_rate)
        replacements = bert_corruption(
            slots, self.special, self.backbone.vocab_size, p.mask_token_prob, p.random_token_prob
        )
        corrupted = slots.scatter(batch["input_ids"], replacements)
        hidden = self.encoder(corrupted, batch.get("token_type_ids"), batch.get("attention_mask"))
        logits = self.head(
            gather_positions(hidden, slots.positions), self.encoder.embeddings.word.weight
        )
        loss = masked_cross_entropy(logits, slots.originals, slots.valid)
        metrics = {
            "mlm_loss": loss.detach(),
            "mlm_acc": masked_accuracy(logits, slots.originals, slots.valid),
        }
        return StepOutput(loss, metrics)

    def kept_model(self) -> KeptModel:
        return KeptModel(self.encoder, "mlm", self.head)

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [ModelPass(self.backbone, "mlm", max_predictions(self.params.mask_rate, seq_len))]
