"""``report.md`` for a study output folder: what was run, what came out, next to the paper.

Everything is derived from the files the study runner wrote (results, runs, pre-training
metrics, ``study.json``), so the same folder always gives the same report; the report folder
keeps a copy of them, so it gives the same report again (``electra_ablate.report.source``). The
prose is limited to facts a reader can check against the tables: the measured ranking, whether
each difference is resolved by its 95% confidence interval, where each objective stands against
no pre-training, which of the paper's claims the study supports, contradicts or cannot resolve,
and when each model left its prior. An author's reading goes in through ``--notes``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from matplotlib.figure import Figure

from electra_ablate.analysis import paper
from electra_ablate.analysis.efficiency import crossover_table, multiplier_table
from electra_ablate.analysis.results import (
    checkpoint_values,
    evaluated_only_at_start,
    families_in_order,
    family_scores,
    family_scores_with_intervals,
    final_fraction,
    labels_in_order,
    of_family,
    paper_scores,
    pretraining_only_summary,
    probe_summary,
    summary_table,
    task_scores,
)
from electra_ablate.evaluation.task import TaskFamily, describe_family
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import (
    PROBES_FILE,
    REPORT_FILE,
    RUNS_FILE,
    SUMMARY_FILE,
    TABLE_FILES,
    StudyLayout,
)
from electra_ablate.infra.storage import atomic_file, atomic_write_text
from electra_ablate.report.efficiency import (
    CROSSOVERS_FILE,
    EFFICIENCY_FILE,
    family_efficiency,
    family_part,
    heading,
    plot_efficiency,
)
from electra_ablate.report.efficiency import section as efficiency_section
from electra_ablate.report.header import PLUMBING_CLAIMS, header, plumbing_check
from electra_ablate.report.lead import family_reference, lead_section
from electra_ablate.report.markdown import NO_VALUE, duration, fraction, sci, table
from electra_ablate.report.plots import (
    objective_colors,
    plot_scores_vs_flops,
    plot_task_scores,
    pretrain_curves_figure,
    save_figure,
)
from electra_ablate.report.pretraining import (
    DIAGNOSTICS_FILE,
    SMOOTHING,
    curve_panel_specs,
    diagnostics_section,
    diagnostics_table,
)
from electra_ablate.report.scores import checkpoint_section, final_section
from electra_ablate.report.source import keep_notes, keep_tables, read_tables
from electra_ablate.report.verdicts import NO_INTERVAL_NOTE, claims_section, compare
from electra_ablate.study.reuse import REUSED_MESSAGE
from electra_ablate.study.survey import survey

BASELINE_OBJECTIVE = "none"


def write_report(run_dir: Path, out_dir: Path | None = None, notes: Path | None = None) -> Path:
    """Write ``report.md``, ``summary.csv`` (and ``probes.csv`` when the study ran probes), the
    figures and the tables it read into ``out_dir`` (default ``run_dir/report``; a report folder
    given as ``run_dir`` is rewritten in place).

    ``run_dir`` is a study folder or a report folder that kept its tables. ``notes`` is a
    markdown file of the author's reading of the results (default: a report folder's own
    ``notes.md``); it goes in as its own section after the final-budget tables and is kept
    beside the report as ``notes.md``, so regenerating the report never loses it.
    """
    source = read_tables(Path(run_dir))
    run_dir = source.folder
    notes = notes if notes is not None else source.notes
    discussion = read_notes(notes) if notes is not None else None
    if out_dir is not None:
        out_dir = Path(out_dir)
    else:
        out_dir = run_dir if source.from_report else StudyLayout(run_dir).report
    study, results, runs, metrics = source.study, source.results, source.runs, source.metrics
    pretrained = (
        results.filter(pl.col("objective") != BASELINE_OBJECTIVE) if results is not None else None
    )

    labels = ordered_labels(results, runs, metrics)
    writable_folder(out_dir)
    kept = keep_tables(run_dir, out_dir)
    keep_notes(notes, out_dir)
    sections: list[str] = []  # the header goes first, once the headline is known
    first_scores, families, headline = None, [], None
    colors = label_colors(labels, results, runs, metrics)
    if pretrained is not None and pretrained.is_empty():  # every run failed or is pending
        sections.append(nothing_finished_section(runs))
    elif results is not None:
        scores = family_scores_with_intervals(results)
        papers, tasks = paper_scores(results), task_scores(results)
        final = final_fraction(results)
        order = families_in_order(results)
        write_csv(summary_table(scores, order), out_dir / SUMMARY_FILE)
        if (probes := probe_summary(tasks)).height:
            write_csv(probes, out_dir / PROBES_FILE)
        families = [describe_family(name) for name in order]
        plumbing = plumbing_check(study)  # no published numbers beside a plumbing check's
        departing = paper.setting_departures(runs)  # nor beside a variant of the paper's setting
        finals, checkpoints, efficiencies, efficiency_parts = [], [], [], []
        for family in families:
            own = (of_family(frame, family.name) for frame in (results, scores, papers, tasks))
            rows, family_scores_, family_papers, family_tasks = own
            if family.aggregate is not None:
                plot_scores_vs_flops(family, family_scores_, colors, out_dir)
                found = family_efficiency(rows.filter(pl.col("in_aggregate")), family)
                reference = family_reference(rows)
                stem = plot_efficiency(found, family, family_scores_, colors, out_dir, reference)
                efficiencies.append(found)
                part = family_part(found, family, stem, reference)
                efficiency_parts.append((heading(family), part))
            plot_task_scores(family, family_tasks, colors, out_dir)
            finals.append(
                final_section(
                    family,
                    rows,
                    family_scores_,
                    family_papers,
                    family_tasks,
                    labels,
                    final,
                    plumbing=plumbing,
                    departing=departing,
                )
            )
            if family.name == paper.claims_family() and family.aggregate is not None:
                claims = claims_section(
                    family.title, checkpoint_values(rows, final), runs, study, fraction(final)
                )
                if claims:
                    finals.append(claims + (f"\n\n{PLUMBING_CLAIMS}" if plumbing else ""))
            checkpoints.append(
                checkpoint_section(family, family_scores_, family_papers, family_tasks, labels)
            )
            if first_scores is None and family.aggregate is not None and family_scores_.height:
                first_scores = (family, checkpoint_values(rows, final))
                headline = (
                    family.title,
                    final,
                    compare(first_scores[1]),
                    dict(rows.select("label", "objective").unique(maintain_order=True).iter_rows()),
                    [x for x in labels if x in trained_labels(rows)],
                )
        sections += finals
        if efficiencies:
            write_csv(multiplier_table(efficiencies), out_dir / EFFICIENCY_FILE)
            write_csv(crossover_table(efficiencies), out_dir / CROSSOVERS_FILE)
            sections.append(efficiency_section(efficiency_parts))
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
        save_figure(curves_figure(metrics, colors), out_dir, "pretrain_curves")
        final_scores = None
        if first_scores is not None:
            family, values = first_scores
            compared = compare(values)
            final_scores = (
                f"{family.title} per model (final)"
                + ("" if compared.single_models else " [95% CI]"),
                {label: compared.score_text(label) for label in compared.scores},
                NO_INTERVAL_NOTE if compared.some_without_interval else "",
            )
        write_csv(diagnostics_table(metrics, labels), out_dir / DIAGNOSTICS_FILE)
        sections.append(diagnostics_section(metrics, labels, final_scores))
    sections.append(runs_section(runs, labels))
    if not source.from_report and (kept_text := kept_section(run_dir)):
        sections.append(kept_text)
    objectives = set(runs["objective"].to_list()) if runs is not None else set()
    sections.append(paper_section(objectives, families))
    lead = lead_section(study, runs, headline)
    sections.insert(0, header(study, run_dir, results, runs, tables_note(kept, out_dir), lead))
    path = out_dir / REPORT_FILE
    atomic_write_text(path, "\n\n".join(sections) + "\n")
    return path


def tables_note(kept: list[str], out_dir: Path) -> str:
    """The header's line on the tables beside the report: with them, anyone can regenerate it
    (``ablate report REPORT_FOLDER``) or compare it; without them, it says so."""
    missing = [name for name in TABLE_FILES if name not in kept]
    if not kept:
        return (
            "none kept with this report: it cannot be regenerated or compared without its "
            "study folder"
        )
    text = (
        f"{', '.join(f'`{n}`' for n in kept)} beside this report: `ablate report` on this "
        "folder regenerates it, `ablate compare` reads it"
    )
    if missing:
        text += f" (the study wrote no {', '.join(f'`{n}`' for n in missing)})"
    return text


def label_colors(
    labels: Sequence[str],
    results: pl.DataFrame | None,
    runs: pl.DataFrame | None,
    metrics: pl.DataFrame | None,
) -> dict[str, tuple[float, ...]]:
    """Each label's colour in every figure of the report, in the order of ``labels``
    (``ordered_labels``: the legends' order); the no-pre-training baseline has none (it is
    drawn grey)."""
    objective_of = objectives_by_label(results, runs, metrics)
    return objective_colors(
        {x: objective_of.get(x, x) for x in labels if objective_of.get(x) != BASELINE_OBJECTIVE}
    )


def curves_figure(metrics: pl.DataFrame, colors: Mapping[str, tuple]) -> Figure:
    """The report's ``pretrain_curves`` figure: a panel per diagnostic a run logged, its lines
    coloured by ``colors`` (``label_colors``), or by variant in a study with variants."""
    return pretrain_curves_figure(
        metrics, curve_colors(metrics, colors), curve_panel_specs(metrics), SMOOTHING
    )


def objectives_by_label(*frames: pl.DataFrame | None) -> dict[str, str]:
    """Each label's objective, from whichever table names it first."""
    found: dict[str, str] = {}
    for frame in frames:
        if frame is not None and {"label", "objective"} <= set(frame.columns):
            for label, objective in frame.select("label", "objective").unique().iter_rows():
                found.setdefault(label, objective)
    return found


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


