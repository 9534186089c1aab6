"""AdamW as BERT and ELECTRA use it, and the learning-rate schedule (a pure function of the
step, so a resumed run follows exactly the schedule of an uninterrupted one)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.objective import Objective


def make_optimizer(objective: Objective, spec: PretrainSpec) -> torch.optim.AdamW:
    """AdamW with no weight decay on LayerNorm weights and biases (the 1-D parameters); fused
    on CUDA, as fine-tuning's (the CPU keeps torch's default, which earlier runs trained with)."""
    decay, no_decay = [], []
    for _, p in objective.trainable_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": spec.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    on_cuda = all(p.is_cuda for p in decay + no_decay)
    return torch.optim.AdamW(
        groups,
        lr=spec.learning_rate,
        betas=spec.adam_betas,
        eps=spec.adam_eps,
        fused=on_cuda or None,  # one kernel for every tensor, no host-side step counter
    )


def learning_rate(plan: RunPlan, step: int, spec: PretrainSpec) -> float:
    """Linear warm-up, then the schedule's decay to zero (or none), restarted for each stage.

    ``linear`` is BERT's and ELECTRA's; ``cosine`` and ``constant`` exist for recipe studies.
    """
    stage = plan.stage_of(step)
    steps = plan.stage_steps[stage]
    t = step - plan.stage_start(stage)
    warmup = warmup_steps(spec, steps)
    if t < warmup:
        return spec.learning_rate * (t + 1) / warmup
    if spec.schedule == "constant":
        return spec.learning_rate
    progress = (t - warmup) / max(1, steps - warmup)
    if spec.schedule == "cosine":
        return spec.learning_rate * 0.5 * (1.0 + math.cos(math.pi * progress))
    return spec.learning_rate * max(0.0, (steps - t) / max(1, steps - warmup))


def warmup_steps(spec: PretrainSpec, steps: int) -> int:
    """The warm-up of a stage of ``steps`` steps: ``warmup_steps`` where given (the paper's
    absolute 10,000, which a short run never finishes), else ``warmup_fraction`` of them."""
    if spec.warmup_steps is not None:
        return spec.warmup_steps
    return max(1, round(spec.warmup_fraction * steps)) if spec.warmup_fraction > 0 else 0


@dataclass(frozen=True)
class ShortRun:
    """A stage shorter than its warm-up: its rate climbs for all of its ``steps`` and ends at
    ``reached`` (the schedule's rate at its last step), below the peak."""

    stage: int
    steps: int
    warmup: int
    reached: float

    def describe(self, spec: PretrainSpec, stages: int = 1) -> str:
        """``warm-up 100000 steps > the run's 21: the rate reaches 1.05e-07 (2.1e-04 of the
        5e-04 peak)``; a staged run names the stage."""
        run = f"stage {self.stage + 1}'s" if stages > 1 else "the run's"
        return (
            f"warm-up {self.warmup} steps > {run} {self.steps}: the rate reaches "
            f"{self.reached:.3g} ({self.reached / spec.learning_rate:.2g} of the "
            f"{spec.learning_rate:.0e} peak)"
        )


def warmup_beyond_run(plan: RunPlan, spec: PretrainSpec) -> list[ShortRun]:
    """Each stage of ``plan`` that ends before its warm-up does, with the highest rate it
    reaches: refused at planning unless ``pretrain.warmup_beyond_run`` allows it, and then
    stated (the dry run, the run, the report)."""
    found = []
    for stage, steps in enumerate(plan.stage_steps):
        warmup = warmup_steps(spec, steps)
        if warmup > steps:
            last = plan.stage_start(stage) + steps - 1
            found.append(ShortRun(stage, steps, warmup, learning_rate(plan, last, spec)))
    return found
