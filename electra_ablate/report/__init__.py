"""``report.md`` for a study output folder: what was run, what came out, next to the paper.

Everything is derived from the files the study runner wrote (results, runs, pre-training
metrics, ``study.json``), so the same folder always gives the same report. The prose is limited
to facts a reader can check against the tables: the measured ranking, whether each gap beats the
seed-to-seed spread, where each objective stands against no pre-training, and when each model
left its prior. An author's reading goes in through ``--notes``.

- ``header``: provenance, recipe, deviations from the paper;
- ``scores``: one set of sections per task family in the results, GLUE's or any other's (and
  ``summary.csv`` beside ``report.md``);
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
from electra_ablate.evaluation.task import TaskFamily, describe_family
from electra_ablate.layout import StudyLayout
from electra_ablate.report.header import header
from electra_ablate.report.markdown import NO_VALUE, duration, sci, score, table
from electra_ablate.report.plots import (
    label_colors,
    plot_pretrain_curves,
    plot_scores_vs_flops,
    plot_task_scores,
)
from electra_ablate.report.pretraining import SMOOTHING, curve_panel_specs, diagnostics_section
from electra_ablate.report.scores import checkpoint_section, final_section
from electra_ablate.results import (
    RESULTS_FILE,
    complete_runs,
    families_in_order,
    family_scores,
    final_fraction,
    labels_in_order,
    of_family,
    paper_scores,
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
    runs = complete_runs(runs) if runs is not None else None
    metrics = read_optional_table(run_dir / PRETRAIN_METRICS_FILE)
    # a pre-training-only study, or one collected before any fine-tune (or any run) finished,
    # has no evaluation rows
    no_glue = (metrics is not None or runs is not None) and not has_rows(run_dir / RESULTS_FILE)
    results = None if no_glue else read_results(run_dir)
    pretrained = (
        results.filter(pl.col("objective") != BASELINE_OBJECTIVE) if results is not None else None
    )

    labels = ordered_labels(results, runs, metrics)
    writable_folder(out_dir)
    sections = [header(study, run_dir, results, runs)]
    first_scores, families = None, []
    if pretrained is not None and pretrained.is_empty():  # every run failed or is pending
        sections.append(nothing_finished_section(runs))
    elif results is not None:
        scores, papers, tasks = family_scores(results), paper_scores(results), task_scores(results)
        final = final_fraction(results)
        colors = label_colors([x for x in labels if not is_baseline(results, x)])
        order = families_in_order(results)
        write_csv(summary_table(scores, order), out_dir / SUMMARY_FILE)
        families = [describe_family(name) for name in order]
        finals, checkpoints = [], []
        for family in families:
            own = (of_family(frame, family.name) for frame in (results, scores, papers, tasks))
            rows, family_scores_, family_papers, family_tasks = own
            if family.aggregate is not None:
                plot_scores_vs_flops(family, family_scores_, colors, out_dir)
            plot_task_scores(family, family_tasks, colors, out_dir)
            finals.append(
                final_section(
                    family, rows, family_scores_, family_papers, family_tasks, labels, final
                )
            )
            checkpoints.append(
                checkpoint_section(family, family_scores_, family_papers, family_tasks, labels)
            )
            if first_scores is None and family.aggregate is not None and family_scores_.height:
                at_end = family_scores_.filter(pl.col("checkpoint_fraction") == final)
                first_scores = (family, at_end)
        sections += finals
        if discussion:
            sections.append(discussion)
        sections += [c for c in checkpoints if c]
    else:
        if runs is not None and runs.height:
            fractions = study.get("budget", {}).get("checkpoints") or [1.0]
            write_csv(pretraining_only_summary(runs, fractions), out_dir / SUMMARY_FILE)
        if discussion:
            sections.append(discussion)
    if metrics is not None and metrics.height:
        panels = curve_panel_specs(metrics)
        plot_pretrain_curves(metrics, curve_colors(metrics, labels), out_dir, panels, SMOOTHING)
        final_scores = None
        if first_scores is not None:
            family, at_end = first_scores
            final_scores = (
                family.title,
                {row["label"]: score(row) for row in at_end.iter_rows(named=True)},
            )
        sections.append(diagnostics_section(metrics, labels, final_scores))
    sections.append(runs_section(runs, labels))
    if kept := kept_section(run_dir):
        sections.append(kept)
    objectives = set(runs["objective"].to_list()) if runs is not None else set()
    sections.append(paper_section(objectives, families))
    path = out_dir / REPORT_FILE
    atomic_write_text(path, "\n\n".join(sections) + "\n")
    return path


def writable_folder(folder: Path) -> None:
    """Create ``folder`` if needed; one that cannot be written is an input error naming it."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        raise InputError(
            f"cannot write the report to {exc.filename or folder}: {exc.strerror}"
            " (choose another --out)"
        ) from None


