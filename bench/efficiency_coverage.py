"""How often the compute multiplier's and the crossover's intervals
(``electra_ablate.analysis.efficiency``) cover the truth, on simulated studies.

Each simulated study has two arms evaluated at the same budgets (four doublings, as the
committed studies keep checkpoints at 1/8, 1/4, 1/2 and all of the budget). An arm's per-task
value at budget x is ``curve(x) + pre-training seed effect + fine-tuning seed effect + task
noise``: the pre-training seed's effect is one level for the whole curve (one run, kept at
every budget), the fine-tuning seed's is drawn afresh at each budget, and the two arms' seed
effects are correlated by ``rho`` (they share seeds). Two plants:

- **multiplier**: B's curve is A's shifted by 4× in FLOPs, so at A's first two budgets B needs
  exactly 4× A's compute (within B's measured range);
- **crossover**: A − B grows by ``SLOPE`` per doubling and is 0 at 0.35 of the budget.

Printed per design (pre-training × fine-tuning seeds): the share of studies whose 95% interval
(open ends included, as the report reads them) covers the truth, the share that resolve it (the
interval closed on both sides), and the median ratio of the interval's ends. With one
pre-training seed the interval is about the models pre-trained (their seed effects held), so
the truth it should cover is that conditional one; both are shown.

    python bench/efficiency_coverage.py [--studies 300] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from electra_ablate.analysis import efficiency, stats

TOTAL = 3.2e14
FRACTIONS = (0.125, 0.25, 0.5, 1.0)
BUDGETS = tuple(f * TOTAL for f in FRACTIONS)
TASKS = 5
SLOPE = 2.0  # score points per doubling of pre-training FLOPs
SIGMA_PRETRAIN = 0.7
SIGMA_FINETUNE = 0.5
SIGMA_TASK = 2.0
RHO = 0.5
PLANTED = 4.0
CROSSING = 0.35 * TOTAL


def curve(x: np.ndarray) -> np.ndarray:
    return 40 + SLOPE * np.log2(x / 1e13)


def arm_curve(label, means, alpha, rng, n_finetune, shared_f) -> efficiency.Curve:
    """An arm's curve: ``means[k]`` at budget k, its pre-training effects ``alpha[P]``, and
    fine-tuning effects drawn at each budget (correlated with the other arm's by ``RHO``)."""
    grids = []
    for k, mean in enumerate(means):
        own_f = rng.normal(0, SIGMA_FINETUNE, (len(alpha), n_finetune))
        beta = math.sqrt(RHO) * shared_f[k] + math.sqrt(1 - RHO) * own_f
        noise = rng.normal(0, SIGMA_TASK, (len(alpha), n_finetune, TASKS))
        values = mean + alpha[:, None, None] + beta[:, :, None] + noise
        grids.append(
            stats.ArmGrid(
                label,
                tuple(range(len(alpha))),
                tuple(range(n_finetune)),
                tuple("abcde"),
                values,
            )
        )
    return efficiency.Curve(label, BUDGETS, tuple(grids))


def simulate(rng, n_pretrain, n_finetune, plant):
    """Two curves and the seed effects that make the conditional truth."""
    shared_p = rng.normal(0, SIGMA_PRETRAIN, n_pretrain)
    shared_f = rng.normal(0, SIGMA_FINETUNE, (len(BUDGETS), n_pretrain, n_finetune))
    x = np.array(BUDGETS)
    if plant == "multiplier":
        means = {"A": curve(x), "B": curve(x / PLANTED)}
    else:
        gap = SLOPE * np.log2(x / CROSSING)
        means = {"A": curve(x) + gap / 2, "B": curve(x) - gap / 2}
    curves, levels = {}, {}
    for label in ("A", "B"):
        own_p = rng.normal(0, SIGMA_PRETRAIN, n_pretrain)
        alpha = math.sqrt(RHO) * shared_p + math.sqrt(1 - RHO) * own_p
        curves[label] = arm_curve(label, means[label], alpha, rng, n_finetune, shared_f)
        levels[label] = float(alpha.mean())
    return curves, levels


def covers(low: float, high: float, truth: float) -> bool:
    return low <= truth <= high


def run(design, plant, studies, resamples, seed):
    rng = np.random.default_rng(seed)
    n_p, n_f = design
    hits = cond_hits = closed = 0
    ratios, total = [], 0
    for i in range(studies):
        curves, levels = simulate(rng, n_p, n_f, plant)
        shift = levels["A"] - levels["B"]  # a level the one-seed interval holds fixed
        if plant == "multiplier":
            found = efficiency.multipliers(curves["A"], curves["B"], resamples=resamples, seed=i)[
                :2
            ]  # 4× the first two budgets lies within B's range
            for m in found:
                total += 1
                hits += covers(m.ci_low, m.ci_high, PLANTED)
                cond_hits += covers(m.ci_low, m.ci_high, PLANTED * 2 ** (shift / SLOPE))
                if m.ci_low > 0 and m.ci_high < math.inf:
                    closed += 1
                    ratios.append(m.ci_high / m.ci_low)
        else:
            c = efficiency.crossover(curves["A"], curves["B"], resamples=resamples, seed=i)
            total += 1
            low, high = (c.ci_low, c.ci_high) if c.crossings else (math.nan, math.nan)
            # no sign change: the interval is the statement "none in range", which misses
            hits += covers(low, high, CROSSING)
            # with the arms' levels held, A − B = SLOPE · log2(x / CROSSING) + shift
            cond_hits += covers(low, high, CROSSING * 2 ** (-shift / SLOPE))
            if c.crossings and low > 0 and high < math.inf:
                closed += 1
                ratios.append(high / low)
    return {
        "coverage": hits / total,
        "conditional": cond_hits / total,
        "closed": closed / total,
        "ratio": float(np.median(ratios)) if ratios else math.nan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=300)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    print(
        "| plant | design | coverage | (1 seed: its models) | closed both sides | median high/low |"
    )
    print("|---|---|---|---|---|---|")
    for plant in ("multiplier", "crossover"):
        for design in ((1, 3), (1, 5), (3, 3), (5, 5)):
            r = run(design, plant, args.studies, args.resamples, args.seed)
            conditional = f"{r['conditional']:.3f}" if design[0] == 1 else "—"
            print(
                f"| {plant} | {design[0]} × {design[1]} | {r['coverage']:.3f} | {conditional} "
                f"| {r['closed']:.3f} | {r['ratio']:.2f} |",
                flush=True,
            )
    print(f"\n{args.studies} studies per row, {args.resamples} resamples, ", end="")
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
