"""The report's GLUE sections: the ranking at the final budget against the seed spread and the
no-pre-training baseline, both ways of aggregating GLUE, every checkpoint, every task."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import polars as pl

from electra_ablate import paper
from electra_ablate.report.markdown import (
    NO_VALUE,
    figure,
    flops_range,
    fraction,
    lookup,
    sci,
    score,
    score_rows,
    table,
)
from electra_ablate.results import EXCLUDED_FROM_GLUE, ordered_tasks, ranking, task_order_key
from electra_ablate.study.units import BASELINE_OBJECTIVE


def ordering(ranked: pl.DataFrame, final: float) -> str:
    """The measured ranking and, per adjacent pair, whether seeds alone could explain the gap."""
    rows = list(ranked.iter_rows(named=True))
    if not rows:
        return f"No label has a complete GLUE score at {fraction(final)} of the budget."
    names = f"{rows[0]['label']} {rows[0]['median']:.1f}"
    gaps = []
    for upper, lower in pairwise(rows):
        sign = ">" if upper["gap_to_next"] > 0 else "="
        names += f" {sign} {lower['label']} {lower['median']:.1f}"
        verdict = "gap > spread" if upper["beyond_spread"] else "within spread"
        gaps.append(
            f"- {upper['label']} − {lower['label']}: gap {upper['gap_to_next']:.2f}, "
            f"larger min–max spread {upper['spread_with_next']:.2f} → {verdict}"
        )
    heading = f"**Measured ordering** (median GLUE score at {fraction(final)} of the budget)"
    return "\n".join([f"{heading}: {names}.", *gaps])


def baseline_comparison(ranked: pl.DataFrame, baseline: dict | None) -> str:
    """Each objective against the no-pre-training baseline: above it by more than the larger
    of the two min–max spreads, or not."""
    if baseline is None:
        return "No no-pre-training baseline was fine-tuned (`finetune.baseline: false`)."
    above, within, below = [], [], []
    base_spread = baseline["max"] - baseline["min"]
    for row in ranked.iter_rows(named=True):
        gap = row["median"] - baseline["median"]
        spread = max(base_spread, row["max"] - row["min"])
        text = f"{row['label']} ({gap:+.1f}, spread {spread:.1f})"
        (above if gap > spread else below if gap < -spread else within).append(text)
    parts = [f"**No pre-training**: {score(baseline)}."]
    if above:
        parts.append(f"Above it by more than the larger min–max spread: {', '.join(above)}.")
    if within:
        parts.append(f"Within the spread of it: {', '.join(within)}.")
    if below:
        parts.append(f"Below it by more than the spread: {', '.join(below)}.")
    return " ".join(parts)


def paper_ordering(objectives: set[str]) -> str:
    glue, names = paper.TABLE5_GLUE, paper.TABLE5_NAMES
    order = list(glue)
    text = f"{names[order[0]]} {glue[order[0]]:.1f}"
    for above, below in pairwise(order):
        sign = "=" if glue[above] == glue[below] else ">"
        text += f" {sign} {names[below]} {glue[below]:.1f}"
    present = ", ".join(f"`{o}`" for o in order if o in objectives)
    return (
        f"**Paper ordering** (Table 5, base size, full pre-training): {text}. "
        f"In this study: {present}."
    )


def convention_gap(results: pl.DataFrame, final: float) -> str:
    """How far apart equal paper-convention budgets are in the standard convention: the paper
    counts backward = forward and prices every objective's extra heads its own way."""
    at = (
        results.filter(
            (pl.col("checkpoint_fraction") == final) & (pl.col("objective") != BASELINE_OBJECTIVE)
        )
        .group_by("label")
        .agg(pl.col("flops_paper").mean(), pl.col("flops_standard").mean())
        .sort("flops_standard")
    )
    if at.height < 2:
        return ""
    low, high = at.row(0, named=True), at.row(-1, named=True)
    more = 100 * (high["flops_standard"] / low["flops_standard"] - 1)
    return (
        f"**FLOPs in the other convention.** At equal paper-convention FLOPs "
        f"({flops_range(at['flops_paper'])}), the standard convention (backward = 2× forward, "
        f"sparse embedding lookups) counts {sci(low['flops_standard'])} for {low['label']} up to "
        f"{sci(high['flops_standard'])} for {high['label']}: {high['label']} got {more:.0f}% more "
        f"standard-convention FLOPs than {low['label']}."
    )


def task_columns(tasks: pl.DataFrame) -> list[str]:
    return ordered_tasks(tasks.filter(pl.col("headline"))["task"].to_list())


def task_header(tasks: pl.DataFrame, names: Sequence[str]) -> list[str]:
    headline = tasks.filter(pl.col("headline"))
    out = []
    for task in names:
        metric = lookup(headline, task=task)["metric"]
        excluded = ", not in GLUE" if task in EXCLUDED_FROM_GLUE else ""
        out.append(f"{task} ({metric}{excluded})")
    return out


