"""Confidence intervals, paired differences, verdicts and seed plans for a study's arms.

A study's score for an arm (an objective entry) comes from models pre-trained with one or more
seeds, each fine-tuned with several seeds, on a fixed set of tasks. Both kinds of seed move the
score: three pre-training seeds of one ELECTRA config span 1.3 GLUE-5 points in
``reports/generator_size``, more than most gaps between objectives there. This module turns a
tidy table of per-model values into what a reviewer asks for:

- each arm's score with a 95% confidence interval from a hierarchical bootstrap over seeds
  (tasks fixed), and the number of pre-training and fine-tuning seeds behind it;
- each pair's difference with its 95% CI, **paired** where the design pairs: arms trained with
  the same pre-training seed see the same data order, and the same fine-tuning seed gives the
  same head initialisation and data order, so the bootstrap draws the same seeds for both arms;
- a verdict on a claim "A > B" or "A ≈ B" read from that CI alone;
- from the variance measured between pre-training seeds and between fine-tuning seeds, how
  many seeds would resolve a gap of a given size.

It knows nothing of GLUE: the caller (an evaluation family) picks the tasks and the headline
metric of one checkpoint, and passes an :class:`Aggregation` (or any vectorised callable).

**The bootstrap.** An arm's values form a grid ``[pre-training seed, fine-tuning seed, task]``.
Each resample draws, with replacement, the units of the grid's top varying level: pre-training
seeds (each keeping its fine-tuning seeds) when the arm has several, else fine-tuning seeds.
Drawing fine-tuning seeds again inside each drawn pre-training seed (``nested=True``) counts
the fine-tuning noise twice, since each pre-training seed's mean already carries it (Davison &
Hinkley 1997, §3.8; Field & Welsh 2007): at 3 × 3 seeds its intervals come out 1.3–1.4× as
wide and cover 0.99–1.00 of the time for a nominal 0.95, so it is an option, not the default.

**The interval.** With the 1–5 seeds a study has, a percentile interval is far too narrow: the
bootstrap's plug-in variance is ``(k - 1) / k`` of the sample's and a normal quantile stands in
for Student's; at 1 × 3 seeds it is the range of three models and covers 0.67–0.76 of the
time, at 3 × 3 0.72–0.85. The default (``"t"``) is the estimate ± ``t(k - 1)`` × the bootstrap
standard error × ``sqrt(k / (k - 1))``, ``k`` the number of resampled units: near-exact for a
mean of per-model scores (0.93–0.96 at 1 × 3, 3 × 3 and 5 × 5 seeds), conservative for the
median-based scores at 3 seeds (0.97–1.00), and about the percentile interval at many seeds.
``interval="percentile"`` gives the plain percentile interval. The coverages are measured on
simulated studies by ``bench/stats_coverage.py``
(``docs/reports.md#scores-and-differences-benchstats_coveragepy``).

A notebook gets these numbers exactly as a report prints them from ``electra_ablate.api``
(``scores``, ``differences``, ``claims``: the stable face). This module's own use, on the tables
a study writes (``results.read_results``), for the GLUE family's per-model score at the last
checkpoint::

    from pathlib import Path

    from electra_ablate.analysis import stats
    from electra_ablate.analysis.results import (
        checkpoint_values,
        final_fraction,
        of_family,
        read_results,
    )

    results = read_results(Path("runs/objectives"))
    glue = of_family(results, "glue")
    # one value per (label, pre-training seed, fine-tuning seed, task): the last checkpoint's,
    # and the no-pre-training baseline's (evaluated at the start only)
    values = checkpoint_values(glue, final_fraction(results))
    for s in stats.arm_scores(values, stats.MEDIAN_OF_MODEL_MEANS):
        print(s.label, f"{s.value:.1f} [{s.ci_low:.1f}, {s.ci_high:.1f}]", s.caveat)
    for d in stats.pair_differences(values, stats.MEDIAN_OF_MODEL_MEANS):
        print(d.label_a, "-", d.label_b, f"{d.value:+.2f} [{d.ci_low:+.2f}, {d.ci_high:+.2f}]")
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Literal

import numpy as np
from scipy.special import stdtrit  # Student's t quantile; scipy.stats costs ~0.5 s to import

if TYPE_CHECKING:  # polars is imported where frames are read: a GPU node's job path has none
    import polars as pl

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0
POWER = 0.8
"""Planned seeds resolve a claim of the paper's size in this share of studies."""

FINETUNE_NOISE_ONLY = "the CI covers fine-tuning noise only"
"""What a figure backed by a single pre-training seed must say beside its interval."""

