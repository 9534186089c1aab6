"""How a FLOPs budget turns into steps: per stage, and where each checkpoint falls.

Every objective in a study gets the same pre-training FLOPs, so an objective that costs more
per step gets fewer steps. A staged objective splits the budget between its stages by FLOPs or
by steps (``Objective.stage_split``); checkpoints fall at fractions of the FLOPs spent.

A budget is turned into steps with nothing kept per step (a checkpoint's step is found by
bisection), and refused past ``MAX_RUN_STEPS``; a budget far from a whole number of steps is
rounded, and ``budget_rounding`` says so when that moves it by more than ``ROUNDING_NOTED``.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from electra_ablate.infra.errors import SpecError
from electra_ablate.pretraining.flops import CONVENTIONS, Convention, stage_step_flops
from electra_ablate.pretraining.objective import Objective

MAX_RUN_STEPS = 1_000_000_000
"""The most steps one run may plan: over 500 times the paper's longest run (ELECTRA-Large,
1.75 M steps), and 145 days at the fastest step this code has timed (80 ELECTRA-Small steps/s
on an H200). A budget past it is a slip of the exponent (``1e40`` for ``1e14``), refused before
anything is built rather than trained until the machine gives up."""

ROUNDING_NOTED = 0.05
"""A budget rounded to whole steps is stated (``budget_rounding``) when the planned FLOPs
differ from it by more than this share: below one step, or a few steps with a remainder."""


@dataclass(frozen=True)
class RunPlan:
    stage_steps: tuple[int, ...]
    stage_flops: tuple[dict[str, float], ...]  # FLOPs of one step of each stage, per convention
    checkpoints: tuple[tuple[float, int], ...]  # (budget fraction, global step)

    @property
    def total_steps(self) -> int:
        return sum(self.stage_steps)

    def stage_of(self, step: int) -> int:
        """The stage that trains step ``step`` (0-based)."""
        bounds = [sum(self.stage_steps[: i + 1]) for i in range(len(self.stage_steps))]
        return min(bisect_right(bounds, step), len(bounds) - 1)

    def stage_start(self, stage: int) -> int:
        return sum(self.stage_steps[:stage])

    def flops_at(self, step: int) -> dict[str, float]:
        """Cumulative pre-training FLOPs after ``step`` steps, in both conventions."""
        out = dict.fromkeys(CONVENTIONS, 0.0)
        remaining = step
        for steps, flops in zip(self.stage_steps, self.stage_flops, strict=True):
            done = min(steps, remaining)
            for c in CONVENTIONS:
                out[c] += done * flops[c]
            remaining -= done
        return out

    def checkpoint_steps(self) -> dict[int, list[float]]:
        """Global step -> the budget fractions whose checkpoint is saved after it."""
        at: dict[int, list[float]] = {}
        for fraction, step in self.checkpoints:
            at.setdefault(step, []).append(fraction)
        return at


def plan_run(
    objective: Objective,
    budget_flops: float,
    convention: Convention,
    batch_size: int,
    seq_len: int,
    fractions: list[float],
) -> RunPlan:
    """Split ``budget_flops`` between the objective's stages and place the checkpoints."""
    per_convention = {c: stage_step_flops(objective, seq_len, batch_size, c) for c in CONVENTIONS}
    stages = [stage for stage, _ in per_convention[convention]]
    stage_flops = tuple(
        {c: per_convention[c][i][1] for c in CONVENTIONS} for i in range(len(stages))
    )
    priced = [(s.fraction, f[convention]) for s, f in zip(stages, stage_flops, strict=True)]
    if objective.stage_split() == "steps":  # n_i = fraction_i * N with sum n_i f_i = budget
        total = budget_flops / sum(share * flops for share, flops in priced)
        exact = [share * total for share, _ in priced]
    else:  # n_i f_i = fraction_i * budget
        exact = [budget_flops * share / flops for share, flops in priced]
    if sum(exact) > MAX_RUN_STEPS:
        raise SpecError(
            f"a budget of {budget_flops:.3g} FLOPs is {sum(exact):.3g} steps of "
            f"{objective.name}, past the {MAX_RUN_STEPS:,} a run may plan (over 500 times the "
            "paper's longest run): lower budget.flops or budget.steps"
        )
    stage_steps = tuple(max(1, round(n)) for n in exact)
    plan = RunPlan(stage_steps, stage_flops, ())
    end = plan.flops_at(plan.total_steps)[convention]
    checkpoints = [
        (fraction, nearest_step(plan, fraction * end, convention))
        for fraction in sorted(set(fractions))
    ]
    return RunPlan(stage_steps, stage_flops, tuple(checkpoints))


def nearest_step(plan: RunPlan, target: float, convention: Convention) -> int:
    """The first step (from 1) whose cumulative FLOPs are nearest ``target``, by bisection:
    the FLOPs only grow with the steps, so nothing is listed per step."""

    def spent(step: int) -> float:
        return plan.flops_at(step)[convention]

    low, high = 1, plan.total_steps  # the first step that reaches the target
    while low < high:
        middle = (low + high) // 2
        if spent(middle) >= target:
            high = middle
        else:
            low = middle + 1
    if low > 1 and abs(spent(low - 1) - target) <= abs(spent(low) - target):
        return low - 1
    return low


def budget_rounding(plan: RunPlan, budget_flops: float, convention: Convention) -> str | None:
    """One line when whole steps move the budget by more than ``ROUNDING_NOTED`` (a budget
    below one step becomes one step), else None."""
    planned = plan.flops_at(plan.total_steps)[convention]
    if abs(planned - budget_flops) <= ROUNDING_NOTED * budget_flops:
        return None
    one = plan.flops_at(1)[convention]
    steps = "+".join(str(s) for s in plan.stage_steps)
    word = "step" if plan.total_steps == 1 else "steps"
    return (
        f"budget {budget_flops:.3g} FLOPs is {budget_flops / one:.3g} of one step "
        f"({one:.3g} FLOPs): rounded to {steps} {word} ({planned:.3g} FLOPs, "
        f"{planned / budget_flops:.3g} times the budget)"
    )
