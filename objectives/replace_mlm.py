"""Replace MLM (ELECTRA paper, Table 5): like BERT, but the selected tokens are replaced by
samples from a small generator instead of [MASK], so pre-training never sees a token that
fine-tuning lacks. Isolates the pre-train/fine-tune mismatch that [MASK] causes."""

from __future__ import annotations

from electra_ablate.plugin import (
    BackboneConfig,
    Batch,
    Encoder,
    GeneratorParams,
    KeptModel,
    MaskedLM,
    ModelPass,
    Objective,
    OutputPrior,
    StepOutput,
    Vocab,
    build_generator,
    masked_cross_entropy,
    max_predictions,
    mlm_metrics,
)


class ReplaceMLM(Objective):
    name = "replace_mlm"
    description = "Replace MLM: selected tokens replaced by generator samples; CE at selected"
    Params = GeneratorParams

    def __init__(self, backbone: BackboneConfig, params: GeneratorParams, vocab: Vocab):
        super().__init__(backbone, params, vocab)
        self.mlm = MaskedLM(Encoder(backbone))
        self.generator = build_generator(self.mlm.encoder, params)

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        c = self.generator.corrupt(batch, self.vocab, p.mask_rate, p.temperature)
        _, logits, monitor = self.mlm.predict(batch, c.corrupted, c.slots)
        loss = masked_cross_entropy(logits, c.slots.originals, c.slots.valid)
        metrics = mlm_metrics("mlm", logits, c.slots.originals, c.slots.valid, loss, self.vocab)
        return StepOutput(c.mlm_loss + loss, {**c.metrics, **metrics, **monitor})

    def kept_model(self) -> KeptModel:
        return self.mlm.kept()

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        p = self.params
        return [
            *self.generator.flops_passes(seq_len, p.mask_rate),
            self.mlm.flops_pass(max_predictions(p.mask_rate, seq_len)),
        ]

    def output_priors(self) -> list[OutputPrior]:
        return [
            *self.generator.output_priors(self.vocab),
            self.mlm.output_prior("mlm", self.vocab),
        ]
