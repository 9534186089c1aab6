"""All-Tokens MLM (ELECTRA paper, Table 5): the main model predicts the identity of EVERY
token, with a learned copy gate, so it learns from all positions like ELECTRA while keeping a
generative output:

    p(x_t) = D_t * 1[x_t = input_t] + (1 - D_t) * softmax(logits_t)(x_t),  D_t = sigmoid(w·h_t)

and the loss is -log p(x_t) over all non-pad tokens, computed in log space for stability.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from electra_ablate.plugin import (
    BackboneConfig,
    Batch,
    Encoder,
    GeneratorParams,
    KeptModel,
    MLMHead,
    ModelPass,
    Objective,
    OutputPrior,
    StepOutput,
    Vocab,
    build_generator,
    init_weights,
    kept_encoder_metrics,
    logit,
    masked_mean,
    non_pad,
    target_log_softmax,
)


def copy_mixture_log_prob(
    logits: torch.Tensor, gate: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """log p(target) under the copy mixture; logits [..., V], gate/inputs/targets [...]."""
    log_softmax = target_log_softmax(logits, targets)  # no [positions x V] log-probs kept
    log_generate = F.logsigmoid(-gate.float()) + log_softmax
    log_copy_or_generate = torch.logaddexp(F.logsigmoid(gate.float()), log_generate)
    return torch.where(targets == inputs, log_copy_or_generate, log_generate)


class AllTokensMLM(Objective):
    name = "all_tokens_mlm"
    description = "All-Tokens MLM: generator-corrupted input, predict every token with a copy head"
    Params = GeneratorParams

    def __init__(self, backbone: BackboneConfig, params: GeneratorParams, vocab: Vocab):
        super().__init__(backbone, params, vocab)
        self.encoder = Encoder(backbone)
        self.head = MLMHead(backbone, backbone.embedding_size)
        self.copy_gate = nn.Linear(backbone.hidden_size, 1)
        init_weights(self.copy_gate, backbone.initializer_range)
        self.generator = build_generator(self.encoder, params)

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        c = self.generator.corrupt(batch, self.vocab, p.mask_rate, p.temperature)
        hidden = self.encoder(c.corrupted, batch.get("token_type_ids"), batch.get("attention_mask"))
        logits = self.head(hidden, self.encoder.embeddings.word.weight)
        gate = self.copy_gate(hidden).squeeze(-1)
        log_p = copy_mixture_log_prob(logits, gate, c.corrupted, batch["input_ids"])
        weights = non_pad(batch, self.special.pad)
        loss = masked_mean(-log_p, weights)
        with torch.no_grad():
            predicted = torch.where(gate > 0, c.corrupted, logits.argmax(-1))
            metrics = {
                **c.metrics,
                "all_tokens_loss": loss.detach(),
                "all_tokens_acc": masked_mean((predicted == batch["input_ids"]).float(), weights),
                "copy_prob": masked_mean(torch.sigmoid(gate.float()), weights),
                **kept_encoder_metrics(hidden, batch),
            }
        return StepOutput(c.mlm_loss + loss, metrics)

    def kept_model(self) -> KeptModel:
        return KeptModel(self.encoder, "mlm", self.head)

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [
            *self.generator.flops_passes(seq_len, self.params.mask_rate),
            # the MLM head at every position, and the copy gate beside it
            ModelPass(
                self.backbone, "mlm", seq_len, extra_linears=((self.backbone.hidden_size, 1),)
            ),
        ]

    def output_priors(self) -> list[OutputPrior]:
        copy_rate = 1.0 - self.params.mask_rate * (1.0 - self.vocab.collision())
        return [
            *self.generator.output_priors(self.vocab),
            OutputPrior("mlm", self.head.bias, self.vocab.prior_logits()),
            OutputPrior("detection", self.copy_gate.bias, logit(copy_rate)),
        ]