Relation = Literal[">", "≈"]
Interval = Literal["t", "percentile"]

SUPPORTED = "supported"
CONTRADICTED = "contradicted"
UNRESOLVED = "unresolved at this power"

VALUE_COLUMNS = ("label", "pretrain_seed", "finetune_seed", "task", "value")
MODEL_KEY = ("label", "pretrain_seed", "finetune_seed", "task")

PRETRAIN_OPTIONS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20)
FINETUNE_OPTIONS = (1, 2, 3, 5, 10)

ZERO_VARIANCE = 1e-12
"""A measured variance at or below this is none: the models' scores were identical (up to
floating-point rounding of the same numbers)."""

FEW_SEEDS = 3
"""An interval resting on fewer resampled units (pre-training seeds, or fine-tuning seeds with
one pre-training seed) has a t critical value of 12.7 at 2 and a spread estimated from two
numbers: a verdict read from it is said to rest on so few."""

FINETUNE_COST = 1 / 3
"""One fine-tuning seed (every task, every kept checkpoint) relative to one pre-training run: in
the objectives study (``reports/objectives``, 2 CPU cores) a run took 17–21 CPU-minutes and a
fine-tune about 26 s, so a seed's 5 tasks × 3 checkpoints cost about 6.5 minutes."""

_CHUNK = 2_000  # resamples aggregated at once, to bound memory on large grids


# --- aggregations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregation:
    """How a family turns an arm's ``[..., pretrain, finetune, task]`` values into one score.

    ``function`` must reduce the last three axes and keep any leading ones (the bootstrap
    passes thousands of resampled grids at once). ``variance_factor`` is the statistic's
    variance relative to a plain mean's for normal data (π/2 for a median); seed plans use it.
    """

    name: str
    function: Callable[[np.ndarray], np.ndarray]
    variance_factor: float = 1.0

    def __call__(self, values: np.ndarray) -> np.ndarray:
        return self.function(values)


def _models(values: np.ndarray) -> np.ndarray:
    """``[..., P, F, T]`` → ``[..., P·F, T]``: every fine-tuned model of the arm in one axis."""
    return values.reshape(*values.shape[:-3], -1, values.shape[-1])


def _median_of_model_means(values: np.ndarray) -> np.ndarray:
    return np.median(_models(values).mean(axis=-1), axis=-1)


def _mean_of_model_means(values: np.ndarray) -> np.ndarray:
    return _models(values).mean(axis=(-1, -2))


def _mean_of_task_medians(values: np.ndarray) -> np.ndarray:
    return np.median(_models(values), axis=-2).mean(axis=-1)


MEDIAN_OF_MODEL_MEANS = Aggregation(
    "median over models of the mean over tasks", _median_of_model_means, math.pi / 2
)
MEAN_OF_MODEL_MEANS = Aggregation("mean over models of the mean over tasks", _mean_of_model_means)
MEAN_OF_TASK_MEDIANS = Aggregation(
    "mean over tasks of the median over models (the paper's)", _mean_of_task_medians, math.pi / 2
)


def _as_aggregation(aggregation: Aggregation | Callable[[np.ndarray], np.ndarray]) -> Aggregation:
    if isinstance(aggregation, Aggregation):
        return aggregation
    return Aggregation(getattr(aggregation, "__name__", "custom"), aggregation)


# --- grids ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmGrid:
    """One arm's values: ``values[i, j, k]`` is pre-training seed ``pretrain_seeds[i]``,
    fine-tuning seed ``finetune_seeds[j]``, task ``tasks[k]``. ``left_out`` counts the models
    dropped to make the grid complete (a model lacking a task, or a fine-tuning seed missing
    under some pre-training seed)."""

    label: str
    pretrain_seeds: tuple[int, ...]
    finetune_seeds: tuple[int, ...]
    tasks: tuple[str, ...]
    values: np.ndarray
    left_out: int = 0

    @property
    def n_pretrain(self) -> int:
        return len(self.pretrain_seeds)

    @property
    def n_finetune(self) -> int:
        return len(self.finetune_seeds)

    @property
    def units(self) -> int:
        """How many units the bootstrap resamples: pre-training seeds if several, else
        fine-tuning seeds."""
        return self.n_pretrain if self.n_pretrain > 1 else self.n_finetune

    def model_scores(self) -> np.ndarray:
        """``[P, F]``: each fine-tuned model's mean over tasks, what variance components and
        seed plans are measured on."""
        return self.values.mean(axis=-1)


