"""The report's sections for one task family (GLUE, or any registered family): the ranking at the
final budget against the seed spread and the no-pre-training baseline, both ways of aggregating
the family's score, every checkpoint, every task. What a family is called, which of its tasks
its score leaves out and what published numbers sit beside it come from the family and from
the results table; nothing here names one."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import polars as pl

from electra_ablate.evaluation.task import TaskFamily
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
from electra_ablate.results import ordered_tasks, ranking, task_order_key
from electra_ablate.study.units import BASELINE_OBJECTIVE


def ordering(family: TaskFamily, ranked: pl.DataFrame, final: float) -> str:
    """The measured ranking and, per adjacent pair, whether seeds alone could explain the gap."""
    rows = list(ranked.iter_rows(named=True))
    if not rows:
        return f"No label has a complete {family.aggregate} at {fraction(final)} of the budget."
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
    heading = (
        f"**Measured ordering** (median {family.aggregate} at {fraction(final)} of the budget)"
    )
    return "\n".join([f"{heading}: {names}.", *gaps])


def baseline_comparison(ranked: pl.DataFrame, baseline: dict | None) -> str:
    """Each objective against the no-pre-training baseline: above it by more than the larger
    of the two min–max spreads, or not."""
    if baseline is None:
        return "No no-pre-training baseline was evaluated (`baseline: false`)."
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


def published_ordering(family: TaskFamily, objectives: set[str]) -> str:
    scores, names = family.published, family.published_names
    order = list(scores)
    text = f"{names[order[0]]} {scores[order[0]]:.1f}"
    for above, below in pairwise(order):
        sign = "=" if scores[above] == scores[below] else ">"
        text += f" {sign} {names[below]} {scores[below]:.1f}"
    present = ", ".join(f"`{o}`" for o in order if o in objectives)
    return f"**{family.published_label} ordering**: {text}. In this study: {present}."


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


def left_out(tasks: pl.DataFrame) -> list[str]:
    """The family's tasks whose headline metric its score leaves out (GLUE: WNLI)."""
    headline = tasks.filter(pl.col("headline"))
    return ordered_tasks(headline.filter(~pl.col("in_aggregate"))["task"].to_list())


def task_header(family: TaskFamily, tasks: pl.DataFrame, names: Sequence[str]) -> list[str]:
    headline = tasks.filter(pl.col("headline"))
    excluded = set(left_out(tasks)) if family.aggregate else set()
    out = []
    for task in names:
        metric = lookup(headline, task=task)["metric"]
        note = f", not in {family.title}" if task in excluded else ""
        out.append(f"{task} ({metric}{note})")
    return out


def final_section(
    family: TaskFamily,
    results: pl.DataFrame,
    scores: pl.DataFrame,
    paper_scores: pl.DataFrame,
    tasks: pl.DataFrame,
    labels: Sequence[str],
    final: float,
) -> str:
    """One family's results at the final budget; ``results``, ``scores``, ``paper_scores`` and
    ``tasks`` hold that family's rows only. A family without an aggregate gets its task table."""
    if family.aggregate is None:
        return task_section(family, tasks, labels, final)
    objective_of = dict(results.select("label", "objective").unique().iter_rows())
    budgets = results.group_by("label").agg(pl.col("checkpoint_fraction").max())
    unpretrained = set(budgets.filter(pl.col("checkpoint_fraction") == 0)["label"].to_list())
    pretrained = scores.filter(pl.col("objective") != BASELINE_OBJECTIVE)
    baselines = scores.filter(pl.col("objective") == BASELINE_OBJECTIVE)
    baseline = baselines.row(0, named=True) if baselines.height == 1 else None
    ranked = ranking(pretrained, final)
    names = task_columns(tasks)
    headline = tasks.filter(pl.col("headline"))
    rows = []
    for label in labels:
        if label not in objective_of:
            continue
        objective = objective_of[label]
        is_baseline = label in unpretrained  # no pre-training, or a reference scorer
        at = 0.0 if is_baseline else final
        placed = lookup(ranked, label=label)
        paper_row = lookup(paper_scores, label=label, checkpoint_fraction=at)
        vs = NO_VALUE
        if baseline is not None and not is_baseline and placed is not None:
            vs = f"{placed['median'] - baseline['median']:+.1f}"
        published = family.published.get(objective)
        rows.append(
            [
                str(placed["rank"]) if placed else NO_VALUE,
                label,
                f"`{objective}`",
                score(lookup(scores, label=label, checkpoint_fraction=at)),
                f"{paper_row['score_paper']:.1f}" if paper_row else NO_VALUE,
                vs,
                *[
                    score(lookup(headline, label=label, task=t, checkpoint_fraction=at))
                    for t in names
                ],
                *(
                    [f"{published:.1f}" if published is not None else ""]
                    if family.published
                    else []
                ),
            ]
        )
    n_models = results.select("pretrain_seed", "finetune_seed").unique().height
    title, out = family.title, left_out(tasks)
    excluded = f" ({', '.join(out)} left out)" if out else ""
    parts = [
        f"## {title}: results at the final budget ({fraction(final)})",
        ordering(family, ranked, final),
        baseline_comparison(ranked, baseline),
        table(
            [
                "Rank",
                "Label",
                "Objective",
                f"{title} per model",
                f"{title} (paper)",
                "vs none",
                *task_header(family, tasks, names),
                *([family.published_label] if family.published else []),
            ],
            rows,
        ),
        f"*{title} per model*: the mean over tasks of each task's headline metric{excluded}, "
        f"computed per evaluated model; median (min–max) over the {n_models} (pre-training "
        f"seed, evaluation seed) pairs. *{title} (paper)*: the paper's aggregation, each task's "
        f"median over seeds, then the mean over tasks. *vs none*: median {title} per model minus "
        f"the no-pre-training baseline's. {family.published_note}".strip(),
    ]
    if any(o in family.published for o in objective_of.values()):
        parts.append(published_ordering(family, set(objective_of.values())))
    gap = convention_gap(results, final)
    if gap:
        parts.append(gap)
    parts.append(figure(f"{family.aggregate} vs pre-training FLOPs", f"{family.name}_vs_flops"))
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


