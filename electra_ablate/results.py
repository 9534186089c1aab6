"""The tidy results table and the statistics every report is built from.

One row per (run × checkpoint × task × fine-tune seed × metric), values on the ×100 scale of
GLUE papers. Keeping every fine-tuning seed (instead of a pre-computed median) lets a report show
the spread, and lets a re-run add seeds without recomputing anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from electra_ablate.errors import InputError
from electra_ablate.storage import atomic_file

RESULTS_FILE = "results.parquet"

RESULTS_SCHEMA = pl.Schema(
    {
        "study": pl.String,
        "run_id": pl.String,
        "variant": pl.String,
        "objective": pl.String,
        "label": pl.String,
        "pretrain_seed": pl.Int64,
        "checkpoint_fraction": pl.Float64,
        "pretrain_step": pl.Int64,
        "flops_paper": pl.Float64,
        "flops_standard": pl.Float64,
        "task": pl.String,
        "finetune_seed": pl.Int64,
        "metric": pl.String,
        "headline": pl.Boolean,
        "value": pl.Float64,
        "train_examples": pl.Int64,
        "wall_s": pl.Float64,
    }
)

OPTIONAL_COLUMNS = ("variant",)  # null unless the study has variants

RUNS_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "variant": pl.String,
        "objective": pl.String,
        "label": pl.String,
        "pretrain_seed": pl.Int64,
        "params_json": pl.String,
        "status": pl.String,
        "message": pl.String,
        "steps": pl.Int64,
        "flops_paper": pl.Float64,
        "flops_standard": pl.Float64,
        "wall_s": pl.Float64,
        # whether the training loss ran away (engine.trainer.DIVERGENCE_FACTOR); null: baseline
        "diverged": pl.Boolean,
        # the run's training curve: "logged", "rebuilt" (re-trained after its log was damaged)
        # or "missing" (its metrics.jsonl is missing or damaged); null for the baseline
        "curve": pl.String,
    }
)
RUNS_OPTIONAL_COLUMNS = ("diverged", "curve")  # absent from tables written before them


def complete_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """A runs table with every column of ``RUNS_SCHEMA``, older tables' missing ones null."""
    missing = [n for n in RUNS_OPTIONAL_COLUMNS if n not in runs.columns]
    return runs.with_columns(pl.lit(None, dtype=RUNS_SCHEMA[n]).alias(n) for n in missing)


# A re-run that produces a row with the same key replaces the old row instead of duplicating it.
KEY_COLUMNS = ("study", "run_id", "checkpoint_fraction", "task", "finetune_seed", "metric")

# The paper's GLUE score leaves WNLI out (its dev set is adversarial to every model).
EXCLUDED_FROM_GLUE = frozenset({"wnli"})

GLUE_TASK_ORDER = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")

# One point on a GLUE-vs-FLOPs curve: an objective entry of the spec at one checkpoint.
CHECKPOINT_KEYS = ("label", "objective", "checkpoint_fraction")


def _as_frame(rows: pl.DataFrame | Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    frame = rows if isinstance(rows, pl.DataFrame) else pl.DataFrame(list(rows))
    if frame.width == 0:
        return pl.DataFrame(schema=RESULTS_SCHEMA)
    for name in OPTIONAL_COLUMNS:  # tables written before the column existed
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=RESULTS_SCHEMA[name]).alias(name))
    missing = [name for name in RESULTS_SCHEMA if name not in frame.columns]
    if missing:
        raise ValueError(f"results rows lack columns {missing}")
    return frame.select([pl.col(name).cast(dtype) for name, dtype in RESULTS_SCHEMA.items()])


