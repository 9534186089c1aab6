"""AdamW as BERT and ELECTRA use it (torch's, bias-corrected, or the original code's, without
bias correction: ``pretrain.adam_bias_correction``), and the learning-rate schedule in its three
shapes (``PretrainSpec.schedule_shape``), each a pure function of the step, so a resumed run
follows exactly the schedule of an uninterrupted one."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from electra_ablate.pretraining.config import PretrainSpec, warmup_of_horizon
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.objective import Objective


def make_optimizer(objective: Objective, spec: PretrainSpec) -> torch.optim.Optimizer:
    """AdamW with no weight decay on LayerNorm weights and biases (the 1-D parameters): torch's,
    fused on CUDA, as fine-tuning's (the CPU keeps torch's default, which earlier runs trained
    with), or the original code's without bias correction (``OriginalAdamW``) when
    ``pretrain.adam_bias_correction`` is false."""
    decay, no_decay = [], []
    for _, p in objective.trainable_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": spec.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if spec.adam_bias_correction is False:
        return OriginalAdamW(
            groups, lr=spec.learning_rate, betas=spec.adam_betas, eps=spec.adam_eps
        )
    on_cuda = all(p.is_cuda for p in decay + no_decay)
    return torch.optim.AdamW(
        groups,
        lr=spec.learning_rate,
        betas=spec.adam_betas,
        eps=spec.adam_eps,
        fused=on_cuda or None,  # one kernel for every tensor, no host-side step counter
    )


class OriginalAdamW(torch.optim.Optimizer):
    """The original code's ``AdamWeightDecayOptimizer`` (BERT's and ELECTRA's
    ``model/optimization.py``): Adam whose moments are never bias-corrected, with decoupled
    weight decay added to the update before the rate scales it::

        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
        p -= lr (m / (sqrt(v) + eps) + wd p)

    Without the correction the early steps are larger than torch's AdamW's, by
    (1 - b1^k) / sqrt(1 - b2^k) at step k: 3.2x at the first, 6.5x at the tenth, back to 3.2x by
    the hundredth, 1 after some thousands. Multi-tensor (``foreach``) ops, on any device; the
    trainer steps it outside the compiled or graphed forward, as it does torch's. Its state,
    ``exp_avg`` and ``exp_avg_sq`` per parameter, holds no step counter: nothing here depends
    on the step, so a resumed run continues exactly."""

    def __init__(
        self,
        params: list[dict[str, object]],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: object = None) -> None:  # type: ignore[override]
        """One update of every parameter with a gradient (no closure: the trainer has none)."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads, exp_avgs, exp_avg_sqs = [], [], []
            for p in params:
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
            beta1, beta2 = group["betas"]
            torch._foreach_mul_(exp_avgs, beta1)
            torch._foreach_add_(exp_avgs, grads, alpha=1.0 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
            denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_add_(denom, group["eps"])
            update = torch._foreach_div(exp_avgs, denom)
            if group["weight_decay"]:
                torch._foreach_add_(update, params, alpha=group["weight_decay"])
            torch._foreach_add_(params, update, alpha=-group["lr"])


def learning_rate(plan: RunPlan, step: int, spec: PretrainSpec) -> float:
    """The rate of step ``step`` (0-based) in the spec's schedule shape.

    The budget and per-run shapes: a linear warm-up, then the schedule's decay to zero (or
    none) at the stage's end, restarted for each stage; ``linear`` is BERT's and ELECTRA's,
    ``cosine`` and ``constant`` exist for recipe studies. The paper shape
    (``pretrain.decay_horizon_steps``): ``paper_rate``, over the run's global step.
    """
    if spec.decay_horizon_steps is not None:
        return paper_rate(step, spec)
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


def paper_rate(step: int, spec: PretrainSpec) -> float:
    """The original code's rate at global step ``step``: ``lr (1 - t/H) min(1, t/W)``, a linear
    (power 1) decay from step 0 to zero at the horizon H times the warm-up ramp over W steps
    (``model/optimization.py``: ``polynomial_decay`` times ``minimum(1, step / warmup)``), so
    its first step has rate 0 as there. It never depends on the run's length: every objective
    follows one schedule and a shorter run is the first steps of a longer one (a staged run too,
    over its global step: the schedule is not restarted for a stage)."""
    horizon = spec.decay_horizon_steps or 1
    warmup = warmup_of_horizon(spec)
    ramp = min(1.0, step / warmup) if warmup > 0 else 1.0
    return spec.learning_rate * (1.0 - min(step, horizon) / horizon) * ramp


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
    stated (the dry run, the run, the report). None under the paper shape, whose
    ``pretrain.decay_horizon_steps`` is the request for a schedule longer than the run (every
    run's reach is stated by ``schedule_reach``)."""
    if spec.schedule_shape == "paper":  # the horizon is the explicit request (its reach: below)
        return []
    found = []
    for stage, steps in enumerate(plan.stage_steps):
        warmup = warmup_steps(spec, steps)
        if warmup > steps:
            last = plan.stage_start(stage) + steps - 1
            found.append(ShortRun(stage, steps, warmup, learning_rate(plan, last, spec)))
    return found


@dataclass(frozen=True)
class ScheduleReach:
    """What one run's schedule reached: its highest rate and the rate of its last step."""

    peak: float
    final: float

    def describe(self) -> str:
        """``peak 5.00e-04, final 5.43e-08``."""
        return f"peak {self.peak:.2e}, final {self.final:.2e}"


def schedule_reach(plan: RunPlan, spec: PretrainSpec) -> ScheduleReach:
    """The highest rate ``plan``'s run reaches and the rate of its last step: every report's
    recipe row and a per-run warm-up's dry-run line state them. Each shape's rate rises to the
    end of its warm-up and falls after it, so the peak is at a warm-up's end or a stage's
    last step; those steps (and their neighbours) are the only ones evaluated."""
    last = max(0, plan.total_steps - 1)
    steps = {0, last}
    for stage, n in enumerate(plan.stage_steps):
        start = plan.stage_start(stage)
        warmup = warmup_of_horizon(spec) if spec.decay_horizon_steps else warmup_steps(spec, n)
        base = 0 if spec.decay_horizon_steps else start
        steps |= {start, start + n - 1} | {base + warmup + d for d in (-1, 0, 1)}
    rates = [learning_rate(plan, s, spec) for s in sorted(steps) if 0 <= s <= last]
    return ScheduleReach(max(rates), learning_rate(plan, last, spec))


def per_run_shapes(runs: list[tuple[str, RunPlan]], spec: PretrainSpec) -> str | None:
    """One line when ``pretrain.warmup_steps`` is set without a horizon and the study's runs at
    one budget differ in steps: the absolute warm-up and the decay at each run's own end then
    give them different shapes (each run's peak and final rate), which the dry run says. None
    otherwise."""
    if spec.schedule_shape != "per-run" or len({plan.stage_steps for _, plan in runs}) < 2:
        return None
    parts = [
        f"`{label}` {plan.total_steps:,} steps, {schedule_reach(plan, spec).describe()}"
        for label, plan in runs
    ]
    return (
        f"pretrain.warmup_steps {spec.warmup_steps:,} with decay at each run's end gives the "
        f"objectives different schedule shapes at one budget: {'; '.join(parts)} (one shape "
        "for all: warmup_fraction, or pretrain.decay_horizon_steps for the paper's)"
    )
