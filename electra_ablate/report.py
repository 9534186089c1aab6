"""``report.md`` for a study output directory: what was run, what came out, next to the paper.

Everything in the report is derived from the files the study runner wrote (results, runs,
pre-training metrics, study.json), so the same directory always gives the same report. The
prose is limited to facts a reader can check against the tables: the measured ranking and
whether each gap in it is larger than the seed-to-seed spread.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import polars as pl

from electra_ablate import paper
from electra_ablate.errors import InputError
from electra_ablate.plots import (
    curve_metrics,
    format_flops,
    label_colors,
    plot_glue_vs_flops,
    plot_pretrain_curves,
    plot_task_scores,
)
from electra_ablate.results import (
    EXCLUDED_FROM_GLUE,
    final_fraction,
    glue_scores,
    labels_in_order,
    ordered_tasks,
    ranking,
    read_results,
    task_order_key,
    task_scores,
)
from electra_ablate.storage import atomic_write_text

REPORT_FILE = "report.md"
STUDY_FILE = "study.json"
RUNS_FILE = "runs.parquet"
PRETRAIN_METRICS_FILE = "pretrain_metrics.parquet"
NO_VALUE = "—"


def write_report(run_dir: Path, out_dir: Path | None = None, notes: Path | None = None) -> Path:
    """Write ``report.md`` and its figures into ``out_dir`` (default ``run_dir/report``).

    ``notes`` is a markdown file of the author's reading of the results; it goes in as its own
    section after the final-budget tables, so regenerating the report never loses it.
    """
    run_dir = Path(run_dir)
    discussion = _read_notes(notes) if notes is not None else None
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "report"
    results = read_results(run_dir)
    study = _read_study(run_dir)
    runs = _read_optional_table(run_dir / RUNS_FILE)
    metrics = _read_optional_table(run_dir / PRETRAIN_METRICS_FILE)

    glue = glue_scores(results)
    tasks = task_scores(results)
    final = final_fraction(results)
    seen = set(results["label"].to_list())
    for table in (runs, metrics):
        if table is not None:
            seen |= set(table["label"].to_list())
    ranked = list(labels_in_order(glue, final))
    labels = ranked + sorted(seen - set(ranked))
    colors = label_colors(labels)

    out_dir.mkdir(parents=True, exist_ok=True)
    plot_glue_vs_flops(glue, colors, out_dir)
    plot_task_scores(tasks, colors, out_dir)
    has_curves = metrics is not None and bool(curve_metrics(metrics))
    if has_curves:
        plot_pretrain_curves(metrics, colors, out_dir)

    sections = [
        _header(study, run_dir, results, final),
        _final_section(results, glue, tasks, labels, final),
        *([discussion] if discussion else []),
        _checkpoint_section(glue, tasks, labels, final),
        _curves_section(has_curves),
        _runs_section(runs, labels),
        _paper_section(set(results["objective"].to_list())),
    ]
    path = out_dir / REPORT_FILE
    atomic_write_text(path, "\n\n".join(sections) + "\n")
    return path


def _read_notes(path: Path) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"cannot read notes {path}: {exc.strerror or exc}") from None
    return text if text.startswith("#") else f"## Discussion\n\n{text}"


def _read_study(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STUDY_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from exc


def _read_optional_table(path: Path) -> pl.DataFrame | None:
    return pl.read_parquet(path) if path.is_file() else None


# ---------------------------------------------------------------------------- formatting


def _sci(x: float | None) -> str:
    return NO_VALUE if x is None else format_flops(x)


def _flops_range(values: Iterable[float]) -> str:
    low, high = _sci(min(values)), _sci(max(values))
    return low if low == high else f"{low}–{high}"


def _fraction(f: float) -> str:
    return f"{f * 100:g}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return NO_VALUE
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _score(row: Mapping[str, Any] | None) -> str:
    """``median (min–max)``; a single value stands alone."""
    if row is None:
        return NO_VALUE
    if row["n"] == 1:
        return f"{row['median']:.1f}"
    return f"{row['median']:.1f} ({row['min']:.1f}–{row['max']:.1f})"


def _flat(value: Any, prefix: str = "") -> list[str]:
    """``key=value`` pairs of a nested dict, unset entries left out, for one table line."""
    if isinstance(value, Mapping):
        pairs = []
        for key, item in value.items():
            pairs += _flat(item, f"{prefix}{key}.")
        return pairs
    if value is None or value == []:
        return []
    text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return [f"{prefix[:-1]}={text}" if prefix else text]


def _inline(value: Any) -> str:
    return "; ".join(_flat(value)) or NO_VALUE


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _figure(title: str, stem: str) -> str:
    return f"![{title}]({stem}.png)\n\n[SVG]({stem}.svg)"


def _lookup(table: pl.DataFrame, **where: Any) -> dict[str, Any] | None:
    rows = table.filter(*[pl.col(k) == v for k, v in where.items()])
    return rows.row(0, named=True) if rows.height else None


def _score_rows(
    table: pl.DataFrame, labels: Sequence[str], columns: Sequence[Mapping[str, Any]]
) -> list[list[str]]:
    """One row per label, one ``median (min–max)`` cell per column's filter."""
    return [
        [label, *[_score(_lookup(table, label=label, **c)) for c in columns]] for label in labels
    ]


