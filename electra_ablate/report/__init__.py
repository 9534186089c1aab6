"""``report.md`` for a study output folder: what was run, what came out, next to the paper.

Everything is derived from the files the study runner wrote (results, runs, pre-training
metrics, ``study.json``), so the same folder always gives the same report. The prose is limited
to facts a reader can check against the tables: the measured ranking, whether each gap beats the
seed-to-seed spread, where each objective stands against no pre-training, and when each model
left its prior. An author's reading goes in through ``--notes``.

- ``header``: provenance, recipe, deviations from the paper;
- ``glue``: the GLUE sections (and ``summary.csv`` beside ``report.md``);
- ``pretraining``: the diagnostics of every run (learning speed, nats learnt, AUC);
- ``plots``: the figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from electra_ablate import paper
from electra_ablate.errors import InputError
from electra_ablate.layout import StudyLayout
from electra_ablate.report.glue import checkpoint_section, final_section
from electra_ablate.report.header import header
from electra_ablate.report.markdown import NO_VALUE, duration, sci, score, table
from electra_ablate.report.plots import (
    label_colors,
    plot_glue_vs_flops,
    plot_pretrain_curves,
    plot_task_scores,
)
from electra_ablate.report.pretraining import PANELS, SMOOTHING, diagnostics_section
from electra_ablate.results import (
    RESULTS_FILE,
    final_fraction,
    glue_scores,
    labels_in_order,
    paper_glue_scores,
    pretraining_only_summary,
    read_results,
    summary_table,
    task_scores,
)
from electra_ablate.storage import atomic_file, atomic_write_text

REPORT_FILE = "report.md"
SUMMARY_FILE = "summary.csv"
STUDY_FILE = "study.json"
RUNS_FILE = "runs.parquet"
PRETRAIN_METRICS_FILE = "pretrain_metrics.parquet"
BASELINE_OBJECTIVE = "none"


def write_report(run_dir: Path, out_dir: Path | None = None, notes: Path | None = None) -> Path:
    """Write ``report.md``, ``summary.csv`` and the figures into ``out_dir`` (default
    ``run_dir/report``).

    ``notes`` is a markdown file of the author's reading of the results; it goes in as its own
    section after the final-budget tables, so regenerating the report never loses it.
    """
    run_dir = Path(run_dir)
    discussion = read_notes(notes) if notes is not None else None
    out_dir = Path(out_dir) if out_dir is not None else StudyLayout(run_dir).report
    study = read_study(run_dir)
    runs = read_optional_table(run_dir / RUNS_FILE)
    metrics = read_optional_table(run_dir / PRETRAIN_METRICS_FILE)
    # a pre-training-only study (or one collected before any fine-tune) has no GLUE rows
    pretraining_only = metrics is not None and not has_rows(run_dir / RESULTS_FILE)
    results = None if pretraining_only else read_results(run_dir)

    labels = ordered_labels(results, runs, metrics)
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = [header(study, run_dir, results, runs)]
    final_glue = None
    if results is not None:
        glue, paper_glue, tasks = (
            glue_scores(results),
            paper_glue_scores(results),
            task_scores(results),
        )
        final = final_fraction(results)
        colors = label_colors([x for x in labels if not is_baseline(results, x)])
        plot_glue_vs_flops(glue, colors, out_dir)
        plot_task_scores(tasks, colors, out_dir)
        write_summary(glue, out_dir / SUMMARY_FILE)
        sections.append(final_section(results, glue, paper_glue, tasks, labels, final))
        if discussion:
            sections.append(discussion)
        sections.append(checkpoint_section(glue, paper_glue, tasks, labels))
        at_end = glue.filter(pl.col("checkpoint_fraction") == final)
        final_glue = {row["label"]: score(row) for row in at_end.iter_rows(named=True)}
    else:
        if runs is not None and runs.height:
            fractions = study.get("budget", {}).get("checkpoints") or [1.0]
            write_csv(pretraining_only_summary(runs, fractions), out_dir / SUMMARY_FILE)
        if discussion:
            sections.append(discussion)
    if metrics is not None and metrics.height:
        plot_pretrain_curves(metrics, curve_colors(metrics, labels), out_dir, PANELS, SMOOTHING)
        sections.append(diagnostics_section(metrics, labels, final_glue))
    sections.append(runs_section(runs, labels))
    objectives = set(runs["objective"].to_list()) if runs is not None else set()
    sections.append(paper_section(objectives))
    path = out_dir / REPORT_FILE
    atomic_write_text(path, "\n\n".join(sections) + "\n")
    return path


def ordered_labels(
    results: pl.DataFrame | None, runs: pl.DataFrame | None, metrics: pl.DataFrame | None
) -> list[str]:
    """Best first at the final budget when there are GLUE results, then every other label in
    the order the study ran them, the baseline last."""
    ranked: list[str] = []
    if results is not None:
        pretrained = results.filter(pl.col("objective") != BASELINE_OBJECTIVE)
        if pretrained.height:
            ranked = list(labels_in_order(glue_scores(pretrained), final_fraction(pretrained)))
    seen: list[str] = []
    for frame in (runs, metrics, results):
        if frame is not None:
            seen += frame["label"].unique(maintain_order=True).to_list()
    rest = [x for x in dict.fromkeys(seen) if x not in ranked]
    baselines = [x for x in rest if x.startswith("no pre-training")]
    return ranked + [x for x in rest if x not in baselines] + baselines


def is_baseline(results: pl.DataFrame, label: str) -> bool:
    return (
        results.filter(
            (pl.col("label") == label) & (pl.col("objective") == BASELINE_OBJECTIVE)
        ).height
        > 0
    )


def curve_colors(metrics: pl.DataFrame, labels: list[str]) -> dict[str, tuple]:
    """Colour per variant when the study has variants (lines are variants), else per label."""
    if "variant" in metrics.columns and metrics["variant"].null_count() < metrics.height:
        return label_colors(metrics["variant"].drop_nulls().unique(maintain_order=True).to_list())
    return label_colors([x for x in labels if x in set(metrics["label"].to_list())])


def write_summary(glue: pl.DataFrame, path: Path) -> None:
    write_csv(summary_table(glue), path)


def write_csv(frame: pl.DataFrame, path: Path) -> None:
    with atomic_file(path) as tmp:
        frame.write_csv(tmp, float_precision=3)


def read_notes(path: Path) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"cannot read notes {path}: {exc.strerror or exc}") from None
    return text if text.startswith("#") else f"## Discussion\n\n{text}"


def read_study(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STUDY_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from exc


def read_optional_table(path: Path) -> pl.DataFrame | None:
    if not path.is_file():
        return None
    try:
        return pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc


def has_rows(path: Path) -> bool:
    """False for a missing or empty table; an unreadable one counts as rows, so that reading
    it reports the problem."""
    try:
        return not pl.read_parquet(path).is_empty()
    except FileNotFoundError:
        return False
    except (OSError, pl.exceptions.PolarsError):
        return True


def runs_section(runs: pl.DataFrame | None, labels: list[str]) -> str:
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
            sci(r["flops_paper"]),
            sci(r["flops_standard"]),
            duration(r["wall_s"]),
            r["message"] or "",
        ]
        for r in ordered.iter_rows(named=True)
    ]
    head = [
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
    return f"## Runs\n\n{summary}.\n\n" + table(head, rows)


def paper_section(objectives: set[str]) -> str:
    points = [f"- Table 5: {paper.TABLE5_SOURCE}."]
    for objective, findings in paper.FINDINGS.items():
        if objective in objectives:
            points += [f"- {finding}" for finding in findings]
    return "## The paper's reference points\n\n" + "\n".join(points)