def arm_grids(values: pl.DataFrame, tasks: Sequence[str] | None = None) -> dict[str, ArmGrid]:
    """Each label's values as a complete grid, in the frame's label order.

    ``values`` holds one checkpoint's values: at least ``label``, ``pretrain_seed``,
    ``finetune_seed``, ``task`` and ``value``, one row per (label, seeds, task). Tasks are
    ``tasks``, by default those of the whole frame: a model lacking one is left out, as a mean
    over fewer tasks is not comparable. An arm with no complete model is left out.
    """
    import polars as pl

    missing = [c for c in VALUE_COLUMNS if c not in values.columns]
    if missing:
        raise ValueError(f"values lack columns {missing}")
    frame = values.select(VALUE_COLUMNS).filter(pl.col("value").is_not_nan())
    repeated = frame.group_by(MODEL_KEY).len().filter(pl.col("len") > 1)
    if repeated.height:
        first = repeated.row(0, named=True)
        raise ValueError(
            "more than one value per (label, pretrain_seed, finetune_seed, task), e.g. "
            f"{first['label']!r} seeds {first['pretrain_seed']}/{first['finetune_seed']} on "
            f"{first['task']!r}: keep one checkpoint and one metric per task"
        )
    tasks = tuple(sorted(frame["task"].unique().to_list() if tasks is None else tasks))
    grids = {}
    for label in frame["label"].unique(maintain_order=True).to_list():
        grid = _grid(label, frame.filter(pl.col("label") == label), tasks)
        if grid is not None:
            grids[label] = grid
    return grids


def _grid(label: str, rows: pl.DataFrame, tasks: tuple[str, ...]) -> ArmGrid | None:
    pretrain = sorted(rows["pretrain_seed"].unique().to_list())
    finetune = sorted(rows["finetune_seed"].unique().to_list())
    full = np.full((len(pretrain), len(finetune), len(tasks)), np.nan)
    p_at = {s: i for i, s in enumerate(pretrain)}
    f_at = {s: i for i, s in enumerate(finetune)}
    t_at = {s: i for i, s in enumerate(tasks)}
    for p, f, t, v in rows.select("pretrain_seed", "finetune_seed", "task", "value").iter_rows():
        full[p_at[p], f_at[f], t_at[t]] = v
    complete = ~np.isnan(full).any(axis=-1)
    keep_p = complete.any(axis=1)
    keep_f = complete[keep_p].all(axis=0) if keep_p.any() else np.zeros(len(finetune), bool)
    if not keep_f.any():
        return None
    return ArmGrid(
        label=label,
        pretrain_seeds=tuple(int(s) for s, k in zip(pretrain, keep_p, strict=True) if k),
        finetune_seeds=tuple(int(s) for s, k in zip(finetune, keep_f, strict=True) if k),
        tasks=tasks,
        values=full[np.ix_(keep_p, keep_f)],
        left_out=int(complete.sum() - keep_p.sum() * keep_f.sum()),
    )


# --- bootstrap ------------------------------------------------------------------------------


def _rng(seed: int, *labels: str) -> np.random.Generator:
    """One generator per arm or pair, so adding an arm to a study changes no other interval."""
    return np.random.default_rng([seed, *(zlib.crc32(label.encode()) for label in labels)])


Draws = tuple[np.ndarray, np.ndarray]
"""Indices ``([R, P], [R, P, F])`` into an arm's grid: each resample's pre-training seeds and,
for each drawn one, its fine-tuning seeds."""


def _draws(
    grid: ArmGrid,
    resamples: int,
    pretrain: np.ndarray,
    finetune: np.ndarray,
    nested: bool,
) -> Draws:
    """Indices ``([R, P], [R, P, F])`` into ``grid.values`` for each resample: ``pretrain`` is
    the pre-training draw; fine-tuning seeds are redrawn (from ``finetune``) only where they are
    the top level (one pre-training seed) or ``nested`` asks, else kept as they are."""
    p, f = grid.n_pretrain, grid.n_finetune
    if nested or p == 1:
        return pretrain, finetune[:, :p, :]
    return pretrain, np.broadcast_to(np.arange(f), (resamples, p, f))


def replicates(grid: ArmGrid, draws: Draws, aggregation: Aggregation) -> np.ndarray:
    """``[R]``: the aggregation of ``grid`` under each resample of ``draws``."""
    pretrain, finetune = draws
    out = np.empty(len(pretrain))
    for start in range(0, len(pretrain), _CHUNK):
        rows = slice(start, start + _CHUNK)
        out[rows] = aggregation(grid.values[pretrain[rows][:, :, None], finetune[rows]])
    return out