# ---------------------------------------------------------------------------- sections


def _caps(finetune: Mapping[str, Any], results: pl.DataFrame) -> str:
    """Per task: the spec's caps on training and dev examples, and the training examples used.

    Capped fine-tuning is what makes CPU studies possible, and it lowers every score, so the
    report never lets it go unmentioned.
    """
    caps = finetune.get("caps") or {}
    eval_caps = finetune.get("eval_caps") or {}
    used = results.group_by("task").agg(pl.col("train_examples").max())
    parts = []
    for task in ordered_tasks(results["task"].to_list()):
        n_used = _lookup(used, task=task)["train_examples"]
        if task in caps:
            text = f"{task}: capped at {caps[task]:,} examples ({n_used:,} used)"
        else:
            text = f"{task}: not capped ({n_used:,} examples)"
        if task in eval_caps:
            text += f", dev set capped at {eval_caps[task]:,} examples"
        parts.append(text)
    return "; ".join(parts)


def _header(study: Mapping[str, Any], run_dir: Path, results: pl.DataFrame, final: float) -> str:
    finetune = study.get("finetune") or {}
    seeds = sorted(set(results["finetune_seed"].to_list()))
    at_final = results.filter(pl.col("checkpoint_fraction") == final)
    fractions = sorted(set(results["checkpoint_fraction"].to_list()))
    pretrain_seeds = sorted(set(results["pretrain_seed"].to_list()))
    finished = study.get("finished") or "not finished"
    rows = [
        ("Command", f"`{study['command']}`" if study.get("command") else NO_VALUE),
        ("Spec", f"`{study['spec_path']}`" if study.get("spec_path") else NO_VALUE),
        ("Git commit", f"`{study['git_commit']}`" if study.get("git_commit") else NO_VALUE),
        ("Machine", _inline(study.get("machine"))),
        ("Date", f"{study.get('started') or NO_VALUE} → {finished}"),
        ("Wall time", _duration(study.get("wall_s"))),
        ("Data", _inline(study.get("data"))),
        ("Backbone", _inline(study.get("backbone"))),
        ("FLOPs budget", _inline(study.get("budget"))),
        (
            "FLOPs at the last checkpoint",
            f"{_flops_range(at_final['flops_paper'])} (paper convention), "
            f"{_flops_range(at_final['flops_standard'])} (standard convention)",
        ),
        ("Checkpoints", ", ".join(_fraction(f) for f in fractions) + " of the budget"),
        ("Pre-training seeds", ", ".join(map(str, pretrain_seeds))),
        ("Fine-tuning seeds", ", ".join(map(str, seeds))),
        ("Fine-tuning recipe overrides", _inline(finetune.get("recipe"))),
        ("Training examples per task", _caps(finetune, results)),
    ]
    name = study.get("name") or run_dir.name
    return f"# Study `{name}`\n\n" + _table(["", ""], rows)


def _ordering(ranked: pl.DataFrame, final: float) -> str:
    """The measured ranking and, per adjacent pair, whether seeds alone could explain the gap."""
    rows = list(ranked.iter_rows(named=True))
    if not rows:
        return f"No label has a complete GLUE score at {_fraction(final)} of the budget."
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
    heading = f"**Measured ordering** (median GLUE score at {_fraction(final)} of the budget)"
    return "\n".join([f"{heading}: {names}.", *gaps])


def _paper_ordering(objectives: set[str]) -> str:
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


def _task_columns(tasks: pl.DataFrame) -> list[str]:
    return ordered_tasks(tasks.filter(pl.col("headline"))["task"].to_list())


def _task_header(tasks: pl.DataFrame, names: Sequence[str]) -> list[str]:
    headline = tasks.filter(pl.col("headline"))
    header = []
    for task in names:
        metric = _lookup(headline, task=task)["metric"]
        excluded = ", not in GLUE" if task in EXCLUDED_FROM_GLUE else ""
        header.append(f"{task} ({metric}{excluded})")
    return header