def nothing_finished_section(runs: pl.DataFrame | None) -> str:
    """In place of the results when no pre-training run has finished."""
    counts = "none"
    if runs is not None:
        pretrained = runs.filter(pl.col("objective") != BASELINE_OBJECTIVE)
        by_status = pretrained["status"].value_counts().sort("status").iter_rows()
        counts = ", ".join(f"{n} {status}" for status, n in by_status) or "none"
    return (
        "## Results\n\nNo pre-training run finished "
        f"(runs: {counts}), so there is no pre-trained encoder to compare; only the "
        "no-pre-training baseline may have scores. The runs table below says why."
    )


def curve_notes(runs: pl.DataFrame | None) -> list[str]:
    """Runs whose training curve is missing (a damaged log, left out of the diagnostics until
    `ablate run` rebuilds it) or was rebuilt by re-training."""
    if runs is None:
        return []
    notes = []
    for state, text in (
        (
            "missing",
            "No training curve (its metrics.jsonl is missing or damaged; the next "
            "`ablate run` re-trains the run to rebuild it) for",
        ),
        ("rebuilt", "Training curve rebuilt by re-training the run after its log was damaged, for"),
    ):
        names = runs.filter(pl.col("curve") == state)
        if names.height:
            listed = ", ".join(
                f"{r['label']} (seed {r['pretrain_seed']})" for r in names.iter_rows(named=True)
            )
            notes.append(f"{text}: {listed}.")
    return notes


def kept_section(run_dir: Path) -> str | None:
    """The kept encoders of finished units that are missing or fail their checksums."""
    from electra_ablate.survey import survey

    problems = survey(run_dir).kept_problems
    if not problems:
        return None
    lines = []
    for path, problem in problems:
        where = path.relative_to(run_dir) if path.is_relative_to(run_dir) else path
        what = "missing" if problem == "missing" else f"corrupt ({problem})"
        lines.append(f"- `{where}`: {what}")
    return (
        "## Kept encoders\n\nThese kept encoders of finished runs are missing or fail their "
        "checksums; the results above were fine-tuned before and stand. `ablate export` (or an "
        "`ablate run` that needs them) rebuilds them.\n\n" + "\n".join(lines)
    )


def ordered_labels(
    results: pl.DataFrame | None, runs: pl.DataFrame | None, metrics: pl.DataFrame | None
) -> list[str]:
    """Best first at the final budget when there are GLUE results, then every other label in
    the order the study ran them, the baseline last."""
    ranked: list[str] = []
    if results is not None:
        pretrained = results.filter(pl.col("objective") != BASELINE_OBJECTIVE)
        scores = family_scores(pretrained)
        if scores.height:  # by the first family with a score, in the study's order
            present = set(scores["family"].to_list())
            first = next(f for f in families_in_order(pretrained) if f in present)
            ranked = list(labels_in_order(of_family(scores, first), final_fraction(pretrained)))
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
            status_cell(r),
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
    diverged = ordered.filter(pl.col("diverged").fill_null(False)).height
    if diverged:
        summary += (
            f"; {diverged} diverged (a training loss that ran far above its start; marked "
            "below, their scores say little about their objectives)"
        )
    return "\n\n".join([f"## Runs\n\n{summary}.", table(head, rows), *curve_notes(runs)])


def status_cell(row: dict[str, Any]) -> str:
    if row["status"] == "failed":
        return "**failed**"
    return f"{row['status']}, **diverged**" if row.get("diverged") else row["status"]


def paper_section(objectives: set[str], families: list[TaskFamily]) -> str:
    points = [
        f"- {family.published_label}: {family.published_source}."
        for family in families
        if family.published_source
    ]
    for objective, findings in paper.FINDINGS.items():
        if objective in objectives:
            points += [f"- {finding}" for finding in findings]
    return "## The paper's reference points\n\n" + "\n".join(points)
