"""The GLUE classifier and its layer-wise learning rates.

The classifier is the kept encoder with dropout and one linear layer on the ``[CLS]`` vector
(ELECTRA has no pooler), one output per class or a single score for regression.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from electra_ablate.backbone.model import Encoder, init_weights


class GlueClassifier(nn.Module):
    def __init__(self, encoder: Encoder, num_outputs: int, dropout: float) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.cfg.hidden_size, num_outputs)
        init_weights(self.head, encoder.cfg.initializer_range)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """Logits [B, num_outputs] from the hidden state at position 0 (``[CLS]``)."""
        hidden = self.encoder(input_ids, token_type_ids, attention_mask)
        return self.head(self.dropout(hidden[:, 0]))


def layer_depth(name: str, num_layers: int) -> int:
    """Depth of a classifier parameter: embeddings (and the E->H projection) 0, encoder layer i
    at i + 1 (a pre-LN encoder's final LayerNorm with the top layer), the task head at
    num_layers + 1."""
    if name.startswith("encoder.layers."):
        return int(name.split(".")[2]) + 1
    if name.startswith("encoder.final_norm."):  # pre-LN's last LayerNorm: part of the top layer
        return num_layers
    if name.startswith(("encoder.embeddings.", "encoder.project.")):
        return 0
    return num_layers + 1


def layerwise_param_groups(
    model: GlueClassifier, lr: float, layer_decay: float, weight_decay: float
) -> list[dict[str, Any]]:
    """AdamW parameter groups with lr * layer_decay ** (num_layers + 1 - depth).

    Head: lr; top layer: lr * d; ...; bottom layer: lr * d**L; embeddings: lr * d**(L+1). The
    official ELECTRA code counts the head at depth L + 2 (a leftover of the removed pooler), so
    every pre-trained layer there gets one extra factor of d (google-research/electra#51); this
    follows the paper's description instead. Weight decay skips the 1-D tensors, which are
    exactly the biases and LayerNorm gains.
    """
    num_layers = model.encoder.cfg.num_layers
    groups: dict[tuple[int, bool], dict[str, Any]] = {}
    for name, param in model.named_parameters():
        depth = layer_depth(name, num_layers)
        decayed = weight_decay > 0 and param.ndim >= 2
        if (depth, decayed) not in groups:
            scale = layer_decay ** (num_layers + 1 - depth)
            groups[depth, decayed] = {
                "params": [],
                "names": [],
                "depth": depth,
                "lr_scale": scale,
                "lr": lr * scale,
                "weight_decay": weight_decay if decayed else 0.0,
            }
        groups[depth, decayed]["params"].append(param)
        groups[depth, decayed]["names"].append(name)
    return [groups[key] for key in sorted(groups)]