def trained_labels(rows: pl.DataFrame) -> set[str]:
    """The labels of a family's rows evaluated beyond budget 0: pre-trained, not the
    no-pre-training baseline nor a reference scorer."""
    return set(rows["label"].to_list()) - set(evaluated_only_at_start(rows))


def is_baseline(results: pl.DataFrame, label: str) -> bool:
    return (
        results.filter(
            (pl.col("label") == label) & (pl.col("objective") == BASELINE_OBJECTIVE)
        ).height
        > 0
    )


def curve_colors(metrics: pl.DataFrame, colors: dict[str, tuple]) -> dict[str, tuple]:
    """Colour per variant when the study has variants (lines are variants), else the label's."""
    if "variant" in metrics.columns and metrics["variant"].null_count() < metrics.height:
        variants = metrics["variant"].drop_nulls().unique(maintain_order=True).to_list()
        return objective_colors({v: v for v in variants})
    present = set(metrics["label"].to_list())
    return {label: c for label, c in colors.items() if label in present}


def write_csv(frame: pl.DataFrame, path: Path) -> None:
    with atomic_file(path) as tmp:
        frame.write_csv(tmp, float_precision=3)


def read_notes(path: Path) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"cannot read notes {path}: {exc.strerror or exc}") from None
    return text if text.startswith("#") else f"## Discussion\n\n{text}"


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
            "" if reused_run(r) else r["message"] or "",
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
    sources = [
        r["message"][len(REUSED_MESSAGE) :].strip()
        for r in ordered.iter_rows(named=True)
        if reused_run(r)
    ]
    if sources:  # said once, not in every row's message
        summary += (
            f" ({len(sources)} reused: identical runs from "
            f"{', '.join(f'`{x}`' for x in dict.fromkeys(sources))})"
        )
    if not any(row[-1] for row in rows):  # no message to show: no column of blanks
        head, rows = head[:-1], [row[:-1] for row in rows]
    diverged = ordered.filter(pl.col("diverged").fill_null(False)).height
    if diverged:
        summary += (
            f"; {diverged} diverged (a training loss that ran far above its start; marked "
            "below, their scores say little about their objectives)"
        )
    return "\n\n".join([f"## Runs\n\n{summary}.", table(head, rows), *curve_notes(runs)])


def reused_run(row: dict[str, Any]) -> bool:
    return (row["message"] or "").startswith(REUSED_MESSAGE)


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