def task_section(
    family: TaskFamily, tasks: pl.DataFrame, labels: Sequence[str], final: float
) -> str:
    """A family with no aggregate: each task's headline metric per label at the final budget
    (the baseline at its own budget, 0)."""
    names = task_columns(tasks)
    headline = tasks.filter(pl.col("headline"))
    present = [label for label in labels if label in set(headline["label"].to_list())]
    rows = []
    for label in present:
        at = final if lookup(headline, label=label, checkpoint_fraction=final) else 0.0
        rows.append(
            [
                label,
                *[
                    score(lookup(headline, label=label, task=t, checkpoint_fraction=at))
                    for t in names
                ],
            ]
        )
    return "\n\n".join(
        [
            f"## {family.title}: results at the final budget ({fraction(final)})",
            table(["Label", *task_header(family, tasks, names)], rows),
            figure(f"{family.title} tasks vs pre-training FLOPs", f"{family.name}_tasks_vs_flops"),
        ]
    )


def checkpoint_section(
    family: TaskFamily,
    scores: pl.DataFrame,
    paper_scores: pl.DataFrame,
    tasks: pl.DataFrame,
    labels: Sequence[str],
) -> str:
    if family.aggregate is None:
        return ""
    pretrained = scores.filter(pl.col("checkpoint_fraction") > 0)  # baseline, references: at 0
    fractions = sorted(set(pretrained["checkpoint_fraction"].to_list()))
    present = [label for label in labels if label in set(pretrained["label"].to_list())]
    rows = []
    for label in present:
        cells = []
        for f in fractions:
            row, p = (
                lookup(scores, label=label, checkpoint_fraction=f),
                lookup(paper_scores, label=label, checkpoint_fraction=f),
            )
            cells.append(f"{score(row)}; {p['score_paper']:.1f}" if row and p else score(row))
        rows.append([label, *cells])
    title = family.title
    parts = [
        f"## {family.aggregate} at every checkpoint",
        f"{title} per model median (min–max); {title} (paper aggregation) after the semicolon.",
        table(["Label", *[fraction(f) for f in fractions]], rows),
        f"## {title}: per-task scores",
        figure("Per-task headline metric vs pre-training FLOPs", f"{family.name}_tasks_vs_flops"),
    ]
    names = task_columns(tasks)
    headline = tasks.filter(pl.col("headline") & (pl.col("checkpoint_fraction") > 0))
    for f in fractions[:-1]:
        at = headline.filter(pl.col("checkpoint_fraction") == f)
        parts += [
            f"### {fraction(f)} of the budget ({flops_range(at['flops_paper'])} FLOPs, paper "
            "convention)",
            table(
                ["Label", *task_header(family, tasks, names)],
                score_rows(at, present, [{"task": t} for t in names]),
            ),
        ]
    return "\n\n".join(parts)