def interval_bounds(
    estimate: float, values: np.ndarray, units: int, confidence: float, interval: Interval
) -> tuple[float, float, float]:
    """(low, high, standard error) of a ``confidence`` interval around ``estimate``."""
    if units < 2:
        return math.nan, math.nan, math.nan
    se = float(standard_error(values, units))
    if interval == "percentile":
        low, high = np.quantile(values, [(1 - confidence) / 2, (1 + confidence) / 2])
        return float(low), float(high), se
    if interval != "t":
        raise ValueError(f"interval must be 't' or 'percentile', not {interval!r}")
    half = t_critical(units, confidence) * se
    return estimate - half, estimate + half, se


def standard_error(values: np.ndarray, units: int) -> np.ndarray:
    """The bootstrap standard error of a statistic from its replicates (axis 0), with the
    ``sqrt(k / (k - 1))`` correction of the default interval (``k = units``, at least 2)."""
    return values.std(axis=0, ddof=1) * math.sqrt(units / (units - 1))


def t_critical(units: int, confidence: float = CONFIDENCE) -> float:
    """Student's ``t(units - 1)`` quantile of a two-sided ``confidence`` interval."""
    return float(stdtrit(units - 1, (1 + confidence) / 2))


def paired_draws(
    a: ArmGrid,
    b: ArmGrid,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    *,
    paired: bool = True,
    nested: bool = False,
) -> tuple[Draws, Draws, bool]:
    """The bootstrap draws of two arms compared with each other (see :func:`difference`), and
    whether they are paired. They depend only on the arms' seeds and labels, so any statistic
    of the two arms' grids (a difference at one budget, a curve over several budgets of the
    same models) sees the same resamples."""
    rng = _rng(seed, a.label, b.label)
    share_pretrain = paired and a.pretrain_seeds == b.pretrain_seeds
    share_finetune = paired and a.finetune_seeds == b.finetune_seeds
    pre_a = rng.integers(a.n_pretrain, size=(resamples, a.n_pretrain))
    pre_b = pre_a if share_pretrain else rng.integers(b.n_pretrain, size=(resamples, b.n_pretrain))
    slots = max(a.n_pretrain, b.n_pretrain)
    fine_a = rng.integers(a.n_finetune, size=(resamples, slots, a.n_finetune))
    fine_b = (
        fine_a
        if share_finetune
        else rng.integers(b.n_finetune, size=(resamples, slots, b.n_finetune))
    )
    if nested:
        shared = share_pretrain and share_finetune
    elif a.n_pretrain > 1 and b.n_pretrain > 1:
        shared = share_pretrain
    else:
        shared = a.n_pretrain == b.n_pretrain == 1 and share_finetune
    return (
        _draws(a, resamples, pre_a, fine_a, nested),
        _draws(b, resamples, pre_b, fine_b, nested),
        shared,
    )


class SeedCounted:
    """What a figure backed by ``n_pretrain`` pre-training seeds must say beside its interval."""

    n_pretrain: int

    @property
    def finetune_noise_only(self) -> bool:
        return self.n_pretrain == 1

    @property
    def caveat(self) -> str:
        return FINETUNE_NOISE_ONLY if self.finetune_noise_only else ""


@dataclass(frozen=True)
class Score(SeedCounted):
    """An arm's score and its confidence interval (NaN with a single model)."""

    label: str
    value: float
    ci_low: float
    ci_high: float
    n_pretrain: int
    n_finetune: int
    left_out: int = 0


@dataclass(frozen=True)
class Difference(SeedCounted):
    """``label_a`` minus ``label_b``, its confidence interval and standard error, and how it
    was drawn: ``paired`` when the arms share the seeds the bootstrap resamples, so each
    resample draws the same seeds for both. ``n_pretrain``/``n_finetune``: the smaller arm's.
    ``dof``: degrees of freedom of the interval (resampled units − 1)."""

    label_a: str
    label_b: str
    value: float
    ci_low: float
    ci_high: float
    se: float
    dof: int
    n_pretrain: int
    n_finetune: int
    paired: bool


