"""An encoder with an MLM head that predicts the original tokens at selected slots: BERT's main
model, Replace MLM's main model, and every generator."""

from __future__ import annotations

import torch
from torch import nn

from electra_ablate.backbone.model import Encoder, MLMHead, gather_positions
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.pretraining.components.masking import MaskedSlots
from electra_ablate.pretraining.objective import Batch, KeptModel, ModelPass, OutputPrior, PriorKind


class MaskedLM(nn.Module):
    """The MLM head's output matrix is the encoder's token embedding matrix (tied, as in BERT and
    ELECTRA), passed at call time so that sharing embeddings with another encoder ties it too."""

    def __init__(self, encoder: Encoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = MLMHead(encoder.cfg, encoder.embeddings.word.embedding_dim)

    def forward(
        self, batch: Batch, input_ids: torch.Tensor, slots: MaskedSlots
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden states [B, K, H] and vocabulary logits [B, K, V] at the slots."""
        hidden = self.encoder(input_ids, batch.get("token_type_ids"), batch.get("attention_mask"))
        hidden = gather_positions(hidden, slots.positions)
        return hidden, self.head(hidden, self.encoder.embeddings.word.weight)

    def kept(self) -> KeptModel:
        return KeptModel(self.encoder, "mlm", self.head)

    def flops_pass(self, predicted: int, trained: bool = True) -> ModelPass:
        return ModelPass(self.encoder.cfg, "mlm", predicted, trained)

    def output_prior(self, kind: PriorKind, vocab: Vocab) -> OutputPrior:
        return OutputPrior(kind, self.head.bias, vocab.prior_logits())
