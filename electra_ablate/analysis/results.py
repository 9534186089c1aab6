"""The tidy results table and the statistics every report is built from.

One row per (run × checkpoint × task × fine-tune seed × metric), values on the ×100 scale of
GLUE papers. Keeping every fine-tuning seed (instead of a pre-computed median) lets a report show
the spread, and lets a re-run add seeds without recomputing anything.

Each row names its task's ``family`` and says whether it enters that family's aggregate
(``in_aggregate``: the headline metric of a task the family averages), so a family's score is
computed from its own rows only and nothing here knows which families there are. Tables written
before families existed hold GLUE rows only, and are read that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from electra_ablate.analysis import stats
from electra_ablate.analysis.table_schemas import RESULTS_COLUMNS, RUNS_COLUMNS
from electra_ablate.evaluation.glue import task as glue
from electra_ablate.evaluation.task import (
    MAJORITY_SHARE,
    PREDICTION_FACTS,
    available_tasks,
    probe_tasks,
)
from electra_ablate.infra.errors import AblateError, InputError
from electra_ablate.infra.layout import (
    RESULTS_FILE,
    is_report_folder,
    is_study_folder,
    study_containing,
    study_folders_in,
)
from electra_ablate.infra.storage import atomic_file

RESULTS_SCHEMA = pl.DataFrame(RESULTS_COLUMNS.empty_table()).schema
"""``table_schemas.RESULTS_COLUMNS`` as polars types (one definition for writer and readers)."""

OPTIONAL_COLUMNS = ("variant", "family", "in_aggregate", "precision")  # filled in for older tables

LEGACY_FAMILY = glue.FAMILY
"""The family of every row of a table written before families existed (GLUE was the only one),
and the one whose columns a study with no evaluations writes into ``summary.csv``."""

RUNS_SCHEMA = pl.DataFrame(RUNS_COLUMNS.empty_table()).schema
"""``table_schemas.RUNS_COLUMNS`` as polars types."""
RUNS_OPTIONAL_COLUMNS = ("diverged", "curve")  # absent from tables written before them


def complete_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """A runs table with every column of ``RUNS_SCHEMA``, older tables' missing ones null."""
    missing = [n for n in RUNS_OPTIONAL_COLUMNS if n not in runs.columns]
    return runs.with_columns(pl.lit(None, dtype=RUNS_SCHEMA[n]).alias(n) for n in missing)


# A re-run that produces a row with the same key replaces the old row instead of duplicating it.
KEY_COLUMNS = ("study", "run_id", "checkpoint_fraction", "task", "finetune_seed", "metric")

# One point on a score-vs-FLOPs curve: an objective entry of the spec at one checkpoint.
CHECKPOINT_KEYS = ("label", "objective", "checkpoint_fraction")
BASELINE_OBJECTIVE = "none"  # = study.units.BASELINE_OBJECTIVE (kept free of torch imports)


def _as_frame(rows: pl.DataFrame | Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    frame = rows if isinstance(rows, pl.DataFrame) else pl.DataFrame(list(rows))
    if frame.width == 0:
        return pl.DataFrame(schema=RESULTS_SCHEMA)
    for column in ("variant", "precision"):  # null unless the study has variants; unrecorded
        if column not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(column))
    if "family" not in frame.columns:  # a table written before families: GLUE's rows only
        aggregated = pl.col("headline") & ~pl.col("task").is_in(glue.EXCLUDED_FROM_SCORE)
        frame = frame.with_columns(
            pl.lit(LEGACY_FAMILY).alias("family"), aggregated.alias("in_aggregate")
        )
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
        raise no_results_error(directory)
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


def no_results_error(directory: Path) -> InputError:
    """The one-line error for a folder without a results table, saying what is true of it: a
    folder of studies (``runs/``) names them, a folder inside a study names that study, and
    anything else (a study with nothing evaluated yet, an unrelated folder) says to run one."""
    directory = Path(directory)
    if not is_study_folder(directory):
        held = study_folders_in(directory)
        if held:
            reports = any(is_report_folder(p) for p in held)
            noun = "study or report folder" if reports else "study"
            many = "study or report folders" if reports else "studies"
            names = ", ".join(p.name for p in held[:3]) + (", …" if len(held) > 3 else "")
            count = f"1 {noun}" if len(held) == 1 else f"{len(held)} {many}"
            return InputError(
                f"{directory} holds {count} ({names}), not the results of one: give one of "
                f"them, e.g. {held[0]}"
            )
        study = study_containing(directory)
        if study is not None:
            return InputError(
                f"{directory} is a folder inside the study folder {study}, which holds the "
                f"results: give {study}"
            )
    return InputError(f"no results in {directory}: run `ablate run SPEC` first")