def score(
    grid: ArmGrid,
    aggregation: Aggregation | Callable[[np.ndarray], np.ndarray] = MEDIAN_OF_MODEL_MEANS,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
    interval: Interval = "t",
    nested: bool = False,
) -> Score:
    """One arm's score with its bootstrap confidence interval."""
    aggregation = _as_aggregation(aggregation)
    rng = _rng(seed, grid.label)
    pretrain = rng.integers(grid.n_pretrain, size=(resamples, grid.n_pretrain))
    finetune = rng.integers(grid.n_finetune, size=(resamples, grid.n_pretrain, grid.n_finetune))
    values = replicates(grid, _draws(grid, resamples, pretrain, finetune, nested), aggregation)
    estimate = float(aggregation(grid.values))
    low, high, _ = interval_bounds(estimate, values, grid.units, confidence, interval)
    return Score(grid.label, estimate, low, high, grid.n_pretrain, grid.n_finetune, grid.left_out)


def difference(
    a: ArmGrid,
    b: ArmGrid,
    aggregation: Aggregation | Callable[[np.ndarray], np.ndarray] = MEDIAN_OF_MODEL_MEANS,
    *,
    paired: bool = True,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
    interval: Interval = "t",
    nested: bool = False,
) -> Difference:
    """``a``'s score minus ``b``'s, with a bootstrap confidence interval.

    Pairing: arms with the same pre-training seeds get the same pre-training draw; arms with
    the same fine-tuning seeds get the same fine-tuning draw for their i-th drawn pre-training
    seed. So two arms pre-trained with seeds 0, 1, 2 are paired on pre-training seeds, and two
    arms with one pre-training seed each (e.g. an objective and the no-pre-training baseline,
    whose one "pre-training seed" is its initialisation) are paired on fine-tuning seeds. An arm
    with several pre-training seeds against the baseline is unpaired by default: the baseline
    has no pre-training seed to share (with ``nested``, they share the fine-tuning draw of the
    first drawn pre-training seed). ``paired=False`` draws every arm independently.
    """
    aggregation = _as_aggregation(aggregation)
    draws_a, draws_b, shared = paired_draws(a, b, resamples, seed, paired=paired, nested=nested)
    values = replicates(a, draws_a, aggregation) - replicates(b, draws_b, aggregation)
    estimate = float(aggregation(a.values) - aggregation(b.values))
    units = min(a.units, b.units)
    low, high, se = interval_bounds(estimate, values, units, confidence, interval)
    return Difference(
        label_a=a.label,
        label_b=b.label,
        value=estimate,
        ci_low=low,
        ci_high=high,
        se=se,
        dof=units - 1,
        n_pretrain=min(a.n_pretrain, b.n_pretrain),
        n_finetune=min(a.n_finetune, b.n_finetune),
        paired=shared,
    )


def arm_scores(
    values: pl.DataFrame,
    aggregation: Aggregation | Callable[[np.ndarray], np.ndarray] = MEDIAN_OF_MODEL_MEANS,
    **options,
) -> list[Score]:
    """Every arm's score in ``values`` (see :func:`arm_grids`), in the frame's label order.
    ``options`` go to :func:`score`."""
    return [score(grid, aggregation, **options) for grid in arm_grids(values).values()]


def pair_differences(
    values: pl.DataFrame,
    aggregation: Aggregation | Callable[[np.ndarray], np.ndarray] = MEDIAN_OF_MODEL_MEANS,
    pairs: Iterable[tuple[str, str]] | None = None,
    **options,
) -> list[Difference]:
    """The difference of each pair ``(a, b)`` (default: every pair, in the frame's label
    order). A pair naming a label with no complete model is skipped. ``options`` go to
    :func:`difference`."""
    grids = arm_grids(values)
    wanted = combinations(grids, 2) if pairs is None else pairs
    return [
        difference(grids[a], grids[b], aggregation, **options)
        for a, b in wanted
        if a in grids and b in grids
    ]


def score_table(scores: Sequence[Score]) -> pl.DataFrame:
    """One row per arm: ``label, score, ci_low, ci_high, n_pretrain, n_finetune``."""
    import polars as pl

    return pl.DataFrame(
        {
            "label": [s.label for s in scores],
            "score": [s.value for s in scores],
            "ci_low": [s.ci_low for s in scores],
            "ci_high": [s.ci_high for s in scores],
            "n_pretrain": [s.n_pretrain for s in scores],
            "n_finetune": [s.n_finetune for s in scores],
        },
        schema={
            "label": pl.String,
            "score": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "n_pretrain": pl.Int64,
            "n_finetune": pl.Int64,
        },
    )


