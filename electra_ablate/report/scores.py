"""The report's sections for one task family (GLUE, or any registered family): the ranking at the
final budget with confidence intervals, against the no-pre-training baseline, both ways of
aggregating the family's score, every checkpoint, every task. What a family is called, which of
its tasks its score leaves out and what published numbers sit beside it come from the family and
from the results table; nothing here names one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

import electra_ablate.report.verdicts as verdicts
from electra_ablate.analysis.results import (
    at_checkpoint,
    checkpoint_values,
    common_tasks,
    constant_aggregates,
    constant_tasks,
    evaluated_only_at_start,
    family_scores,
    finetuned_tasks,
    ordered_tasks,
    ranking,
    score_rows_only,
    task_order_key,
)
from electra_ablate.evaluation.task import MAJORITY_BASELINE, MAJORITY_SHARE, TaskFamily
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
from electra_ablate.study.units import BASELINE_OBJECTIVE


def published_ordering(
    family: TaskFamily, objectives: set[str], comparison: verdicts.Comparison, objective_of
) -> str:
    """The published ranking, then this study's scores listed in that same (published) order,
    so neither reads as the other."""
    scores, names = family.published, family.published_names
    order = list(scores)
    text = verdicts.ranked_text([(f"{names[o]} {scores[o]:.1f}", scores[o]) for o in order])
    ours = []
    for objective in order:
        for label in comparison.scores:
            if objective_of.get(label) == objective:
                ours.append(f"{label} {comparison.score_text(label)}")
    listed = "; ".join(ours) if ours else "none of its objectives"
    return (
        f"**{family.published_label} ordering**: {text}. This study's scores, listed in the "
        f"paper's order (not ranked): {listed}."
    )


def not_comparable_note(family: TaskFamily) -> str:
    """In place of the published column in a plumbing check's report: why it is not there."""
    return (
        f"*No {family.published_label} column*: this study describes itself as a plumbing "
        "check (its spec's description says so), so its numbers only show that every step ran; "
        f"they are not comparable with published {family.title} scores."
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
        .sort("flops_standard", "label")  # ties broken by name: the same report every time
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


def task_header(
    family: TaskFamily,
    tasks: pl.DataFrame,
    names: Sequence[str],
    constant: dict[str, float] | None = None,
    at: float | None = None,
) -> list[str]:
    """Each task column's heading: its headline metric, whether the family's score leaves it
    out, and whether every model gives it one value (``constant_tasks``) at checkpoint ``at``
    (a fraction of the budget): named, since an earlier checkpoint may differ (issue 69)."""
    headline = tasks.filter(pl.col("headline"))
    excluded = set(left_out(tasks)) if family.aggregate else set()
    constant = constant or {}
    out = []
    for task in names:
        metric = lookup(headline, task=task)["metric"]
        note = f", not in {family.title}" if task in excluded else ""
        if task in constant:
            where = f" at {fraction(at)}" if at is not None else ""
            note += f"; every model {constant[task]:.1f}{where}"
        out.append(f"{task} ({metric}{note})")
    return out


def constant_note(
    constant: dict[str, float], family: TaskFamily, tasks: pl.DataFrame, at: float
) -> str:
    """The sentence under a table with a task every model scores alike at checkpoint ``at``."""
    if not constant:
        return ""
    listed = ", ".join(f"{task} ({value:.1f})" for task, value in constant.items())
    entering = [t for t in constant if t not in left_out(tasks)] if family.aggregate else []
    enters = (
        f" {', '.join(entering)} still {'enters' if len(entering) == 1 else 'enter'} "
        f"{family.title} as measured."
        if entering
        else ""
    )
    return (
        f"*Every model gives one value at {fraction(at)} of the budget*, the no-pre-training "
        f"baseline included: {listed}. Such "
        "a task tells the objectives nothing here (typically every encoder predicts one class)."
        + enters
    )


def makeup_section(
    family: TaskFamily,
    tasks: pl.DataFrame,
    names: Sequence[str],
    labels: Sequence[str],
    final: float,
) -> str:
    """What each task's score is made of at ``final`` (the baseline at 0): per label, the share
    of dev predictions in the most frequent predicted class (median over fine-tunes, with the
    largest), and in each heading the majority-class baseline, the score of always predicting
    the dev set's majority class (``evaluation.task.PREDICTION_FACTS``). A task with no share
    (regression) or a fine-tune recorded before shares were kept shows ``NO_VALUE``."""
    at = at_checkpoint(tasks, final)
    shares = at.filter(pl.col("metric") == MAJORITY_SHARE)
    if shares.is_empty() and not finetuned_tasks(names):
        return ""  # probes and other tasks that fine-tune nothing predict no classes
    if shares.is_empty():
        return (
            f"*Majority shares*: {NO_VALUE} (these fine-tunes were recorded before the share of "
            "predictions in one class and the majority-class baseline were kept)."
        )
    baselines = at.filter(pl.col("metric") == MAJORITY_BASELINE)
    header = []
    for task in names:
        base = lookup(baselines, task=task)
        header.append(f"{task} (baseline {base['median']:.1f})" if base else task)
    present = [label for label in labels if label in set(at["label"].to_list())]
    rows = []
    for label in present:
        cells = []
        for task in names:
            share = lookup(shares, label=label, task=task)
            if share is None:
                cells.append(NO_VALUE)
            elif share["n"] == 1 or share["median"] == share["max"]:
                cells.append(f"{share['median']:.0f}%")
            else:
                cells.append(f"{share['median']:.0f}% (≤{share['max']:.0f}%)")
        rows.append([label, *cells])
    return "\n\n".join(
        [
            f"What each {family.title} score is made of: the share of dev predictions in the "
            "model's most frequent class (median over fine-tunes, the largest after ≤; 100% is "
            "a constant prediction), and in each heading the majority-class baseline, the score "
            f"of always predicting the dev set's majority class. {NO_VALUE}: a regression task, "
            "or a fine-tune recorded before shares were kept.",
            table(["Label", *header], rows),
        ]
    )


def constant_aggregate_note(family: TaskFamily, flagged: dict[str, list[str]]) -> str:
    """One line naming the labels whose aggregate is constant predictions
    (``results.constant_aggregates``), and what in it still varies."""
    if not flagged:
        return ""
    parts = []
    for label, varying in flagged.items():
        rest = f" (only {', '.join(varying)} varies)" if varying else ""
        parts.append(f"{label}{rest}")
    return (
        f"**Constant predictions**: the {family.aggregate} of {'; '.join(parts)} is made of "
        "constant predictions on every classification task it averages: each fine-tune put "
        "all its dev predictions in one class, so those tasks measure which class it landed "
        "on, not what the encoder learnt."
    )


def like_for_like_section(
    family: TaskFamily, results: pl.DataFrame, labels: Sequence[str], final: float
) -> str:
    """Where labels miss tasks at ``final``: the aggregate over the tasks every label has
    (``results.common_tasks``), labelled with its task list, since the family's own aggregate
    leaves out every label that misses one."""
    common = common_tasks(results, final)
    if common is None:
        return ""
    start = set(evaluated_only_at_start(results))
    scores = family_scores(results.filter(pl.col("task").is_in(common)))
    name = f"{family.title} over {', '.join(common)}"
    rows = []
    for label in labels:
        row = lookup(scores, label=label, checkpoint_fraction=0.0 if label in start else final)
        if row is not None:
            rows.append([label, score(row)])
    return "\n\n".join(
        [
            f"**Like for like**: not every label has every {family.title} task at "
            f"{fraction(final)} of the budget, so beside the {family.aggregate} (which leaves "
            f"out a label missing a task) here is the mean over the tasks every label has: "
            f"{name}.",
            table(["Label", f"{name}: per model median (min–max)"], rows),
        ]
    )


def baseline_label(scores: pl.DataFrame) -> str | None:
    """The label of a family's no-pre-training baseline (``scores``: that family's
    ``family_scores``); None unless there is exactly one."""
    baselines = scores.filter(pl.col("objective") == BASELINE_OBJECTIVE)
    return baselines.row(0, named=True)["label"] if baselines.height == 1 else None


def compared_labels(scores: pl.DataFrame, final: float) -> list[str]:
    """The labels a family's pairs table compares, in its order: the pre-trained ones best
    first at ``final`` (``results.ranking``), then the no-pre-training baseline. Reference
    scorers are left out (they stand beside the curves, not in the ranking)."""
    pretrained = scores.filter(pl.col("objective") != BASELINE_OBJECTIVE)
    baseline = baseline_label(scores)
    return [*ranking(pretrained, final)["label"].to_list(), *([baseline] if baseline else [])]


def final_section(
    family: TaskFamily,
    results: pl.DataFrame,
    scores: pl.DataFrame,
    paper_scores: pl.DataFrame,
    tasks: pl.DataFrame,
    labels: Sequence[str],
    final: float,
    plumbing: bool = False,
    departing: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """One family's results at the final budget; ``results``, ``scores``, ``paper_scores`` and
    ``tasks`` hold that family's rows only. A family without an aggregate gets its task table.

    ``departing``: labels set away from the paper's setting, with how
    (``paper.setting_departures``): no published number beside them, and one line says why.

    ``plumbing``: the study describes itself as a plumbing check (``header.plumbing_check``);
    its table then carries no published column and no published ordering, and a line says why
    (``not_comparable_note``)."""
    if family.aggregate is None:
        return task_section(family, tasks, labels, final)
    departing = departing or {}
    objective_of = dict(results.select("label", "objective").unique().iter_rows())
    unpretrained = set(evaluated_only_at_start(results))  # no pre-training, reference scorers
    baseline = baseline_label(scores)
    ranked = ranking(scores.filter(pl.col("objective") != BASELINE_OBJECTIVE), final)
    comparison = verdicts.compare(checkpoint_values(results, final))
    names = task_columns(tasks)
    headline = tasks.filter(pl.col("headline"))
    constant = constant_tasks(tasks, final)
    # with one model per label both aggregations are the same number: show it once
    both = not comparison.single_models
    show_published = bool(family.published) and not plumbing
    rows = []
    for label in labels:
        if label not in objective_of:
            continue
        objective = objective_of[label]
        at = 0.0 if label in unpretrained else final
        placed = lookup(ranked, label=label)
        paper_row = lookup(paper_scores, label=label, checkpoint_fraction=at)
        vs = NO_VALUE
        if baseline in comparison.scores and label not in unpretrained and placed is not None:
            d = comparison.difference(label, baseline)
            vs = comparison.difference_cell(d)
        own = comparison.scores.get(label) if placed is not None or at == 0.0 else None
        published = None if label in departing else family.published.get(objective)
        rows.append(
            [
                str(placed["rank"]) if placed else NO_VALUE,
                label,
                f"`{objective}`",
                verdicts.score_with_ci(own, mark=comparison.marks),
                *(
                    []
                    if comparison.single_models  # one model each: the note below says so once
                    else [verdicts.seeds(own.n_pretrain, own.n_finetune) if own else NO_VALUE]
                ),
                *([f"{paper_row['score_paper']:.1f}" if paper_row else NO_VALUE] if both else []),
                vs,
                *[
                    score(lookup(headline, label=label, task=t, checkpoint_fraction=at))
                    for t in names
                ],
                *([f"{published:.1f}" if published is not None else ""] if show_published else []),
            ]
        )
    title, out = family.title, left_out(tasks)
    excluded = f" ({', '.join(out)} left out)" if out else ""
    heading = (
        f"**Measured ordering** (median {family.aggregate} per model at {fraction(final)} of the "
        "budget"
    )
    ordered, _ = verdicts.ordering(ranked["label"].to_list(), comparison, heading)
    if not ordered:
        ordered = f"No label has a complete {family.aggregate} at {fraction(final)} of the budget."
    paper_column = (
        f"*{title} (paper)*: the paper's aggregation, each task's median over seeds, then the "
        "mean over tasks. "
        if both
        else f"With one model per label the paper's aggregation gives the same {title}. "
    )
    if comparison.single_models:  # said once, in the note below the table
        spread, difference_ci = "one model per label here.", ""
    else:
        spread = (
            "the median over models, with its 95% confidence interval from a hierarchical "
            "bootstrap over pre-training, then fine-tuning seeds."
        )
        difference_ci = ", with the CI of that difference"
    parts = [
        f"## {title}: results at the final budget ({fraction(final)})",
        ordered,
        verdicts.baseline_comparison(ranked["label"].to_list(), baseline, comparison),
        table(
            [
                "Rank",
                "Label",
                "Objective",
                f"{title} per model" + ("" if comparison.single_models else " [95% CI]"),
                *([] if comparison.single_models else ["Seeds (pre-training × fine-tuning)"]),
                *([f"{title} (paper)"] if both else []),
                "vs none" + ("" if comparison.single_models else " [95% CI]"),
                *task_header(family, tasks, names, constant, final),
                *([family.published_label] if show_published else []),
            ],
            rows,
        ),
        f"*{title} per model*: the mean over tasks of each task's headline metric{excluded}, "
        f"computed per evaluated model; {spread} {paper_column}*vs none*: median {title} per "
        f"model minus the no-pre-training baseline's{difference_ci}. Task columns: median "
        f"(min–max) over models. {'' if plumbing else family.published_note}".strip(),
    ]
    if family.published and not show_published:
        parts.append(not_comparable_note(family))
    elif show_published and (moved := departing_note(family, departing, objective_of)):
        parts.append(moved)
    for note in (
        makeup_section(family, tasks, names, labels, final),
        verdicts.NO_INTERVAL_NOTE if comparison.some_without_interval else "",
        constant_note(constant, family, tasks, final),
        constant_aggregate_note(family, constant_aggregates(tasks, final)),
        like_for_like_section(family, results, labels, final),
        verdicts.noise_note(comparison, ranked["label"].to_list()),
    ):
        if note:
            parts.append(note)
    pairs = verdicts.pairs_table(compared_labels(scores, final), comparison)
    if pairs.startswith("|"):
        parts += [
            f"Every pair's difference in median {title} per model, with its 95% CI (*paired*: "
            "the bootstrap draws the same seeds for both, as the design pairs them):",
            pairs,
        ]
    elif pairs:  # one line in place of a table of unresolved rows
        parts.append(pairs)
    if not plumbing and any(o in family.published for o in objective_of.values()):
        parts.append(
            published_ordering(family, set(objective_of.values()), comparison, objective_of)
        )
    gap = convention_gap(results, final)
    if gap:
        parts.append(gap)
    parts.append(figure(f"{family.aggregate} vs pre-training FLOPs", f"{family.name}_vs_flops"))
    at_final = score_rows_only(tasks).filter(pl.col("checkpoint_fraction") == final)
    others = at_final.filter(~pl.col("headline"))
    if others.height:
        pairs_ = others.select("task", "metric").unique().iter_rows()
        columns = sorted(pairs_, key=lambda tm: (task_order_key(tm[0]), tm[1]))
        cells = [{"task": t, "metric": m} for t, m in columns]
        present = [label for label in labels if label in set(others["label"])]
        parts += [
            "Other metrics at the final budget:",
            table(
                ["Label", *[f"{t} ({m})" for t, m in columns]], score_rows(others, present, cells)
            ),
        ]
    return "\n\n".join(parts)


def departing_note(
    family: TaskFamily, departing: Mapping[str, Sequence[str]], objective_of: Mapping[str, str]
) -> str:
    """One line naming the labels whose objective has a published number that the table leaves
    out because the label departs from the paper's setting (issue 69)."""
    named = [
        f"{label} ({'; '.join(departing[label])})"
        for label, objective in objective_of.items()
        if label in departing and objective in family.published
    ]
    if not named:
        return ""
    return (
        f"*No {family.published_label} value* beside {', '.join(named)}: the paper measured "
        "its objective at the paper's setting, not this one (the header's deviations list it)."
    )


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
    constant = constant_tasks(tasks, final)
    parts = [
        f"## {family.title}: results at the final budget ({fraction(final)})",
        table(["Label", *task_header(family, tasks, names, constant, final)], rows),
        constant_note(constant, family, tasks, final),
        figure(f"{family.title} tasks vs pre-training FLOPs", f"{family.name}_tasks_vs_flops"),
    ]
    return "\n\n".join(part for part in parts if part)


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
