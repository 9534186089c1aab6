"""The replaced-token detector: an encoder, a one-logit-per-token head, the RTD loss and the
metrics that show whether it detects anything (ELECTRA, ELECTRA 15%, two-stage, adversarial),
with the collapse monitor's (``monitor``: ``enc_spread``, ``disc_head_inactive``,
``disc_head_logit_spread``) from the same pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.pretraining.components.losses import binary_entropy, masked_mean, roc_auc
from electra_ablate.pretraining.components.monitor import head_stats, kept_encoder_metrics
from electra_ablate.pretraining.objective import Batch, KeptModel, ModelPass, OutputPrior, logit


def rtd_loss(
    logits: torch.Tensor,
    replaced: torch.Tensor,
    weights: torch.Tensor,
    reduction: Literal["mean", "none"] = "mean",
) -> torch.Tensor:
    """Replaced-token detection: BCE of the "replaced" logit, averaged over ``weights``, or
    per position ([B, L], zero where the weight is 0) with ``reduction="none"``."""
    bce = F.binary_cross_entropy_with_logits(logits.float(), replaced.float(), reduction="none")
    if reduction == "none":
        return bce * weights.to(bce.dtype)
    return masked_mean(bce, weights)


@torch.no_grad()
def detection_metrics(
    logits: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor,
    loss: torch.Tensor,
    replaceable: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The detection loss, and how well the detector ranks at the scored positions that could
    have been replaced (``weights & replaceable``: ordinary tokens, not ``[CLS]``/``[SEP]``).

    Special tokens are never replaced, so a detector that has learnt only that scores ROC-AUC
    0.514 and 0.004 nats over every scored position on `tiny` data while detecting nothing; over
    ordinary tokens it scores 0.5 and 0. Those two figures over every scored position stay
    logged, labelled ``_incl_special``, so curves made before the change can be compared.
    """
    ordinary = weights.bool() & replaceable.bool()
    return {
        "disc_loss": loss.detach(),
        **ranking_metrics(logits, labels, ordinary),
        **{
            f"{name}_incl_special": value
            for name, value in ranking_metrics(logits, labels, weights.bool()).items()
            if name in ("disc_auc", "disc_nats_learnt")
        },
    }


def ranking_metrics(
    logits: torch.Tensor, labels: torch.Tensor, scored: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Accuracy and precision/recall of "replaced" at logit 0, ROC-AUC, and the nats learnt (the
    entropy of the scored labels, the loss of always predicting their rate, minus the BCE) over
    the ``scored`` positions."""
    predicted = (logits > 0) & scored
    actual = labels.bool() & scored
    true_pos = (predicted & actual).sum().float()
    label_entropy = binary_entropy(masked_mean(labels.float(), scored))
    return {
        "disc_acc": masked_mean((predicted == actual).float(), scored),
        "disc_precision": true_pos / predicted.sum().clamp(min=1),
        "disc_recall": true_pos / actual.sum().clamp(min=1),
        "disc_auc": roc_auc(logits, labels, scored),
        "disc_nats_learnt": label_entropy - rtd_loss(logits, labels, scored),
    }


@dataclass
class Detection:
    loss: torch.Tensor  # mean BCE over the scored positions
    per_position: torch.Tensor  # [B, L] BCE, zero where not scored
    logits: torch.Tensor  # [B, L]
    metrics: dict[str, torch.Tensor]


class Discriminator(nn.Module):
    def __init__(self, backbone: BackboneConfig) -> None:
        super().__init__()
        self.encoder = Encoder(backbone)
        self.head = TokenBinaryHead(backbone)

    def forward(self, batch: Batch, input_ids: torch.Tensor) -> torch.Tensor:
        """One "replaced" logit per token, [B, L]."""
        return self.states(batch, input_ids)[2]

    def states(
        self, batch: Batch, input_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The encoder's final states [B, L, H], the head's pre-activation [B, L, H] and the
        logits [B, L], from one pass (the collapse monitor reads the first two)."""
        hidden = self.encoder(input_ids, batch.get("token_type_ids"), batch.get("attention_mask"))
        return hidden, *self.head.states(hidden)

    def detect(
        self,
        batch: Batch,
        corrupted: torch.Tensor,
        replaced: torch.Tensor,
        weights: torch.Tensor,
        replaceable: torch.Tensor,
    ) -> Detection:
        """The RTD loss over the positions ``weights`` marks, and its metrics; ``replaceable``
        marks the positions a replacement could have hit (``masking.maskable``), where the
        ranking metrics are scored."""
        hidden, pre_activation, logits = self.states(batch, corrupted)
        per_position = rtd_loss(logits, replaced, weights, reduction="none")
        loss = per_position.sum() / weights.sum().clamp(min=1)
        metrics = {
            **detection_metrics(logits, replaced, weights, loss, replaceable),
            **kept_encoder_metrics(hidden, batch),
            # over ordinary tokens, as the ranking metrics: a head that tells only [CLS] and
            # [SEP] apart (never replaced) still has one logit where detection matters
            **head_stats(pre_activation, logits, replaceable, "disc_head"),
        }
        return Detection(loss, per_position, logits, metrics)

    def kept(self) -> KeptModel:
        return KeptModel(self.encoder, "discriminator", self.head)

    def flops_pass(self, seq_len: int) -> ModelPass:
        return ModelPass(self.encoder.cfg, "binary", seq_len)

    def output_priors(self, replaced_rate: float) -> list[OutputPrior]:
        return [OutputPrior("detection", self.head.logit.bias, logit(replaced_rate))]


def non_pad(batch: Batch, pad_id: int) -> torch.Tensor:
    """Every real token: where full replaced-token detection scores the discriminator."""
    return batch["input_ids"] != pad_id
