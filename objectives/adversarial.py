"""Adversarial ELECTRA (ELECTRA paper, section 3.2 and Appendix F): the generator is trained
with REINFORCE to MAXIMISE the discriminator's loss instead of by maximum likelihood.

At each masked position the reward is D's BCE there (-log D_original if the sample equals the
original, else -log(1 - D_original)); a learned baseline b_t = -log sigmoid(v·h_G,t), fitted to
the reward by squared error, reduces variance. The policy loss is -(r - b) * log p_G(sample)
with one sample per position. Optionally the generator first trains by MLE (``mle_warmup``) or
mixes an MLE term into its loss (``mle_weight``); by default it gets no MLE gradient at all.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from electra_ablate.plugin import (
    BackboneConfig,
    Batch,
    Discriminator,
    Generator,
    GeneratorParams,
    KeptModel,
    ModelPass,
    Objective,
    OutputPrior,
    Stage,
    StepOutput,
    Vocab,
    build_generator,
    init_weights,
    maskable,
    masked_mean,
    non_pad,
    without_special,
)


class AdversarialParams(GeneratorParams):
    disc_weight: float = Field(50.0, gt=0.0, description="lambda, weight of the discriminator loss")
    baseline: bool = Field(True, description="subtract a learned baseline from the reward")
    mle_weight: float = Field(0.0, ge=0.0, description="weight of a generator MLE term")
    mle_warmup: float = Field(
        0.0, ge=0.0, lt=1.0, description="budget share of MLE-trained G first"
    )

    @model_validator(mode="after")
    def _needs_a_trained_generator(self) -> AdversarialParams:
        if self.generator != "mlm":
            raise ValueError("adversarial training needs generator 'mlm' (a policy to train)")
        return self


class Adversarial(Objective):
    name = "adversarial"
    description = "Adversarial ELECTRA: G trained by REINFORCE to maximise D's loss"
    Params = AdversarialParams

    def __init__(self, backbone: BackboneConfig, params: AdversarialParams, vocab: Vocab):
        super().__init__(backbone, params, vocab)
        self.discriminator = Discriminator(backbone)
        generator = build_generator(self.discriminator.encoder, params)
        assert isinstance(generator, Generator)
        self.generator = generator
        self.baseline_head = nn.Linear(generator.encoder.cfg.hidden_size, 1)
        init_weights(self.baseline_head, backbone.initializer_range)

    def stages(self) -> list[Stage]:
        if self.params.mle_warmup == 0.0:
            return [Stage("adversarial", 1.0)]
        w = self.params.mle_warmup
        return [Stage("mle_warmup", w), Stage("adversarial", 1.0 - w)]

    def leaves_parameters_unused(self) -> bool:
        """The baseline head is trained by the REINFORCE stage's baseline loss only."""
        return self.stages()[self.stage_index].name == "mle_warmup" or not self.params.baseline

    def forward(self, batch: Batch) -> StepOutput:
        p = self.params
        c = self.generator.corrupt(batch, self.vocab, p.mask_rate, p.temperature)
        weights = non_pad(batch, self.special.pad)
        replaceable = maskable(batch["input_ids"], self.vocab)
        d = self.discriminator.detect(batch, c.corrupted, c.replaced, weights, replaceable)
        metrics = {**c.metrics, **d.metrics}
        if self.stages()[self.stage_index].name == "mle_warmup":
            return StepOutput(c.mlm_loss + p.disc_weight * d.loss, metrics)

        reward = d.per_position.detach().gather(1, c.slots.positions)
        policy_loss, baseline_loss = self.reinforce(
            c.logits, c.samples, c.hidden, reward, c.slots.valid
        )
        metrics |= {
            "reward": masked_mean(reward, c.slots.valid),
            "policy_loss": policy_loss.detach(),
            "baseline_loss": baseline_loss.detach(),
        }
        loss = p.disc_weight * d.loss + policy_loss + baseline_loss + p.mle_weight * c.mlm_loss
        return StepOutput(loss, metrics)

    def reinforce(
        self,
        logits: torch.Tensor,
        samples: torch.Tensor,
        gen_hidden: torch.Tensor,
        reward: torch.Tensor,
        valid: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy-gradient loss -(r - b) log p(sample) and the baseline's squared error.

        The baseline reads detached generator states, so G's gradient is purely REINFORCE.
        """
        policy_logits = without_special(logits.float(), self.vocab)
        log_policy = F.log_softmax(policy_logits / self.params.temperature, dim=-1)
        log_p_sample = log_policy.gather(-1, samples.unsqueeze(-1)).squeeze(-1)
        if self.params.baseline:
            baseline = -F.logsigmoid(self.baseline_head(gen_hidden.detach()).squeeze(-1).float())
            baseline_loss = masked_mean((baseline - reward) ** 2, valid)
            advantage = reward - baseline.detach()
        else:
            baseline_loss = torch.zeros((), device=reward.device)
            advantage = reward
        return -masked_mean(advantage * log_p_sample, valid), baseline_loss

    def kept_model(self) -> KeptModel:
        return self.discriminator.kept()

    def flops_plan(self, seq_len: int) -> list[ModelPass]:
        return [
            *self.generator.flops_passes(seq_len, self.params.mask_rate),
            self.discriminator.flops_pass(seq_len),
        ]

    def output_priors(self) -> list[OutputPrior]:
        rate = self.params.mask_rate * (1.0 - self.vocab.collision())
        return [
            *self.generator.output_priors(self.vocab),
            *self.discriminator.output_priors(rate),
        ]
