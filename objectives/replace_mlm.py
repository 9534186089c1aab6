"""Replace MLM (ELECTRA paper, Table 5): like BERT, but the selected tokens are replaced by
samples from a small generator instead of [MASK], so pre-training never sees a token that
fine-tuning lacks. Isolates the pre-train/fine-tune mismatch that [MASK] causes."""

from __future__ import annotations

from electra_ablate.components import (
    GeneratorParams,
    build_generator,
    generator_pass,
    masked_accuracy,
    masked_cross_entropy,
)
from electra_ablate.config import BackboneConfig, max_predictions
from electra_ablate.model import Encoder, MLMHead, gather_positions
from electra_ablate.objective import Batch, KeptModel, ModelPass, Objective, StepOutput
from electra_ablate.tokens import SpecialTokens


class ReplaceMLM(Objective):
    name = "replace_mlm"
    description = "Replace MLM: selected tokens replaced by generator samples; CE at selected"
    Params = GeneratorParams

    def __init__(self, backbone: BackboneConfig, params: GeneratorParams, special: SpecialTokens):
        super().__init__(backbone, params, special)
        self.encoder = Encoder(backbone)
        self.head = MLMHead(backbone, backbone.embedding_size)
        self.generator = build_generator(self.encoder, params)

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        c = self.generator.corrupt(batch, self.special, p.mask_rate, p.temperature)
        hidden = self.encoder(c.corrupted, batch.get("token_type_ids"), batch.get("attention_mask"))
        logits = self.head(
            gather_positions(hidden, c.slots.positions), self.encoder.embeddings.word.weight
        )
        mlm_loss = masked_cross_entropy(logits, c.slots.originals, c.slots.valid)
        metrics = {
            **c.metrics,
            "mlm_loss": mlm_loss.detach(),
            "mlm_acc": masked_accuracy(logits, c.slots.originals, c.slots.valid),
        }
        return StepOutput(c.mlm_loss + mlm_loss, metrics)

    def kept_model(self) -> KeptModel:
        return KeptModel(self.encoder, "mlm", self.head)

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        predicted = max_predictions(self.params.mask_rate, seq_len)
        return [
            generator_pass(self.generator, seq_len, self.params.mask_rate),
            ModelPass(self.backbone, "mlm", predicted),
        ]