def write_table(path: Path, rows: pl.DataFrame | Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """Write ``rows`` as the results table at ``path``, whole or not at all."""
    frame = _as_frame(rows)
    with atomic_file(Path(path)) as tmp:
        frame.write_parquet(tmp)
    return frame


def append_rows(path: Path, rows: pl.DataFrame | Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """Add rows to the table at ``path``; a row whose key is already there replaces it."""
    path = Path(path)
    new = _as_frame(rows)
    if path.exists():
        new = pl.concat([_as_frame(pl.read_parquet(path)), new])
    merged = new.unique(subset=list(KEY_COLUMNS), keep="last", maintain_order=True)
    return write_table(path, merged)


def read_results(directory: Path) -> pl.DataFrame:
    """The results table of a study output directory, or a one-line error saying what to do."""
    path = Path(directory) / RESULTS_FILE
    if not path.is_file():
        raise InputError(f"no results in {directory}: run `ablate run SPEC` first")
    try:
        frame = pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    missing = [n for n in RESULTS_SCHEMA if n not in frame.columns and n not in OPTIONAL_COLUMNS]
    if missing:
        raise InputError(f"{path} lacks columns {', '.join(missing)}")
    if frame.is_empty():
        raise InputError(
            f"no results in {directory} ({RESULTS_FILE} is empty): run `ablate run SPEC` first"
        )
    return _as_frame(frame)


def task_order_key(task: str) -> tuple[int, str]:
    """Sort key putting tasks in the order GLUE papers print them; unknown ones after, by name."""
    order = GLUE_TASK_ORDER.index(task) if task in GLUE_TASK_ORDER else len(GLUE_TASK_ORDER)
    return order, task


def ordered_tasks(tasks: Iterable[str]) -> list[str]:
    return sorted(set(tasks), key=task_order_key)


def _spread(column: str) -> list[pl.Expr]:
    values = pl.col(column)
    return [
        values.median().alias("median"),
        values.min().alias("min"),
        values.max().alias("max"),
        values.quantile(0.25, interpolation="linear").alias("q1"),
        values.quantile(0.75, interpolation="linear").alias("q3"),
        values.len().alias("n"),
    ]


def _checkpoint_flops() -> list[pl.Expr]:
    return [pl.col("flops_paper").mean(), pl.col("flops_standard").mean()]


def seed_glue_scores(results: pl.DataFrame) -> pl.DataFrame:
    """GLUE score of every fine-tuned model: the mean over tasks of the headline metric.

    A (pre-training seed, fine-tuning seed) pair that lacks one of the study's GLUE tasks gets
    no score, because a mean over fewer tasks is not comparable with the others.
    """
    headline = results.filter(pl.col("headline") & ~pl.col("task").is_in(EXCLUDED_FROM_GLUE))
    n_tasks = headline["task"].n_unique()
    return (
        headline.group_by([*CHECKPOINT_KEYS, "pretrain_seed", "finetune_seed"])
        .agg(
            pl.col("value").mean().alias("glue"),
            pl.col("task").n_unique().alias("n_tasks"),
            *_checkpoint_flops(),
        )
        .filter(pl.col("n_tasks") == n_tasks)
        .drop("n_tasks")
        .sort([*CHECKPOINT_KEYS, "pretrain_seed", "finetune_seed"])
    )


def glue_scores(results: pl.DataFrame) -> pl.DataFrame:
    """Median, min, max and quartiles of the GLUE score across all seeds, per checkpoint."""
    return (
        seed_glue_scores(results)
        .group_by(list(CHECKPOINT_KEYS))
        .agg(*_spread("glue"), *_checkpoint_flops())
        .sort(list(CHECKPOINT_KEYS))
    )


def paper_glue_scores(results: pl.DataFrame) -> pl.DataFrame:
    """The paper's aggregation: each task's headline metric, median over the fine-tuning runs
    (the paper's median of 10), then the mean over tasks; one number per checkpoint."""
    headline = results.filter(pl.col("headline") & ~pl.col("task").is_in(EXCLUDED_FROM_GLUE))
    n_tasks = headline["task"].n_unique()
    return (
        headline.group_by([*CHECKPOINT_KEYS, "task"])
        .agg(pl.col("value").median().alias("task_median"), *_checkpoint_flops())
        .group_by(list(CHECKPOINT_KEYS))
        .agg(
            pl.col("task_median").mean().alias("glue_paper"),
            pl.col("task").n_unique().alias("n_tasks"),
            *_checkpoint_flops(),
        )
        .filter(pl.col("n_tasks") == n_tasks)
        .drop("n_tasks")
        .sort(list(CHECKPOINT_KEYS))
    )


def summary_table(glue: pl.DataFrame) -> pl.DataFrame:
    """``summary.csv``: per objective entry and checkpoint, the per-model GLUE score's median,
    min, max and count (the no-pre-training baseline has objective ``none``, fraction 0)."""
    return glue.select(
        "objective",
        "label",
        pl.col("checkpoint_fraction").alias("budget_fraction"),
        pl.col("median").alias("glue_median"),
        pl.col("min").alias("glue_min"),
        pl.col("max").alias("glue_max"),
        "n",
    ).sort("objective", "label", "budget_fraction")


def pretraining_only_summary(runs: pl.DataFrame, fractions: Sequence[float]) -> pl.DataFrame:
    """``summary.csv`` of a study with no fine-tuning: the same columns, one row per objective
    entry and kept checkpoint, no GLUE score (``n`` = 0), so every study's summary reads alike."""
    entries = runs.select("objective", "label").unique(maintain_order=True)
    checkpoints = pl.DataFrame({"budget_fraction": [float(f) for f in fractions]})
    return (
        entries.join(checkpoints, how="cross")
        .with_columns(
            *(pl.lit(None, pl.Float64).alias(c) for c in ("glue_median", "glue_min", "glue_max")),
            pl.lit(0, pl.UInt32).alias("n"),
        )
        .sort("objective", "label", "budget_fraction")
    )


def task_scores(results: pl.DataFrame) -> pl.DataFrame:
    """Median, min, max and quartiles of every task metric across all seeds, per checkpoint."""
    keys = [*CHECKPOINT_KEYS, "task", "metric", "headline"]
    return results.group_by(keys).agg(*_spread("value"), *_checkpoint_flops()).sort(keys)


def final_fraction(results: pl.DataFrame) -> float:
    """The study's last checkpoint: the largest budget fraction any run reached."""
    return float(results["checkpoint_fraction"].max())


def ranking(glue: pl.DataFrame, fraction: float) -> pl.DataFrame:
    """Labels ranked by median GLUE score at ``fraction``, with each gap to the next one down.

    ``spread`` is a label's min–max range over seeds; ``beyond_spread`` says whether the gap in
    medians exceeds the larger of the two ranges (``spread_with_next``): a reader's first
    question about a ranking is whether seeds alone could flip it.
    """
    at = (
        glue.filter(pl.col("checkpoint_fraction") == fraction)
        .sort(["median", "label"], descending=[True, False])
        .with_columns(
            (pl.col("max") - pl.col("min")).alias("spread"),
            pl.int_range(1, pl.len() + 1).alias("rank"),
        )
    )
    return at.with_columns(
        (pl.col("median") - pl.col("median").shift(-1)).alias("gap_to_next"),
        pl.max_horizontal("spread", pl.col("spread").shift(-1)).alias("spread_with_next"),
    ).with_columns((pl.col("gap_to_next") > pl.col("spread_with_next")).alias("beyond_spread"))


def labels_in_order(glue: pl.DataFrame, fraction: float) -> Sequence[str]:
    """Every label, best first at ``fraction``; labels with no score there follow by name."""
    ranked = ranking(glue, fraction)["label"].to_list()
    return ranked + sorted(set(glue["label"].to_list()) - set(ranked))