def task_order_key(task: str) -> tuple[int, str]:
    """Sort key putting tasks in the order their families list them (GLUE's as papers print
    them), family by family; tasks no installed family registers after, by name."""
    order = _registered_order()
    return order.get(task, len(order)), task


def _registered_order() -> dict[str, int]:
    try:
        return {name: i for i, name in enumerate(available_tasks())}
    except AblateError:  # a broken plugin must not stop a report from being read
        return {name: i for i, name in enumerate(glue.GLUE_TASKS)}


def ordered_tasks(tasks: Iterable[str]) -> list[str]:
    return sorted(set(tasks), key=task_order_key)


def families_in_order(results: pl.DataFrame) -> list[str]:
    """The families of a results table in the order the study evaluated them."""
    return results["family"].unique(maintain_order=True).to_list()


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


def _aggregated(results: pl.DataFrame) -> pl.DataFrame:
    """The rows that enter their family's aggregate, with how many tasks make it complete."""
    rows = results.filter(pl.col("in_aggregate"))
    return rows.with_columns(pl.col("task").n_unique().over("family").alias("_tasks"))


def model_scores(results: pl.DataFrame) -> pl.DataFrame:
    """Each family's score of every evaluated model (``score``): the mean over the family's
    aggregated tasks of their headline metric (GLUE: every task but WNLI).

    A (pre-training seed, fine-tuning seed) pair that lacks one of the family's tasks in the
    study gets no score, because a mean over fewer tasks is not comparable with the others.
    """
    keys = ["family", *CHECKPOINT_KEYS, "pretrain_seed", "finetune_seed"]
    return (
        _aggregated(results)
        .group_by(keys)
        .agg(
            pl.col("value").mean().alias("score"),
            pl.col("task").n_unique().alias("n_tasks"),
            pl.col("_tasks").first(),
            *_checkpoint_flops(),
        )
        .filter(pl.col("n_tasks") == pl.col("_tasks"))
        .drop("n_tasks", "_tasks")
        .sort(keys)
    )


def family_scores(results: pl.DataFrame) -> pl.DataFrame:
    """Per family and checkpoint: median, min, max and quartiles of ``model_scores``."""
    keys = ["family", *CHECKPOINT_KEYS]
    return (
        model_scores(results).group_by(keys).agg(*_spread("score"), *_checkpoint_flops()).sort(keys)
    )


def paper_scores(results: pl.DataFrame) -> pl.DataFrame:
    """The paper's aggregation, per family: each aggregated task's headline metric, median over
    the fine-tuning runs (the paper's median of 10), then the mean over tasks (``score_paper``);
    one number per checkpoint."""
    keys = ["family", *CHECKPOINT_KEYS]
    return (
        _aggregated(results)
        .group_by([*keys, "task"])
        .agg(
            pl.col("value").median().alias("task_median"),
            pl.col("_tasks").first(),
            *_checkpoint_flops(),
        )
        .group_by(keys)
        .agg(
            pl.col("task_median").mean().alias("score_paper"),
            pl.col("task").n_unique().alias("n_tasks"),
            pl.col("_tasks").first(),
            *_checkpoint_flops(),
        )
        .filter(pl.col("n_tasks") == pl.col("_tasks"))
        .drop("n_tasks", "_tasks")
        .sort(keys)
    )


def of_family(frame: pl.DataFrame, family: str) -> pl.DataFrame:
    return frame.filter(pl.col("family") == family)


SCORE_AGGREGATION_NAME = "median over models of the mean over tasks"
"""The per-model score every report ranks by (``family_scores``' median): each evaluated model's
mean over its family's aggregated tasks, then the median over models. Its confidence intervals
use the same statistic (``stats.MEDIAN_OF_MODEL_MEANS``)."""

