"""An encoder with an MLM head that predicts the original tokens at selected slots: BERT's main
model, Replace MLM's main model, and every generator."""

from __future__ import annotations

import torch
from torch import nn

from electra_ablate.backbone.model import Encoder, MLMHead, gather_positions
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.pretraining.components.masking import MaskedSlots
from electra_ablate.pretraining.components.monitor import kept_encoder_metrics
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
        return self.at_slots(self.encode(batch, input_ids), slots)

    def predict(
        self, batch: Batch, input_ids: torch.Tensor, slots: MaskedSlots
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """As ``forward``, with the collapse monitor's ``enc_spread`` of this encoder's final
        states at every real position (``monitor.kept_encoder_metrics``): what an objective
        calls when this is the model it keeps, from the same pass."""
        states = self.encode(batch, input_ids)
        return *self.at_slots(states, slots), kept_encoder_metrics(states, batch)

    def encode(self, batch: Batch, input_ids: torch.Tensor) -> torch.Tensor:
        """The encoder's final states [B, L, H]."""
        return self.encoder(input_ids, batch.get("token_type_ids"), batch.get("attention_mask"))

    def at_slots(
        self, states: torch.Tensor, slots: MaskedSlots
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = gather_positions(states, slots.positions)
        return hidden, self.head(hidden, self.encoder.embeddings.word.weight)

    def kept(self) -> KeptModel:
        return KeptModel(self.encoder, "mlm", self.head)

    def flops_pass(self, predicted: int, trained: bool = True) -> ModelPass:
        return ModelPass(self.encoder.cfg, "mlm", predicted, trained)

    def output_prior(self, kind: PriorKind, vocab: Vocab) -> OutputPrior:
        return OutputPrior(kind, self.head.bias, vocab.prior_logits())