def difference_table(differences: Sequence[Difference]) -> pl.DataFrame:
    """One row per pair: ``a, b, difference, ci_low, ci_high, se, dof, paired, n_pretrain,
    n_finetune`` (``a`` minus ``b``)."""
    import polars as pl

    return pl.DataFrame(
        {
            "a": [d.label_a for d in differences],
            "b": [d.label_b for d in differences],
            "difference": [d.value for d in differences],
            "ci_low": [d.ci_low for d in differences],
            "ci_high": [d.ci_high for d in differences],
            "se": [d.se for d in differences],
            "dof": [d.dof for d in differences],
            "paired": [d.paired for d in differences],
            "n_pretrain": [d.n_pretrain for d in differences],
            "n_finetune": [d.n_finetune for d in differences],
        },
        schema={
            "a": pl.String,
            "b": pl.String,
            "difference": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "se": pl.Float64,
            "dof": pl.Int64,
            "paired": pl.Boolean,
            "n_pretrain": pl.Int64,
            "n_finetune": pl.Int64,
        },
    )


# --- verdicts -------------------------------------------------------------------------------


def verdict(relation: Relation, ci_low: float, ci_high: float, margin: float | None = None) -> str:
    """A claim's verdict from the CI of A − B alone.

    ``">"`` (A > B): supported if the CI lies above 0, contradicted if below 0, else
    unresolved. ``"≈"`` (A ≈ B within ``margin``): supported if the CI lies within
    ``[-margin, margin]``, contradicted if it lies entirely outside it, else unresolved. A
    missing interval (one model) is unresolved.
    """
    if math.isnan(ci_low) or math.isnan(ci_high):
        return UNRESOLVED
    if relation == ">":
        if ci_low > 0:
            return SUPPORTED
        return CONTRADICTED if ci_high < 0 else UNRESOLVED
    if relation == "≈":
        if margin is None or margin <= 0:
            raise ValueError("an '≈' claim needs a positive equivalence margin")
        if -margin <= ci_low and ci_high <= margin:
            return SUPPORTED
        return CONTRADICTED if ci_low > margin or ci_high < -margin else UNRESOLVED
    raise ValueError(f"relation must be '>' or '≈', not {relation!r}")


# --- variance components and seed plans -----------------------------------------------------


@dataclass(frozen=True)
class VarianceComponents:
    """Variance of a per-model score (or of a paired difference of them) split by seed.

    ``between_pretrain``: variance of the pre-training seed's effect; ``None`` when it was not
    measured (one pre-training seed) and no outside estimate was given. ``within_pretrain``:
    variance between fine-tuning seeds of one pre-trained model. ``source`` says where they
    come from.
    """

    between_pretrain: float | None
    within_pretrain: float
    n_pretrain: int
    n_finetune: int
    source: str

    @property
    def between_measured(self) -> bool:
        return self.between_pretrain is not None

    @property
    def zero(self) -> bool:
        """No spread was measured at all: every model scored the same (e.g. each predicted a
        task's majority class). That says the variance is unknown, not that it is 0: a plan
        from it would promise an interval of width 0 from any seeds."""
        return self.within_pretrain <= ZERO_VARIANCE and (self.between_pretrain or 0.0) <= (
            ZERO_VARIANCE
        )


def variance_components(model_scores: np.ndarray, source: str = "measured") -> VarianceComponents:
    """One-way random-effects estimates (method of moments) from a ``[P, F]`` grid of
    per-model scores: the mean within-pre-training-seed variance, and the variance of the
    pre-training seeds' means less the part fine-tuning noise explains (clipped at 0). With
    one fine-tuning seed the two cannot be told apart and all of it counts as between."""
    scores = np.asarray(model_scores, dtype=float)
    p, f = scores.shape
    within = float(scores.var(axis=1, ddof=1).mean()) if f > 1 else 0.0
    between = None
    if p > 1:
        between = max(0.0, float(scores.mean(axis=1).var(ddof=1)) - within / f)
    return VarianceComponents(between, within, p, f, source)


def between_pretrain_from_scores(
    seed_scores: Sequence[float], within: float = 0.0, n_finetune: int = 1
) -> float:
    """An outside estimate of the between-pre-training-seed variance from one config's score
    at several pre-training seeds (e.g. another study's), less the fine-tuning noise of
    ``within`` over ``n_finetune`` seeds if known (else an upper bound). For example the
    generator-size study's seeds 0, 1, 2 at GLUE-5 34.1, 35.5, 35.1 give 0.52."""
    if len(seed_scores) < 2:
        raise ValueError("need scores of at least two pre-training seeds")
    return max(0.0, float(np.var(seed_scores, ddof=1)) - within / n_finetune)


