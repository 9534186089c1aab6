"""Compute efficiency of two arms: how much pre-training compute one saves over the other, and
from what budget on, each with a 95% confidence interval.

The paper argues in compute multiples ("ELECTRA-Small outperforms GPT with 1/30 of the
compute"). A study that evaluates kept checkpoints traces each arm's score against pre-training
FLOPs; this module reads two such curves:

- **Compute multiplier** of A over B at a budget C where A was evaluated: the FLOPs B needs to
  reach A's score at C, divided by C. B's curve is fitted non-decreasing in FLOPs (isotonic
  regression, so seed noise cannot make it fold back) and interpolated linearly on log-FLOPs.
  A multiplier of 4 reads "B needs 4× A's compute for A's score"; below 1, B needs less. Where
  A's score lies above all of B's curve the multiplier is only a lower bound (``> C_max / C``,
  beyond the budgets measured), where it lies below all of it an upper bound (``< C_min / C``):
  nothing is extrapolated.
- **Crossover** of A and B: where A − B changes sign along the budgets both evaluated, both
  curves interpolated on log-FLOPs; or that there is none in the budgets measured, with the
  verdict at each end read from the paired difference's interval (``stats.difference``). A
  reference evaluated only before pre-training (no pre-training, a count-based detector) is a
  flat line, so its crossover with an arm is the budget from which pre-training beats it.

**The intervals** come from the same hierarchical bootstrap as every other interval of a report
(``stats.paired_draws``): a resample draws seeds once for the whole curve (a pre-training seed
is one run, kept at every budget) and, where the arms share seeds, the same seeds for both. The
interval is the set of FLOPs at which the data cannot tell the two sides apart: the multiplier's
covers every x at which the default (``"t"``) interval of A(C) − B(x) contains 0, the crossover's
every x at which that of A(x) − B(x) does. It is reported in the measured range only: an end
that the range does not close is ``0`` (below) or ``inf`` (above), read as "at most" or "at
least" the range's end. With one model per arm there is no interval and the kind is
``unresolved``.

Nothing here formats a report (``report.efficiency`` does) or knows a task family: the caller
passes one family's aggregated rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np
import polars as pl

from electra_ablate.analysis import stats

Kind = Literal["estimate", "lower_bound", "upper_bound", "unresolved"]
Standing = Literal["crossover", "a_ahead", "b_ahead", "unresolved"]

GRID = 128
"""Points on log-FLOPs at which an interval is tested; its ends are interpolated between them."""

MULTIPLIER_COLUMNS = {
    "score": pl.String,
    "a": pl.String,
    "b": pl.String,
    "flops": pl.Float64,
    "multiplier": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "kind": pl.String,
    "n_pretrain": pl.Int64,
    "n_finetune": pl.Int64,
}
"""``compute_efficiency.csv``: one row per (A, B, aggregate, budget of A)."""

CROSSOVER_COLUMNS = {
    "score": pl.String,
    "a": pl.String,
    "b": pl.String,
    "flops_min": pl.Float64,
    "flops_max": pl.Float64,
    "kind": pl.String,
    "crossover": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "crossings": pl.Int64,
    "a_minus_b_start": pl.Float64,
    "verdict_start": pl.String,
    "a_minus_b_end": pl.Float64,
    "verdict_end": pl.String,
}
"""``crossovers.csv``: one row per (A, B, aggregate) whose curves share two budgets or more."""


# --- curves ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Curve:
    """One arm's grids at its budgets, ascending in FLOPs, on the same seeds at every budget
    (a seed missing at one budget is left out of all, so a resample draws whole curves).
    ``flat``: evaluated only before pre-training, a reference line at every budget."""

    label: str
    flops: tuple[float, ...]
    grids: tuple[stats.ArmGrid, ...]
    flat: bool = False
    left_out: int = 0

    @property
    def first(self) -> stats.ArmGrid:
        return self.grids[0]

    def values(self, aggregation: stats.Aggregation) -> np.ndarray:
        """``[n]``: the score at each budget."""
        return np.array([float(aggregation(g.values)) for g in self.grids])

    def replicates(self, draws: stats.Draws, aggregation: stats.Aggregation) -> np.ndarray:
        """``[R, n]``: the score at each budget under each resample of ``draws``."""
        return np.stack([stats.replicates(g, draws, aggregation) for g in self.grids], axis=1)


def budget_curves(values: pl.DataFrame) -> dict[str, Curve]:
    """Each label's curve, in the frame's label order.

    ``values`` holds one family's aggregated rows at every checkpoint: ``label``,
    ``checkpoint_fraction``, ``flops_paper``, ``pretrain_seed``, ``finetune_seed``, ``task``,
    ``value``. A label evaluated only at fraction 0 is a flat curve; other labels' rows at 0 are
    not on the curve (log-FLOPs has no 0). Tasks are those of the whole frame, as in
    ``stats.arm_grids``. A budget at which a label has no complete model (a task not yet
    evaluated) is left off its curve; a label with no seed complete at all its other budgets
    has no curve.
    """
    frame = values.filter(pl.col("value").is_not_nan())
    tasks = tuple(sorted(frame["task"].unique().to_list()))
    curves = {}
    for label in frame["label"].unique(maintain_order=True).to_list():
        rows = frame.filter(pl.col("label") == label)
        flat = rows["checkpoint_fraction"].max() == 0
        if not flat:
            rows = rows.filter(pl.col("checkpoint_fraction") > 0)
        budgets = (
            rows.group_by("checkpoint_fraction")
            .agg(pl.col("flops_paper").mean())
            .sort("checkpoint_fraction")
        )
        found = [
            (flops, stats.arm_grids(rows.filter(pl.col("checkpoint_fraction") == f), tasks=tasks))
            for f, flops in budgets.select("checkpoint_fraction", "flops_paper").iter_rows()
        ]
        complete = [(flops, grids[label]) for flops, grids in found if label in grids]
        curve = _common_seeds(label, complete, flat)
        if curve is not None:
            curves[label] = curve
    return curves


def _common_seeds(
    label: str, budgets: list[tuple[float, stats.ArmGrid]], flat: bool
) -> Curve | None:
    if not budgets:
        return None
    flops, grids = zip(*budgets, strict=True)
    pretrain = sorted(set.intersection(*(set(g.pretrain_seeds) for g in grids)))
    finetune = sorted(set.intersection(*(set(g.finetune_seeds) for g in grids)))
    if not pretrain or not finetune:
        return None
    kept = []
    for g in grids:
        rows = [g.pretrain_seeds.index(s) for s in pretrain]
        cols = [g.finetune_seeds.index(s) for s in finetune]
        kept.append(
            stats.ArmGrid(
                label, tuple(pretrain), tuple(finetune), g.tasks, g.values[np.ix_(rows, cols)]
            )
        )
    left_out = sum(g.n_pretrain * g.n_finetune for g in grids) - len(grids) * len(pretrain) * len(
        finetune
    )
    return Curve(label, tuple(float(f) for f in flops), tuple(kept), flat, left_out)


# --- monotone fit and interpolation ---------------------------------------------------------


def isotonic(y: np.ndarray) -> np.ndarray:
    """The least-squares non-decreasing fit of each row of ``y`` (``[..., n]``), by the
    max–min formula ``fit[i] = max_{j ≤ i} min_{k ≥ i} mean(y[j..k])``: exact, and
    vectorised over rows for the few budgets a study has."""
    y = np.asarray(y, dtype=float)
    n = y.shape[-1]
    sums = np.concatenate([np.zeros((*y.shape[:-1], 1)), np.cumsum(y, axis=-1)], axis=-1)
    j = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    length = np.where(k >= j, k - j + 1, 1)
    means = (sums[..., None, 1:] - sums[..., :-1, None]) / length  # [..., j, k]
    means = np.where(k >= j, means, np.nan)
    fit = np.empty_like(y)
    for i in range(n):
        fit[..., i] = np.max(np.min(means[..., : i + 1, i:], axis=-1), axis=-1)
    return fit


def interpolate(x: np.ndarray, xp: np.ndarray, yp: np.ndarray) -> np.ndarray:
    """Each row of ``yp`` (``[..., n]`` at ascending ``xp``) linearly interpolated at ``x``
    (``[G]``, within ``xp``'s range): ``[..., G]``."""
    right = np.clip(np.searchsorted(xp, x, side="right"), 1, len(xp) - 1)
    left = right - 1
    t = (x - xp[left]) / (xp[right] - xp[left])
    return yp[..., left] * (1 - t) + yp[..., right] * t


def first_reach(x: np.ndarray, curve: np.ndarray, target: float) -> float:
    """The smallest x at which the non-decreasing piecewise-linear ``curve`` reaches
    ``target``; NaN where it never does, or is above it already at ``x[0]``."""
    if target < curve[0] or target > curve[-1]:
        return math.nan
    i = int(np.argmax(curve >= target))
    if i == 0:
        return float(x[0])
    t = (target - curve[i - 1]) / (curve[i] - curve[i - 1])
    return float(x[i - 1] + t * (x[i] - x[i - 1]))


def _extent(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[float, float] | None:
    """The outer ends of ``{x : low(x) ≤ 0 ≤ high(x)}`` on the grid, each interpolated between
    the grid points that straddle it; None where the set is empty."""
    inside = (low <= 0) & (high >= 0)
    if not inside.any():
        return None
    first, last = int(np.argmax(inside)), len(x) - 1 - int(np.argmax(inside[::-1]))
    start = x[0] if first == 0 else _edge(x, low, high, first - 1, first)
    end = x[-1] if last == len(x) - 1 else _edge(x, low, high, last + 1, last)
    return float(start), float(end)


def _edge(x: np.ndarray, low: np.ndarray, high: np.ndarray, out: int, into: int) -> float:
    """Where the interval's bound that excludes 0 at ``out`` crosses 0 on the way to ``into``."""
    bound = low if low[out] > 0 else high
    t = bound[out] / (bound[out] - bound[into])
    return float(x[out] + t * (x[into] - x[out]))


def _grid(knots: np.ndarray) -> np.ndarray:
    """``GRID`` evenly spaced log-FLOPs over the knots' range, and the knots themselves (where
    piecewise-linear curves bend)."""
    return np.union1d(np.linspace(knots[0], knots[-1], GRID), knots)


# --- the statistics -------------------------------------------------------------------------


@dataclass(frozen=True)
class Multiplier:
    """A's compute multiplier over B at ``flops`` (see the module docstring). ``multiplier``
    is the estimate, or the bound for ``lower_bound``/``upper_bound``; ``ci_low``/``ci_high``
    its 95% CI (``0``/``inf`` where the measured range does not close it, NaN without one).
    ``point`` is what the estimate alone says (``estimate``, ``lower_bound`` or
    ``upper_bound``), which ``kind`` keeps unless the interval resolves nothing."""

    a: str
    b: str
    flops: float
    multiplier: float
    ci_low: float
    ci_high: float
    kind: Kind
    n_pretrain: int
    n_finetune: int
    point: Kind

    @property
    def within_noise(self) -> bool:
        """Whether the measured noise cannot tell A's score at ``flops`` from B's curve there:
        no interval (one model per arm: no measured floor), an unresolved one, or one that
        holds 1× (B at A's own compute may already score as A does). Such a multiplier is
        not drawn in a report (issue 72); its numbers stay in ``compute_efficiency.csv``."""
        if math.isnan(self.ci_low) or math.isnan(self.ci_high) or self.kind == "unresolved":
            return True
        return self.ci_low <= 1.0 <= self.ci_high


@dataclass(frozen=True)
class Crossover:
    """Where A − B changes sign between ``flops_min`` and ``flops_max``.

    ``crossings`` counts the sign changes of the estimate; ``crossover`` is the first, with
    its interval (``0``/``inf``: an end the range does not close). ``kind``: ``crossover``
    (a sign change whose interval the range closes on one side at least), ``a_ahead`` /
    ``b_ahead`` (no sign change, and at least one end resolved), ``unresolved`` (a sign change
    that could be anywhere or has no interval, or none and neither end resolved). ``start``
    and ``end``: the paired differences A − B at the first and last shared budget."""

    a: str
    b: str
    flops_min: float
    flops_max: float
    kind: Standing
    crossover: float
    ci_low: float
    ci_high: float
    crossings: int
    start: stats.Difference
    end: stats.Difference

    @property
    def within_noise(self) -> bool:
        """Whether nothing here is outside the measured noise: an unresolved standing (a sign
        change that could lie anywhere, or none with neither end resolved), or a crossing
        with no interval (one model per arm: no measured floor). Such a crossover is not
        drawn in a report; its numbers stay in ``crossovers.csv``."""
        if self.kind == "unresolved":
            return True
        return self.kind == "crossover" and (math.isnan(self.ci_low) or math.isnan(self.ci_high))


def _units(a: Curve, b: Curve) -> int:
    return min(a.first.units, b.first.units)


def _draws(a: Curve, b: Curve, resamples: int, seed: int) -> tuple[stats.Draws, stats.Draws]:
    draws_a, draws_b, _ = stats.paired_draws(a.first, b.first, resamples, seed)
    return draws_a, draws_b


def _bounds(
    estimate: np.ndarray, replicates: np.ndarray, units: int, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per grid point, the default interval of a statistic (``[G]`` estimate, ``[R, G]``)."""
    half = stats.t_critical(units, confidence) * stats.standard_error(replicates, units)
    return estimate - half, estimate + half


def _reach_interval(
    x: np.ndarray, low: np.ndarray, high: np.ndarray, estimate: float
) -> tuple[float, float]:
    """The log-FLOPs at which B may reach A's score: where the interval of A(C) − B(x)
    (``low``, ``high`` on the grid ``x``) holds 0, and beyond the measured range on a side
    that the data do not exclude. B's curve is non-decreasing, so below the range B is further
    behind than at its first budget: that side is excluded when B is resolved behind there
    (``low[0] > 0``); above the range likewise when B is resolved ahead at its last
    (``high[-1] < 0``). ``-inf``/``inf``: an end the range does not close."""
    inside = _extent(x, low, high)
    below, above = low[0] <= 0, high[-1] >= 0
    if inside is None and not below and not above:  # no noise: the estimate alone
        return estimate, estimate
    start = -math.inf if below else inside[0] if inside else float(x[-1])
    end = math.inf if above else inside[1] if inside else float(x[0])
    return start, end


def multipliers(
    a: Curve,
    b: Curve,
    aggregation: stats.Aggregation = stats.MEDIAN_OF_MODEL_MEANS,
    *,
    resamples: int = stats.RESAMPLES,
    seed: int = stats.SEED,
    confidence: float = stats.CONFIDENCE,
) -> list[Multiplier]:
    """A's compute multiplier over B at each of A's budgets; none when B has fewer than two
    budgets (no curve to read) or either curve is flat."""
    if a.flat or b.flat or len(b.flops) < 2:
        return []
    xb = _log_flops(b)
    grid = _grid(xb)
    fitted = isotonic(b.values(aggregation))
    along = interpolate(grid, xb, fitted)
    units = _units(a, b)
    if units >= 2:
        draws_a, draws_b = _draws(a, b, resamples, seed)
        rep_a = a.replicates(draws_a, aggregation)
        rep_along = interpolate(grid, xb, isotonic(b.replicates(draws_b, aggregation)))
    out = []
    for i, (flops, target) in enumerate(zip(a.flops, a.values(aggregation), strict=True)):
        reached = first_reach(xb, fitted, target)
        if not math.isnan(reached):
            kind: Kind = "estimate"
            value = math.exp(reached) / flops
        elif target > fitted[-1]:
            kind, value = "lower_bound", b.flops[-1] / flops
        else:
            kind, value = "upper_bound", b.flops[0] / flops
        point, low, high = kind, math.nan, math.nan
        if units >= 2:
            bounds = _bounds(target - along, rep_a[:, i, None] - rep_along, units, confidence)
            start, end = _reach_interval(grid, *bounds, reached)
            low, high = math.exp(start) / flops, math.exp(end) / flops
            if start == -math.inf and end == math.inf:
                kind = "unresolved"
        else:
            kind = "unresolved"
        out.append(
            Multiplier(
                a.label,
                b.label,
                flops,
                value,
                low,
                high,
                kind,
                min(a.first.n_pretrain, b.first.n_pretrain),
                min(a.first.n_finetune, b.first.n_finetune),
                point,
            )
        )
    return out


def crossover(
    a: Curve,
    b: Curve,
    aggregation: stats.Aggregation = stats.MEDIAN_OF_MODEL_MEANS,
    *,
    resamples: int = stats.RESAMPLES,
    seed: int = stats.SEED,
    confidence: float = stats.CONFIDENCE,
) -> Crossover | None:
    """Where A − B changes sign along the budgets both curves span (a flat curve spans the
    other's); None when they share fewer than two budgets' worth of range."""
    if a.flat and b.flat:
        return None
    xa, xb = _log_flops(a), _log_flops(b)
    lo = xb[0] if a.flat else xa[0] if b.flat else max(xa[0], xb[0])
    hi = xb[-1] if a.flat else xa[-1] if b.flat else min(xa[-1], xb[-1])
    knots = np.unique(np.concatenate([x[(x >= lo) & (x <= hi)] for x in (xa, xb)]))
    if len(knots) < 2:
        return None

    def along(curve: Curve, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if curve.flat:
            return np.repeat(y[..., :1], len(x), axis=-1)
        return interpolate(x, _log_flops(curve), y)

    values_a, values_b = a.values(aggregation), b.values(aggregation)
    gap = along(a, knots, values_a) - along(b, knots, values_b)
    changes = _sign_changes(gap)
    options = {"resamples": resamples, "seed": seed, "confidence": confidence}
    at_start = stats.difference(_at(a, knots[0]), _at(b, knots[0]), aggregation, **options)
    at_end = stats.difference(_at(a, knots[-1]), _at(b, knots[-1]), aggregation, **options)
    point = low = high = math.nan
    if changes:
        kind: Standing = "crossover"
        i, k = changes[0]
        if k == i + 1:
            t = gap[i] / (gap[i] - gap[k])
            point = math.exp(knots[i] + t * (knots[k] - knots[i]))
        else:  # A − B is exactly 0 at the knots between: it crosses at the first of them
            point = math.exp(knots[i + 1])
        units = _units(a, b)
        if units >= 2:
            draws_a, draws_b = _draws(a, b, resamples, seed)
            grid = _grid(knots)
            estimate = along(a, grid, values_a) - along(b, grid, values_b)
            reps = along(a, grid, a.replicates(draws_a, aggregation)) - along(
                b, grid, b.replicates(draws_b, aggregation)
            )
            bounds = _bounds(estimate, reps, units, confidence)
            inside = _extent(grid, *bounds)
            if inside is None:  # no noise: the estimate alone
                low = high = point
            else:  # a set that reaches an end of the range may go on beyond it
                low = 0.0 if inside[0] <= grid[0] else math.exp(inside[0])
                high = math.inf if inside[1] >= grid[-1] else math.exp(inside[1])
            if low == 0 and high == math.inf:
                kind = "unresolved"
        else:
            kind = "unresolved"
    else:
        ends = [stats.verdict(">", d.ci_low, d.ci_high) for d in (at_start, at_end)]
        if all(v == stats.UNRESOLVED for v in ends):
            kind = "unresolved"
        else:
            kind = "a_ahead" if gap.mean() > 0 else "b_ahead" if gap.mean() < 0 else "unresolved"
    return Crossover(
        a.label,
        b.label,
        math.exp(knots[0]),
        math.exp(knots[-1]),
        kind,
        point,
        low,
        high,
        len(changes),
        at_start,
        at_end,
    )


def _sign_changes(gap: np.ndarray) -> list[tuple[int, int]]:
    """Pairs of knots ``(i, k)`` where A − B is non-zero with opposite signs and exactly 0
    at every knot between (a tie at a budget is a crossing, not the end of one)."""
    nonzero = [i for i, g in enumerate(gap) if g != 0]
    pairs = zip(nonzero[:-1], nonzero[1:], strict=True)
    return [(i, k) for i, k in pairs if gap[i] * gap[k] < 0]


def _at(curve: Curve, x: float) -> stats.ArmGrid:
    """The curve's grid at the budget nearest ``x`` (a flat curve's only one): in a study
    every objective has the same budgets, so at the shared range's ends each arm's own."""
    if curve.flat:
        return curve.first
    return curve.grids[int(np.argmin(np.abs(_log_flops(curve) - x)))]


def _log_flops(curve: Curve) -> np.ndarray:
    """The curve's budgets on log-FLOPs; a flat curve has none (it spans any range)."""
    return np.array([]) if curve.flat else np.log(np.array(curve.flops))


# --- a study's tables -----------------------------------------------------------------------


@dataclass(frozen=True)
class Efficiency:
    """One family's compute efficiency: ``multipliers`` and ``crossovers`` as tidy tables
    (``MULTIPLIER_COLUMNS``, ``CROSSOVER_COLUMNS``), and the curves they were read from."""

    score: str
    curves: dict[str, Curve]
    multipliers: list[Multiplier]
    crossovers: list[Crossover]

    def multipliers_by_pair(self) -> dict[tuple[str, str], list[Multiplier]]:
        """``multipliers`` grouped by ordered pair (A, B), each pair's in budget order."""
        pairs: dict[tuple[str, str], list[Multiplier]] = {}
        for m in self.multipliers:
            pairs.setdefault((m.a, m.b), []).append(m)
        return pairs

    @property
    def budgets(self) -> int:
        """The most budgets any pre-trained arm was evaluated at."""
        return max((len(c.flops) for c in self.curves.values() if not c.flat), default=0)


def family_efficiency(
    score: str,
    values: pl.DataFrame,
    aggregation: stats.Aggregation = stats.MEDIAN_OF_MODEL_MEANS,
    **options,
) -> Efficiency:
    """Every ordered pair of pre-trained arms' multipliers at each budget, and every pair's
    crossover (pre-trained arms with each other, in label order, then each with each flat
    reference). ``values``: one family's aggregated rows (:func:`budget_curves`); ``options``
    go to :func:`multipliers` and :func:`crossover`."""
    curves = budget_curves(values)
    trained = [c for c in curves.values() if not c.flat]
    references = [c for c in curves.values() if c.flat]
    found_multipliers = [
        m
        for a in trained
        for b in trained
        if a is not b
        for m in multipliers(a, b, aggregation, **options)
    ]
    pairs = [*combinations(trained, 2), *((a, r) for a in trained for r in references)]
    found_crossovers = [
        c for a, b in pairs if (c := crossover(a, b, aggregation, **options)) is not None
    ]
    return Efficiency(score, curves, found_multipliers, found_crossovers)


def multiplier_table(found: list[Efficiency]) -> pl.DataFrame:
    """``compute_efficiency.csv``'s rows for these families."""
    rows = [
        {
            "score": e.score,
            "a": m.a,
            "b": m.b,
            "flops": m.flops,
            "multiplier": m.multiplier,
            "ci_low": m.ci_low,
            "ci_high": m.ci_high,
            "kind": m.kind,
            "n_pretrain": m.n_pretrain,
            "n_finetune": m.n_finetune,
        }
        for e in found
        for m in e.multipliers
    ]
    return pl.DataFrame(rows, schema=MULTIPLIER_COLUMNS)


def crossover_table(found: list[Efficiency]) -> pl.DataFrame:
    """``crossovers.csv``'s rows for these families."""
    rows = [
        {
            "score": e.score,
            "a": c.a,
            "b": c.b,
            "flops_min": c.flops_min,
            "flops_max": c.flops_max,
            "kind": c.kind,
            "crossover": c.crossover,
            "ci_low": c.ci_low,
            "ci_high": c.ci_high,
            "crossings": c.crossings,
            "a_minus_b_start": c.start.value,
            "verdict_start": stats.verdict(">", c.start.ci_low, c.start.ci_high),
            "a_minus_b_end": c.end.value,
            "verdict_end": stats.verdict(">", c.end.ci_low, c.end.ci_high),
        }
        for e in found
        for c in e.crossovers
    ]
    return pl.DataFrame(rows, schema=CROSSOVER_COLUMNS)