INTERVAL_COLUMNS = ("ci_low", "ci_high", "n_pretrain", "n_finetune")


def score_aggregation() -> stats.Aggregation:
    return stats.MEDIAN_OF_MODEL_MEANS


def evaluated_only_at_start(results: pl.DataFrame) -> list[str]:
    """Labels evaluated at budget fraction 0 only: the no-pre-training baseline, a task's
    reference scorer. They stand beside every checkpoint of the others."""
    budgets = results.group_by("label").agg(pl.col("checkpoint_fraction").max())
    return budgets.filter(pl.col("checkpoint_fraction") == 0)["label"].sort().to_list()


def checkpoint_values(results: pl.DataFrame, fraction: float) -> pl.DataFrame:
    """The aggregated rows of one family at ``fraction``, with those of labels evaluated only
    at the start, as ``stats.arm_grids`` takes them: one value per (label, seeds, task)."""
    return at_checkpoint(results, fraction).filter(pl.col("in_aggregate"))


def score_intervals(results: pl.DataFrame) -> pl.DataFrame:
    """Per family, label and checkpoint: the 95% confidence interval of the per-model score
    (hierarchical bootstrap over pre-training, then fine-tuning seeds; ``stats.score``) and the
    numbers of pre-training and fine-tuning seeds behind it. NaN bounds: one model."""
    rows = []
    aggregated = results.filter(pl.col("in_aggregate"))
    keys = ["family", "checkpoint_fraction"]
    for (family, fraction), values in aggregated.group_by(keys, maintain_order=True):
        objective_of = dict(values.select("label", "objective").unique().iter_rows())
        for s in stats.arm_scores(values, score_aggregation()):
            rows.append(
                {
                    "family": family,
                    "label": s.label,
                    "objective": objective_of[s.label],
                    "checkpoint_fraction": fraction,
                    "ci_low": s.ci_low,
                    "ci_high": s.ci_high,
                    "n_pretrain": s.n_pretrain,
                    "n_finetune": s.n_finetune,
                }
            )
    schema = {
        "family": pl.String,
        "label": pl.String,
        "objective": pl.String,
        "checkpoint_fraction": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "n_pretrain": pl.Int64,
        "n_finetune": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


def with_intervals(scores: pl.DataFrame, intervals: pl.DataFrame) -> pl.DataFrame:
    """``family_scores`` with each row's interval columns (null where there is none)."""
    keys = ["family", *CHECKPOINT_KEYS]
    return scores.join(intervals, on=keys, how="left")


def family_scores_with_intervals(results: pl.DataFrame) -> pl.DataFrame:
    """``family_scores`` with each row's 95% CI and seed counts (``score_intervals``): every
    score a report prints, draws or writes into ``summary.csv``."""
    return with_intervals(family_scores(results), score_intervals(results))


def summary_table(scores: pl.DataFrame, families: Sequence[str] | None = None) -> pl.DataFrame:
    """``summary.csv``: per objective entry and checkpoint, each family's score per model:
    ``<family>_median``, ``_min``, ``_max``, the number of models (``n``), and, where ``scores``
    carries them (``with_intervals``), the 95% CI of that median and the seeds behind it
    (``ci_low``, ``ci_high``, ``n_pretrain``, ``n_finetune``). The first family's count and
    interval columns are unprefixed, the others' ``<family>_``-prefixed, so a GLUE study's
    summary reads ``glue_median, glue_min, glue_max, n, ci_low, ci_high, n_pretrain,
    n_finetune``. ``families`` gives their order (default: as in ``scores``). The
    no-pre-training baseline has objective ``none``, fraction 0."""
    keys = ["objective", "label", "checkpoint_fraction"]
    table, columns = None, []
    order = families if families is not None else families_in_order(scores)
    present = set(scores["family"].to_list())
    extra = [c for c in INTERVAL_COLUMNS if c in scores.columns]
    for i, family in enumerate(f for f in order if f in present):
        prefix = "" if i == 0 else f"{family}_"
        sources = ("median", "min", "max", "n", *extra)
        names = [
            f"{family}_median",
            f"{family}_min",
            f"{family}_max",
            f"{prefix}n",
            *(f"{prefix}{c}" for c in extra),
        ]
        part = of_family(scores, family).select(
            *keys, *(pl.col(c).alias(n) for c, n in zip(sources, names, strict=True))
        )
        table = part if table is None else table.join(part, on=keys, how="full", coalesce=True)
        columns += names
    if table is None:
        return pl.DataFrame()
    return (
        table.select(*keys, *columns)
        .rename({"checkpoint_fraction": "budget_fraction"})
        .sort("objective", "label", "budget_fraction")
    )


def pretraining_only_summary(runs: pl.DataFrame, fractions: Sequence[float]) -> pl.DataFrame:
    """``summary.csv`` of a study with no fine-tuning: the same columns, one row per objective
    entry and kept checkpoint, no GLUE score (``n`` = 0), so every study's summary reads alike."""
    entries = runs.select("objective", "label").unique(maintain_order=True)
    checkpoints = pl.DataFrame({"budget_fraction": [float(f) for f in fractions]})
    return (
        entries.join(checkpoints, how="cross")
        .with_columns(
            *(
                pl.lit(None, pl.Float64).alias(f"{LEGACY_FAMILY}_{c}")
                for c in ("median", "min", "max")
            ),
            pl.lit(0, pl.UInt32).alias("n"),
            pl.lit(None, pl.Float64).alias("ci_low"),
            pl.lit(None, pl.Float64).alias("ci_high"),
            pl.lit(0, pl.Int64).alias("n_pretrain"),
            pl.lit(0, pl.Int64).alias("n_finetune"),
        )
        .sort("objective", "label", "budget_fraction")
    )


def task_scores(results: pl.DataFrame) -> pl.DataFrame:
    """Median, min, max and quartiles of every task metric across all seeds, per checkpoint."""
    keys = ["family", *CHECKPOINT_KEYS, "task", "metric", "headline", "in_aggregate"]
    return results.group_by(keys).agg(*_spread("value"), *_checkpoint_flops()).sort(keys)


PROBE_COLUMNS = (
    "objective",
    "label",
    "budget_fraction",
    "task",
    "metric",
    "median",
    "min",
    "max",
    "n",
)


def probe_summary(tasks: pl.DataFrame) -> pl.DataFrame:
    """``probes.csv``: per objective entry, checkpoint, probe task and metric, the median, min and
    max over every seed and the number of values (``n``); empty when the study ran no probe.
    ``tasks`` is ``task_scores``; which tasks are probes, the registry says
    (``evaluation.task.probe_tasks``). Reference scorers are rows of their own, their name as
    objective and label, fraction 0."""
    probes = probe_tasks(tasks["task"].unique(maintain_order=True).to_list())
    return (
        tasks.filter(pl.col("task").is_in(probes))
        .rename({"checkpoint_fraction": "budget_fraction"})
        .select(PROBE_COLUMNS)
        .sort("objective", "label", "budget_fraction", "task", "metric")
    )


def constant_tasks(tasks: pl.DataFrame, fraction: float) -> dict[str, float]:
    """Tasks whose headline metric is one value for every model at ``fraction`` of the budget,
    the no-pre-training baseline (evaluated at 0) included: every encoder predicts the same
    thing (one class, say), so the task tells the objectives nothing. ``tasks`` is
    ``task_scores``; a reference scorer (a non-model row at 0) does not count, and a task needs
    two models to be called constant."""
    headline = tasks.filter(pl.col("headline"))
    models = headline.filter(
        (pl.col("checkpoint_fraction") == fraction)
        | ((pl.col("checkpoint_fraction") == 0) & (pl.col("objective") == BASELINE_OBJECTIVE))
    )
    spread = models.group_by("task").agg(
        pl.col("min").min().alias("low"),
        pl.col("max").max().alias("high"),
        pl.col("label").n_unique().alias("models"),
    )
    constant = spread.filter((pl.col("low") == pl.col("high")) & (pl.col("models") > 1))
    return dict(constant.select("task", "low").sort("task").iter_rows())


def at_checkpoint(frame: pl.DataFrame, fraction: float) -> pl.DataFrame:
    """The rows of ``frame`` (results or ``task_scores``) at ``fraction``, with those of labels
    evaluated only at the start (the no-pre-training baseline, references) beside them."""
    start = evaluated_only_at_start(frame)
    return frame.filter((pl.col("checkpoint_fraction") == fraction) | pl.col("label").is_in(start))


def score_rows_only(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` less the rows that say what predictions are made of
    (``evaluation.task.PREDICTION_FACTS``): what tables of metrics list."""
    return frame.filter(~pl.col("metric").is_in(PREDICTION_FACTS))


def finetuned_tasks(names: Iterable[str]) -> list[str]:
    """The registered tasks among ``names`` that fine-tune the encoder with a head (``needs``
    ``finetuned_head``): those whose records carry ``PREDICTION_FACTS`` where they classify. A
    task whose package is not installed here is left out."""
    tasks = _known_tasks()
    return [name for name in names if name in tasks and tasks[name].needs == "finetuned_head"]


def _known_tasks() -> dict[str, Any]:
    try:
        return available_tasks()
    except AblateError:  # a broken plugin must not stop a report from being read
        return dict(glue.GLUE_TASKS)


def constant_aggregates(tasks: pl.DataFrame, fraction: float) -> dict[str, list[str]]:
    """Labels whose aggregate at ``fraction`` (the baseline's at 0) is constant predictions on
    every classification task it averages: every fine-tune of every such task put all its dev
    predictions in one class (``MAJORITY_SHARE`` 100), so the aggregate measures which
    constant each landed on, plus whatever the family's other tasks add. Each maps to those
    other aggregated tasks (those with no majority share: regression, STS-B), empty when there
    are none. ``tasks`` is one family's ``task_scores``; a label whose records predate the
    share (no share rows) is never flagged."""
    rows = at_checkpoint(tasks, fraction)
    flagged: dict[str, list[str]] = {}
    for label in sorted(set(rows["label"].to_list())):
        own = rows.filter(pl.col("label") == label)
        averaged = set(own.filter(pl.col("in_aggregate"))["task"].to_list())
        shares = own.filter((pl.col("metric") == MAJORITY_SHARE) & pl.col("task").is_in(averaged))
        if shares.is_empty() or shares["min"].min() < 100.0:
            continue
        flagged[label] = ordered_tasks(averaged - set(shares["task"].to_list()))
    return flagged


def common_tasks(results: pl.DataFrame, fraction: float) -> list[str] | None:
    """Where the labels at ``fraction`` (with the baseline's rows at 0) do not all have the same
    aggregated tasks, the tasks every one of them has, in the family's order: the only
    like-for-like aggregate (a label missing a task has no aggregate of the family's, and one
    over its own tasks compares nothing). None where every label has every task, or none is
    common to all. ``results`` is one family's rows."""
    rows = at_checkpoint(results.filter(pl.col("in_aggregate")), fraction)
    held = [set(t) for t in rows.group_by("label").agg(pl.col("task").unique())["task"].to_list()]
    if len(held) < 2:
        return None
    common = set.intersection(*held)
    if not common or common == set.union(*held):
        return None
    return ordered_tasks(common)


def final_fraction(results: pl.DataFrame) -> float:
    """The study's last checkpoint: the largest budget fraction any run reached."""
    return float(results["checkpoint_fraction"].max())


def ranking(scores: pl.DataFrame, fraction: float) -> pl.DataFrame:
    """Labels ranked by one family's median score at ``fraction``, with each gap to the next one
    down; equal medians share a rank (1, 1, 3), listed by label. Whether a gap is more than
    seeds can make is the bootstrap's to say (``stats``), not a comparison of min–max ranges."""
    at = (
        scores.filter(pl.col("checkpoint_fraction") == fraction)
        .sort(["median", "label"], descending=[True, False])
        .with_columns(pl.col("median").rank("min", descending=True).cast(pl.Int64).alias("rank"))
    )
    return at.with_columns((pl.col("median") - pl.col("median").shift(-1)).alias("gap_to_next"))


def labels_in_order(scores: pl.DataFrame, fraction: float) -> Sequence[str]:
    """Every label, best first at ``fraction`` by one family's score; labels with no score
    there follow by name."""
    ranked = ranking(scores, fraction)["label"].to_list()
    return ranked + sorted(set(scores["label"].to_list()) - set(ranked))