def difference_components(
    a: ArmGrid, b: ArmGrid, *, paired: bool = True, external_between: float | None = None
) -> VarianceComponents:
    """Variance components of A − B per model.

    Arms with the same pre-training and fine-tuning seeds are measured on their paired
    per-model differences, which keeps whatever the shared seeds make the arms share. Other
    pairs add the arms' own components (independent draws). ``external_between`` — one arm's
    between-pre-training variance from elsewhere (see :func:`between_pretrain_from_scores`) —
    stands in where this study cannot measure it; a difference of two arms counts it twice
    (their pre-training effects taken as independent, the cautious choice).
    """
    if paired and a.pretrain_seeds == b.pretrain_seeds and a.finetune_seeds == b.finetune_seeds:
        found = variance_components(
            a.model_scores() - b.model_scores(),
            f"measured on paired differences ({a.label}"
            f" − {b.label}, {a.n_pretrain} × {a.n_finetune} seeds)",
        )
    else:
        ca, cb = variance_components(a.model_scores()), variance_components(b.model_scores())
        between = (
            ca.between_pretrain + cb.between_pretrain
            if ca.between_measured and cb.between_measured
            else None
        )
        found = VarianceComponents(
            between,
            ca.within_pretrain + cb.within_pretrain,
            min(ca.n_pretrain, cb.n_pretrain),
            min(ca.n_finetune, cb.n_finetune),
            f"measured on each arm ({a.label}, {b.label}), unpaired",
        )
    if found.between_measured or external_between is None:
        return found
    return VarianceComponents(
        2 * external_between,
        found.within_pretrain,
        found.n_pretrain,
        found.n_finetune,
        f"{found.source}; between pre-training seeds from outside ({external_between:.3g} per"
        " arm, doubled)",
    )


def _units(n_pretrain: int, n_finetune: int) -> int:
    return n_pretrain if n_pretrain > 1 else n_finetune


def expected_se(
    components: VarianceComponents,
    n_pretrain: int,
    n_finetune: int,
    variance_factor: float = 1.0,
) -> float:
    """The standard error a study with these seeds should see, for the mean of per-model
    scores times ``variance_factor``. With one pre-training seed only fine-tuning noise
    enters (that is all its interval can cover)."""
    within = components.within_pretrain / (n_pretrain * n_finetune)
    between = (components.between_pretrain or 0.0) / n_pretrain if n_pretrain > 1 else 0.0
    return math.sqrt(variance_factor * (between + within))


def expected_half_width(
    components: VarianceComponents,
    n_pretrain: int,
    n_finetune: int,
    *,
    variance_factor: float = 1.0,
    confidence: float = CONFIDENCE,
) -> float:
    """The expected half-width of the default (``"t"``) interval with these seeds."""
    units = _units(n_pretrain, n_finetune)
    if units < 2:
        return math.inf
    critical = float(stdtrit(units - 1, (1 + confidence) / 2))
    return critical * expected_se(components, n_pretrain, n_finetune, variance_factor)


def _needed_multiple(units: int, relation: Relation, confidence: float, power: float) -> float:
    """How many standard errors the margin to resolve must span: the interval's critical value
    plus the quantile that puts ``power`` of the estimates on the resolving side."""
    critical = float(stdtrit(units - 1, (1 + confidence) / 2))
    tail = power if relation == ">" else (1 + power) / 2
    return critical + float(stdtrit(units - 1, tail))


def detectable_difference(
    components: VarianceComponents,
    n_pretrain: int,
    n_finetune: int,
    *,
    variance_factor: float = 1.0,
    confidence: float = CONFIDENCE,
    power: float = POWER,
) -> float:
    """The smallest true difference these seeds would show as supported ('>') with
    probability ``power``."""
    units = _units(n_pretrain, n_finetune)
    if units < 2:
        return math.inf
    se = expected_se(components, n_pretrain, n_finetune, variance_factor)
    return _needed_multiple(units, ">", confidence, power) * se


@dataclass(frozen=True)
class PlanOption:
    n_pretrain: int
    n_finetune: int
    half_width: float
    resolves: bool
    cost: float
    """In pre-training runs per arm: seeds × (1 + fine-tuning seeds × ``finetune_cost``)."""


