"""How often the intervals of ``electra_ablate.analysis.stats`` cover the truth, on simulated
studies.

Each simulated study has two arms, A and B, whose per-task values follow a hierarchical model
with a known difference: value = task mean + Δ·[arm A] + pre-training seed effect + fine-tuning
seed effect + task noise, the seed effects of the two arms correlated by ``rho`` (they share
seeds). Printed per design (pre-training × fine-tuning seeds), aggregation and interval: the
share of studies whose 95% CI of an arm's score covers its true score, whose CI of A − B covers
Δ, and the mean half-width. With one pre-training seed the truth a CI can cover is that seed's
model (its effect included): both that and the population value are shown.

    python bench/stats_coverage.py [--studies 400] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from electra_ablate.analysis import stats

TASKS = 5
TASK_MEANS = np.linspace(0.0, 60.0, TASKS)
SIGMA_PRETRAIN = 0.7  # the generator-size study: seeds 0, 1, 2 at 34.1, 35.5, 35.1 GLUE-5
SIGMA_FINETUNE = 0.5
SIGMA_TASK = 2.0
RHO = 0.5
DELTA = 1.0


def simulate(rng, n_pretrain, n_finetune, delta=DELTA, rho=RHO, sigmas=None):
    """Two arms' ``[P, F, T]`` grids and their seed effects (for the conditional truth)."""
    sp, sf, st = sigmas or (SIGMA_PRETRAIN, SIGMA_FINETUNE, SIGMA_TASK)
    shared_p = rng.normal(0, sp, n_pretrain)
    shared_f = rng.normal(0, sf, (n_pretrain, n_finetune))
    grids, effects = [], []
    for shift in (delta, 0.0):
        own_p = rng.normal(0, sp, n_pretrain)
        own_f = rng.normal(0, sf, (n_pretrain, n_finetune))
        alpha = np.sqrt(rho) * shared_p + np.sqrt(1 - rho) * own_p
        beta = np.sqrt(rho) * shared_f + np.sqrt(1 - rho) * own_f
        noise = rng.normal(0, st, (n_pretrain, n_finetune, TASKS))
        grids.append(TASK_MEANS + shift + alpha[:, None, None] + beta[:, :, None] + noise)
        effects.append(alpha[0])
    return grids, effects


def grid(label, values):
    p, f, _ = values.shape
    return stats.ArmGrid(label, tuple(range(p)), tuple(range(f)), tuple("abcde"), values)


def run(design, aggregation, interval, nested, studies, resamples, seed):
    rng = np.random.default_rng(seed)
    n_p, n_f = design
    base = float(TASK_MEANS.mean())
    hits = {"score": 0, "score_cond": 0, "diff": 0, "diff_cond": 0}
    half_score = half_diff = 0.0
    options = dict(resamples=resamples, interval=interval, nested=nested)
    for i in range(studies):
        (va, vb), (ea, eb) = simulate(rng, n_p, n_f)
        a, b = grid("A", va), grid("B", vb)
        s = stats.score(a, aggregation, seed=i, **options)
        d = stats.difference(a, b, aggregation, seed=i, **options)
        truth_a, truth_d = base + DELTA, DELTA
        hits["score"] += s.ci_low <= truth_a <= s.ci_high
        hits["score_cond"] += s.ci_low <= truth_a + ea <= s.ci_high
        hits["diff"] += d.ci_low <= truth_d <= d.ci_high
        hits["diff_cond"] += d.ci_low <= truth_d + ea - eb <= d.ci_high
        half_score += (s.ci_high - s.ci_low) / 2 / studies
        half_diff += (d.ci_high - d.ci_low) / 2 / studies
    share = {k: v / studies for k, v in hits.items()}
    return share, half_score, half_diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        f"sigma pretrain {SIGMA_PRETRAIN}, finetune {SIGMA_FINETUNE}, task {SIGMA_TASK}, "
        f"rho {RHO}, delta {DELTA}; {args.studies} studies × {args.resamples} resamples"
    )
    print(
        "| design | aggregation | interval | score cov. | (1 seed: its model) | diff cov. "
        "| (1 seed: its models) | half-width score | half-width diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    aggregations = {
        "median of model means": stats.MEDIAN_OF_MODEL_MEANS,
        "mean of model means": stats.MEAN_OF_MODEL_MEANS,
        "mean of task medians": stats.MEAN_OF_TASK_MEDIANS,
    }
    methods = [("t", False), ("percentile", False), ("t", True)]
    start = time.perf_counter()
    for design in [(1, 3), (3, 3), (5, 5), (10, 5)]:
        for name, aggregation in aggregations.items():
            for interval, nested in methods:
                if nested and design[0] == 1:
                    continue  # identical to the default with one pre-training seed
                share, hs, hd = run(
                    design, aggregation, interval, nested, args.studies, args.resamples, args.seed
                )
                label = interval + (", nested" if nested else "")
                one = design[0] == 1  # only then is "that seed's model" a fixed target
                score_cond = f"{share['score_cond']:.3f}" if one else "—"
                diff_cond = f"{share['diff_cond']:.3f}" if one else "—"
                print(
                    f"| {design[0]} × {design[1]} | {name} | {label} | {share['score']:.3f} | "
                    f"{score_cond} | {share['diff']:.3f} | {diff_cond} | {hs:.2f} | {hd:.2f} |",
                    flush=True,
                )
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
