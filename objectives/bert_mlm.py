"""BERT masked language modelling (Devlin et al. 2019): the baseline of every ablation."""

from __future__ import annotations

from pydantic import Field, model_validator

from electra_ablate.plugin import (
    BackboneConfig,
    Batch,
    Encoder,
    KeptModel,
    MaskedLM,
    ModelPass,
    Objective,
    ObjectiveParams,
    OutputPrior,
    StepOutput,
    Vocab,
    bert_corruption,
    masked_cross_entropy,
    max_predictions,
    mlm_metrics,
    select_masked,
)


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

    def __init__(self, backbone: BackboneConfig, params: BertMLMParams, vocab: Vocab):
        super().__init__(backbone, params, vocab)
        self.mlm = MaskedLM(Encoder(backbone))

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        slots = select_masked(batch["input_ids"], self.vocab, p.mask_rate)
        replacements = bert_corruption(slots, self.vocab, p.mask_token_prob, p.random_token_prob)
        corrupted = slots.scatter(batch["input_ids"], replacements)
        _, logits, monitor = self.mlm.predict(batch, corrupted, slots)
        loss = masked_cross_entropy(logits, slots.originals, slots.valid)
        metrics = mlm_metrics("mlm", logits, slots.originals, slots.valid, loss, self.vocab)
        metrics |= monitor
        # The same at the [MASK]ed slots alone: the 10% left unchanged can be scored by copying
        # the visible token, so only these measure prediction from context (as a generator's)
        at_mask = slots.valid & (replacements == self.special.mask)
        masked_loss = masked_cross_entropy(logits.detach(), slots.originals, at_mask)
        metrics |= mlm_metrics(
            "mlm_masked", logits, slots.originals, at_mask, masked_loss, self.vocab
        )
        return StepOutput(loss, metrics)

    def kept_model(self) -> KeptModel:
        return self.mlm.kept()

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [self.mlm.flops_pass(max_predictions(self.params.mask_rate, seq_len))]

    def output_priors(self) -> list[OutputPrior]:
        return [self.mlm.output_prior("mlm", self.vocab)]
