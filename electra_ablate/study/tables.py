"""The study's tidy tables, rebuilt from the records on disk after every run of the study:
``results.parquet`` (one row per fine-tuned metric), ``runs.parquet`` (one row per unit) and
``pretrain_metrics.parquet`` (every logged pre-training metric).

Written with pyarrow alone: they are written by ``ablate run`` on whatever machine trains, a GPU
node without polars included, and read with polars where studies are merged and reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from electra_ablate.analysis.table_schemas import RESULTS_COLUMNS, RUNS_COLUMNS
from electra_ablate.evaluation.task import RECORD_FIELDS, family_of, get_task
from electra_ablate.infra.storage import atomic_file
from electra_ablate.pretraining.engine.metrics_log import metrics_problem
from electra_ablate.study.context import Study
from electra_ablate.study.records import warn
from electra_ablate.study.units import ReferenceUnit, RunUnit, Unit


def write_tables(
    study: Study, summaries: list[tuple[Unit, dict]], records: list[tuple[Unit, dict]]
) -> list[str]:
    """Write the three tables; returns the tasks that the ``results.parquet`` written before
    listed and this one no longer does because the study names them no more (a re-run with
    another task list), for the caller to say so: their records stay in ``finetune/``."""
    layout = study.layout
    before = tasks_listed(layout.results)
    results = [row for unit, r in records for row in result_rows(study, unit, r)]
    write_parquet(layout.results, pa.Table.from_pylist(results, schema=RESULTS_COLUMNS))
    curves = {  # a pending run's partial curve would read as a finished one
        unit.run_id: metrics_frame(unit, summary["status"] == "done")
        for unit, summary in summaries
        if isinstance(unit, RunUnit) and summary["status"] != "pending"
    }
    trained = [(unit, s) for unit, s in summaries if not isinstance(unit, ReferenceUnit)]
    rows = [run_row(unit, s, curves.get(unit.run_id)) for unit, s in trained]
    write_parquet(layout.runs, pa.Table.from_pylist(rows, schema=RUNS_COLUMNS))
    frames = [f for f in curves.values() if f is not None]
    if frames:  # runs log different metrics: missing columns are null, ints widen to floats
        write_parquet(
            layout.pretrain_metrics, pa.concat_tables(frames, promote_options="permissive")
        )
    return dropped_tasks(before, results, summaries)


def dropped_tasks(
    before: set[str], rows: list[dict[str, Any]], summaries: list[tuple[Unit, dict]]
) -> list[str]:
    """The tasks of ``before`` (the previous results' tasks) that ``rows`` lack and no
    evaluation block of the study's units names any more."""
    gone = before - {row["task"] for row in rows}
    if not gone:
        return []
    named = {t for unit, _ in summaries for b in unit.spec.evaluation_blocks() for t in b.tasks}
    return sorted(gone - named)


def tasks_listed(path: Path) -> set[str]:
    """The tasks of a ``results.parquet`` (none when there is none or it does not read)."""
    if not path.exists():
        return set()
    try:
        tasks = pq.read_table(path, columns=["task"]).column("task").to_pylist()
    except (OSError, KeyError, pa.ArrowException):
        return set()
    return {t for t in tasks if isinstance(t, str)}


def identity_columns(unit: Unit) -> dict[str, Any]:
    return {
        "run_id": unit.run_id,
        "variant": unit.variant,
        "objective": unit.objective,
        "label": unit.label,
        "pretrain_seed": unit.seed,
    }


def result_rows(study: Study, unit: Unit, record: dict) -> list[dict[str, Any]]:
    if record["status"] != "done":
        return []
    metrics = record["metrics"]
    task = get_task(record["task"])
    in_aggregate = family_of(task).in_aggregate(task)
    return [
        {
            "study": study.spec.name,
            **identity_columns(unit),
            "checkpoint_fraction": record["fraction"],
            "pretrain_step": record["step"],
            "flops_paper": record["flops_paper"],
            "flops_standard": record["flops_standard"],
            "family": task.family,
            "task": record["task"],
            "finetune_seed": record["seed"],
            "metric": metric,
            "headline": metric == task.headline,
            "in_aggregate": in_aggregate and metric == task.headline,
            "value": float(value),
            "train_examples": metrics.get("train_examples"),
            "wall_s": metrics.get("wall_seconds"),
            "precision": record.get("precision"),
        }
        for metric, value in metrics.items()
        if metric not in RECORD_FIELDS
    ]


def run_row(unit: Unit, summary: dict, curve: pa.Table | None = None) -> dict[str, Any]:
    params = unit.config.get("params", {}) if isinstance(unit, RunUnit) else {}
    is_run = isinstance(unit, RunUnit)
    if not is_run or summary["status"] == "pending":
        curve_state = None
    elif curve is None:
        curve_state = "missing"
    else:
        curve_state = "rebuilt" if summary.get("curve_rebuilt") else "logged"
    return {
        **identity_columns(unit),
        "params_json": json.dumps(params, sort_keys=True),
        "status": summary["status"],
        "message": summary.get("message", ""),
        "steps": int(summary.get("steps", 0)),
        "flops_paper": float(summary.get("flops_paper", 0.0)),
        "flops_standard": float(summary.get("flops_standard", 0.0)),
        "wall_s": float(summary.get("wall_s", 0.0)),
        "diverged": bool(summary.get("diverged")) if is_run else None,
        "curve": curve_state,
    }


def metrics_frame(unit: RunUnit, finished: bool) -> pa.Table | None:
    """The run's logged metrics; None (named in one line) if its log is missing or damaged,
    which ``ablate run`` repairs by re-training the run (``study.integrity``)."""
    path = unit.layout.metrics
    problem = metrics_problem(path, finished, unit.plan.total_steps)
    if problem is not None:
        warn(f"{path}: {problem}; the tables leave its curve out until `ablate run` rebuilds it")
        return None
    lines = path.read_bytes().splitlines() if path.exists() else []
    if lines and not lines[-1].rstrip().endswith(b"}"):
        lines = lines[:-1]  # torn by a kill: the unfinished run's resume drops it too
    if not lines:
        return None
    try:
        frame = json_lines_table([json.loads(line) for line in lines if line.strip()])
    except (ValueError, TypeError, AttributeError, pa.ArrowException) as exc:
        warn(f"{path} cannot be read ({type(exc).__name__}); the tables leave the run's curve out")
        return None
    rows = frame.num_rows
    for name, value in identity_columns(unit).items():
        kind = pa.int64() if name == "pretrain_seed" else pa.string()
        frame = frame.append_column(name, pa.array([value] * rows, kind))
    return frame


def json_lines_table(records: list[dict[str, Any]]) -> pa.Table:
    """One column per key in order of first appearance, each typed from all its values (ints
    and floats together are floats; a key a line lacks is null there)."""
    names = list(dict.fromkeys(key for record in records for key in record))
    return pa.table({name: pa.array([r.get(name) for r in records]) for name in names})


def write_parquet(path: Path, table: pa.Table) -> None:
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)