def _final_section(
    results: pl.DataFrame,
    glue: pl.DataFrame,
    tasks: pl.DataFrame,
    labels: Sequence[str],
    final: float,
) -> str:
    ranked = ranking(glue, final)
    objective_of = dict(results.select("label", "objective").unique().iter_rows())
    names = _task_columns(tasks)
    headline = tasks.filter(pl.col("headline") & (pl.col("checkpoint_fraction") == final))
    rows = []
    for label in labels:
        if label not in objective_of:
            continue
        placed = _lookup(ranked, label=label)
        objective = objective_of[label]
        paper_glue = paper.TABLE5_GLUE.get(objective)
        rows.append(
            [
                str(placed["rank"]) if placed else NO_VALUE,
                label,
                f"`{objective}`",
                _score(placed),
                *[_score(_lookup(headline, label=label, task=t)) for t in names],
                f"{paper_glue:.1f}" if paper_glue is not None else "",
            ]
        )
    n_seeds = results.select("pretrain_seed", "finetune_seed").unique().height
    parts = [
        f"## Results at the final budget ({_fraction(final)})",
        _ordering(ranked, final),
        _table(
            ["Rank", "Label", "Objective", "GLUE", *_task_header(tasks, names), "Paper Table 5"],
            rows,
        ),
        "GLUE score: mean over tasks of each task's headline metric (WNLI excluded), computed "
        f"per fine-tuned model; cells show the median (min–max) over the {n_seeds} "
        "(pre-training seed, fine-tuning seed) pairs. The paper's numbers come from base-size "
        "models pre-trained to convergence: compare the ordering, not the absolute values.",
    ]
    if any(o in paper.TABLE5_GLUE for o in objective_of.values()):
        parts.append(_paper_ordering(set(objective_of.values())))
    parts.append(_figure("GLUE score vs pre-training FLOPs", "glue_vs_flops"))
    others = tasks.filter(~pl.col("headline") & (pl.col("checkpoint_fraction") == final))
    if others.height:
        pairs = others.select("task", "metric").unique().iter_rows()
        columns = sorted(pairs, key=lambda tm: (task_order_key(tm[0]), tm[1]))
        cells = [{"task": t, "metric": m} for t, m in columns]
        present = [label for label in labels if label in objective_of]
        parts += [
            "Other metrics at the final budget:",
            _table(
                ["Label", *[f"{t} ({m})" for t, m in columns]], _score_rows(others, present, cells)
            ),
        ]
    return "\n\n".join(parts)


def _checkpoint_section(
    glue: pl.DataFrame, tasks: pl.DataFrame, labels: Sequence[str], final: float
) -> str:
    fractions = sorted(set(glue["checkpoint_fraction"].to_list()) | {final})
    present = [label for label in labels if label in set(tasks["label"].to_list())]
    parts = [
        "## GLUE score at every checkpoint",
        _table(
            ["Label", *[_fraction(f) for f in fractions]],
            _score_rows(glue, present, [{"checkpoint_fraction": f} for f in fractions]),
        ),
        "## Per-task scores",
        _figure("Per-task headline metric vs pre-training FLOPs", "glue_tasks_vs_flops"),
    ]
    names = _task_columns(tasks)
    headline = tasks.filter(pl.col("headline"))
    for fraction in sorted(set(tasks["checkpoint_fraction"].to_list()) - {final}):
        at = headline.filter(pl.col("checkpoint_fraction") == fraction)
        flops = _flops_range(at["flops_paper"])
        parts += [
            f"### {_fraction(fraction)} of the budget ({flops} FLOPs, paper convention)",
            _table(
                ["Label", *_task_header(tasks, names)],
                _score_rows(at, present, [{"task": t} for t in names]),
            ),
        ]
    return "\n\n".join(parts)


def _curves_section(has_curves: bool) -> str:
    heading = "## Pre-training curves\n\n"
    if not has_curves:
        return heading + f"No pre-training metrics were logged ({PRETRAIN_METRICS_FILE})."
    return (
        heading
        + "Solid: training batches; dashed: held-out split.\n\n"
        + _figure("Pre-training losses and accuracies vs FLOPs", "pretrain_curves")
    )


def _runs_section(runs: pl.DataFrame | None, labels: Sequence[str]) -> str:
    if runs is None:
        return f"## Runs\n\nNo run table was written ({RUNS_FILE})."
    order = {label: i for i, label in enumerate(labels)}
    ordered = runs.with_columns(
        pl.col("label").replace_strict(order, default=len(order)).alias("_order")
    ).sort("_order", "pretrain_seed", "run_id")
    counts = ordered["status"].value_counts().sort("status").iter_rows()
    rows = [
        [
            r["label"],
            f"`{r['objective']}`",
            str(r["pretrain_seed"]),
            f"`{r['run_id']}`",
            f"**{r['status']}**" if r["status"] == "failed" else r["status"],
            f"{r['steps']:,}" if r["steps"] is not None else NO_VALUE,
            _sci(r["flops_paper"]),
            _sci(r["flops_standard"]),
            _duration(r["wall_s"]),
            r["message"] or "",
        ]
        for r in ordered.iter_rows(named=True)
    ]
    header = [
        "Label",
        "Objective",
        "Seed",
        "Run",
        "Status",
        "Steps",
        "FLOPs (paper)",
        "FLOPs (standard)",
        "Wall time",
        "Message",
    ]
    summary = ", ".join(f"{n} {status}" for status, n in counts)
    return f"## Runs\n\n{summary}.\n\n" + _table(header, rows)


def _paper_section(objectives: set[str]) -> str:
    points = [f"- Table 5: {paper.TABLE5_SOURCE}."]
    for objective, findings in paper.FINDINGS.items():
        if objective in objectives:
            points += [f"- {finding}" for finding in findings]
    return "## The paper's reference points\n\n" + "\n".join(points)
