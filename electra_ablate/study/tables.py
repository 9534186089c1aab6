"""The study's tidy tables, rebuilt from the records on disk after every run of the study:
``results.parquet`` (one row per fine-tuned metric), ``runs.parquet`` (one row per unit) and
``pretrain_metrics.parquet`` (every logged pre-training metric)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from electra_ablate.evaluation.task import RECORD_FIELDS, family_of, get_task
from electra_ablate.results import RUNS_SCHEMA, write_table
from electra_ablate.storage import atomic_file
from electra_ablate.study.context import Study
from electra_ablate.study.units import ReferenceUnit, RunUnit, Unit


def write_tables(
    study: Study, summaries: list[tuple[Unit, dict]], records: list[tuple[Unit, dict]]
) -> None:
    layout = study.layout
    write_table(layout.results, [row for unit, r in records for row in result_rows(study, unit, r)])
    trained = [(unit, s) for unit, s in summaries if not isinstance(unit, ReferenceUnit)]
    runs = pl.DataFrame([run_row(unit, s) for unit, s in trained], schema=RUNS_SCHEMA)
    write_parquet(layout.runs, runs)
    frames = [  # a pending run's partial curve would read as a finished one
        metrics_frame(unit)
        for unit, summary in summaries
        if isinstance(unit, RunUnit) and summary["status"] != "pending"
    ]
    frames = [f for f in frames if f is not None]
    if frames:
        write_parquet(layout.pretrain_metrics, pl.concat(frames, how="diagonal_relaxed"))


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
        }
        for metric, value in metrics.items()
        if metric not in RECORD_FIELDS
    ]


def run_row(unit: Unit, summary: dict) -> dict[str, Any]:
    params = unit.config.get("params", {}) if isinstance(unit, RunUnit) else {}
    return {
        **identity_columns(unit),
        "params_json": json.dumps(params, sort_keys=True),
        "status": summary["status"],
        "message": summary.get("message", ""),
        "steps": int(summary.get("steps", 0)),
        "flops_paper": float(summary.get("flops_paper", 0.0)),
        "flops_standard": float(summary.get("flops_standard", 0.0)),
        "wall_s": float(summary.get("wall_s", 0.0)),
    }


def metrics_frame(unit: RunUnit) -> pl.DataFrame | None:
    path = unit.layout.metrics
    if not path.exists() or not path.stat().st_size:
        return None
    ids = identity_columns(unit)
    return pl.read_ndjson(path, infer_schema_length=None).with_columns(
        *[
            pl.lit(v, dtype=pl.Int64 if k == "pretrain_seed" else pl.String).alias(k)
            for k, v in ids.items()
        ]
    )


def write_parquet(path: Path, frame: pl.DataFrame) -> None:
    with atomic_file(path) as tmp:
        frame.write_parquet(tmp)
