"""How a FLOPs budget turns into steps: per stage, and where each checkpoint falls.

Every objective in a study gets the same pre-training FLOPs, so an objective that costs more
per step gets fewer steps. A staged objective splits the budget between its stages by FLOPs or
by steps (``Objective.stage_split``); checkpoints fall at fractions of the FLOPs spent.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from electra_ablate.pretraining.flops import CONVENTIONS, Convention, stage_step_flops
from electra_ablate.pretraining.objective import Objective


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
        stage_steps = tuple(max(1, round(share * total)) for share, _ in priced)
    else:  # n_i f_i = fraction_i * budget
        stage_steps = tuple(max(1, round(budget_flops * share / flops)) for share, flops in priced)
    plan = RunPlan(stage_steps, stage_flops, ())
    cumulative = [plan.flops_at(s)[convention] for s in range(plan.total_steps + 1)]
    checkpoints = []
    for fraction in sorted(set(fractions)):
        target = fraction * cumulative[-1]
        step = min(range(1, plan.total_steps + 1), key=lambda s: abs(cumulative[s] - target))
        checkpoints.append((fraction, step))
    return RunPlan(stage_steps, stage_flops, tuple(checkpoints))