def final_section(
    results: pl.DataFrame,
    glue: pl.DataFrame,
    paper_glue: pl.DataFrame,
    tasks: pl.DataFrame,
    labels: Sequence[str],
    final: float,
) -> str:
    objective_of = dict(results.select("label", "objective").unique().iter_rows())
    pretrained = glue.filter(pl.col("objective") != BASELINE_OBJECTIVE)
    baselines = glue.filter(pl.col("objective") == BASELINE_OBJECTIVE)
    baseline = baselines.row(0, named=True) if baselines.height == 1 else None
    ranked = ranking(pretrained, final)
    names = task_columns(tasks)
    headline = tasks.filter(pl.col("headline"))
    rows = []
    for label in labels:
        if label not in objective_of:
            continue
        objective = objective_of[label]
        is_baseline = objective == BASELINE_OBJECTIVE
        at = 0.0 if is_baseline else final
        placed = lookup(ranked, label=label)
        paper_row = lookup(paper_glue, label=label, checkpoint_fraction=at)
        vs = NO_VALUE
        if baseline is not None and not is_baseline and placed is not None:
            vs = f"{placed['median'] - baseline['median']:+.1f}"
        paper_glue_value = paper.TABLE5_GLUE.get(objective)
        rows.append(
            [
                str(placed["rank"]) if placed else NO_VALUE,
                label,
                f"`{objective}`",
                score(lookup(glue, label=label, checkpoint_fraction=at)),
                f"{paper_row['glue_paper']:.1f}" if paper_row else NO_VALUE,
                vs,
                *[
                    score(lookup(headline, label=label, task=t, checkpoint_fraction=at))
                    for t in names
                ],
                f"{paper_glue_value:.1f}" if paper_glue_value is not None else "",
            ]
        )
    n_models = results.select("pretrain_seed", "finetune_seed").unique().height
    parts = [
        f"## Results at the final budget ({fraction(final)})",
        ordering(ranked, final),
        baseline_comparison(ranked, baseline),
        table(
            [
                "Rank",
                "Label",
                "Objective",
                "GLUE per model",
                "GLUE (paper)",
                "vs none",
                *task_header(tasks, names),
                "Paper Table 5",
            ],
            rows,
        ),
        "*GLUE per model*: the mean over tasks of each task's headline metric (WNLI excluded), "
        f"computed per fine-tuned model; median (min–max) over the {n_models} (pre-training "
        "seed, fine-tuning seed) pairs. *GLUE (paper)*: the paper's aggregation, each task's "
        "median over seeds, then the mean over tasks. *vs none*: median GLUE per model minus the "
        "no-pre-training baseline's. The paper's numbers come from base-size models pre-trained "
        "to convergence: compare the ordering, not the absolute values.",
    ]
    if any(o in paper.TABLE5_GLUE for o in objective_of.values()):
        parts.append(paper_ordering(set(objective_of.values())))
    gap = convention_gap(results, final)
    if gap:
        parts.append(gap)
    parts.append(figure("GLUE score vs pre-training FLOPs", "glue_vs_flops"))
    others = tasks.filter(~pl.col("headline") & (pl.col("checkpoint_fraction") == final))
    if others.height:
        pairs = others.select("task", "metric").unique().iter_rows()
        columns = sorted(pairs, key=lambda tm: (task_order_key(tm[0]), tm[1]))
        cells = [{"task": t, "metric": m} for t, m in columns]
        present = [label for label in labels if label in set(others["label"])]
        parts += [
            "Other metrics at the final budget:",
            table(
                ["Label", *[f"{t} ({m})" for t, m in columns]], score_rows(others, present, cells)
            ),
        ]
    return "\n\n".join(parts)


def checkpoint_section(
    glue: pl.DataFrame, paper_glue: pl.DataFrame, tasks: pl.DataFrame, labels: Sequence[str]
) -> str:
    pretrained = glue.filter(pl.col("objective") != BASELINE_OBJECTIVE)
    fractions = sorted(set(pretrained["checkpoint_fraction"].to_list()))
    present = [label for label in labels if label in set(pretrained["label"].to_list())]
    rows = []
    for label in present:
        cells = []
        for f in fractions:
            row, p = (
                lookup(glue, label=label, checkpoint_fraction=f),
                lookup(paper_glue, label=label, checkpoint_fraction=f),
            )
            cells.append(f"{score(row)}; {p['glue_paper']:.1f}" if row and p else score(row))
        rows.append([label, *cells])
    parts = [
        "## GLUE score at every checkpoint",
        "GLUE per model median (min–max); GLUE (paper aggregation) after the semicolon.",
        table(["Label", *[fraction(f) for f in fractions]], rows),
        "## Per-task scores",
        figure("Per-task headline metric vs pre-training FLOPs", "glue_tasks_vs_flops"),
    ]
    names = task_columns(tasks)
    headline = tasks.filter(pl.col("headline") & (pl.col("objective") != BASELINE_OBJECTIVE))
    for f in fractions[:-1]:
        at = headline.filter(pl.col("checkpoint_fraction") == f)
        parts += [
            f"### {fraction(f)} of the budget ({flops_range(at['flops_paper'])} FLOPs, paper "
            "convention)",
            table(
                ["Label", *task_header(tasks, names)],
                score_rows(at, present, [{"task": t} for t in names]),
            ),
        ]
    return "\n\n".join(parts)