@dataclass(frozen=True)
class SeedPlan:
    """Seed counts and what they buy, for a claim ``relation`` with the paper's ``gap``."""

    gap: float
    relation: Relation
    margin: float | None
    power: float
    options: tuple[PlanOption, ...]
    cheapest: PlanOption | None
    components: VarianceComponents

    @property
    def finetune_noise_only(self) -> bool:
        return not self.components.between_measured

    @property
    def variance_unknown(self) -> bool:
        """Nothing was planned: the measured variance is zero (``VarianceComponents.zero``)."""
        return self.components.zero

    def describe(self) -> str:
        """One line for a report: the cheapest plan, that none in the grid resolves it, or
        that the variance is unknown (none measured) so nothing can be planned."""
        what = (
            f"a gap of {self.gap:.2f}"
            if self.relation == ">"
            else f"a tie (paper gap {self.gap:.2f}) within ±{self.margin:.2f}"
        )
        if self.variance_unknown:
            c = self.components
            return (
                f"the difference did not vary at all over {c.n_pretrain} pre-training × "
                f"{c.n_finetune} fine-tuning seeds (as when every model predicts one class), so "
                f"its variance is unknown (not zero) and no seed plan for {what} can be "
                "computed; first give the models enough training data and epochs to differ"
            )
        if self.cheapest is not None:
            c = self.cheapest
            text = (
                f"{what} needs {c.n_pretrain} pre-training × {c.n_finetune} fine-tuning seeds "
                f"(expected 95% CI half-width {c.half_width:.2f}, {self.power:.0%} power)"
            )
        elif not self.options:
            c = self.components
            text = (
                f"no plan in the grid has at least the {c.n_pretrain} pre-training × "
                f"{c.n_finetune} fine-tuning seeds run, so none is offered for {what}"
            )
        else:
            last = max(self.options, key=lambda o: (o.n_pretrain, o.n_finetune))
            text = (
                f"no plan up to {last.n_pretrain} pre-training × {last.n_finetune} fine-tuning "
                f"seeds resolves {what} at {self.power:.0%} power (half-width there "
                f"{last.half_width:.2f})"
            )
        if self.finetune_noise_only:
            text += (
                "; the between-pre-training variance is unmeasured (one pre-training seed), so"
                " this counts fine-tuning noise only"
            )
        return text


def seed_plan(
    components: VarianceComponents,
    gap: float,
    relation: Relation = ">",
    *,
    margin: float | None = None,
    variance_factor: float = 1.0,
    confidence: float = CONFIDENCE,
    power: float = POWER,
    finetune_cost: float = FINETUNE_COST,
    pretrain_options: Sequence[int] = PRETRAIN_OPTIONS,
    finetune_options: Sequence[int] = FINETUNE_OPTIONS,
) -> SeedPlan:
    """Which pre-training × fine-tuning seed counts resolve a claim, given measured variance.

    A ``">"`` claim with true difference ``gap`` is resolved when the interval's lower end
    clears 0 with probability ``power``; an ``"≈"`` claim when the interval falls within
    ``±margin`` with that probability while the true difference is ``gap``. ``power=0.5`` asks
    only that the expected half-width be below the gap. Options with one pre-training seed are
    offered only while the between-pre-training variance is unmeasured (their interval cannot
    cover it); then nothing else can be planned, and the plan says so. No option has fewer
    pre-training or fine-tuning seeds than the study ran (``components.n_pretrain`` and
    ``n_finetune``): those seeds are spent, and fewer would measure less. A zero measured variance
    plans nothing (``SeedPlan.variance_unknown``).
    """
    if relation == "≈" and (margin is None or margin <= 0):
        raise ValueError("an '≈' claim needs a positive equivalence margin")
    target = abs(gap) if relation == ">" else (margin or 0.0) - abs(gap)
    if components.zero:
        return SeedPlan(gap, relation, margin, power, (), None, components)
    pretrain_counts = (
        (1,)
        if not components.between_measured
        else [n for n in pretrain_options if n > 1 and n >= components.n_pretrain]
    )
    options = []
    for n_p in pretrain_counts:
        for n_f in finetune_options:
            units = _units(n_p, n_f)
            if units < 2 or n_f < components.n_finetune:
                continue
            se = expected_se(components, n_p, n_f, variance_factor)
            half = expected_half_width(
                components, n_p, n_f, variance_factor=variance_factor, confidence=confidence
            )
            needed = _needed_multiple(units, relation, confidence, power) * se
            options.append(
                PlanOption(
                    n_p, n_f, half, target > 0 and needed <= target, n_p * (1 + n_f * finetune_cost)
                )
            )
    resolving = [o for o in options if o.resolves]
    cheapest = min(resolving, key=lambda o: (o.cost, o.n_pretrain)) if resolving else None
    return SeedPlan(gap, relation, margin, power, tuple(options), cheapest, components)
