"""Compute efficiency of two arms: compute multipliers and crossovers read from score-vs-FLOPs
curves, against synthetic studies with a planted answer, and the monotone fit and
interpolation they rest on."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from electra_ablate.analysis import stats
from electra_ablate.analysis.efficiency import (
    CROSSOVER_COLUMNS,
    MULTIPLIER_COLUMNS,
    budget_curves,
    crossover,
    crossover_table,
    family_efficiency,
    first_reach,
    interpolate,
    isotonic,
    multiplier_table,
    multipliers,
)

TOTAL = 3.2e14
FRACTIONS = (0.0625, 0.125, 0.25, 0.5, 1.0)
BUDGETS = tuple(f * TOTAL for f in FRACTIONS)  # 2e13 … 3.2e14, one doubling apart
TASKS = ("mrpc", "rte")
TASK_OFFSETS = (-2.0, 2.0)  # the mean over tasks is the score itself
RESAMPLES = 2000
KINDS = {"estimate", "lower_bound", "upper_bound", "unresolved"}


def curve(x: float) -> float:
    """The base score: 6 points per doubling of pre-training FLOPs."""
    return 40 + 6 * math.log2(x / 1e13)


def tidy(
    label,
    score,
    *,
    fractions=FRACTIONS,
    pretrain=1,
    finetune=5,
    noise=0.3,
    seed=0,
    effect=0.5,
    offsets=None,
):
    """One arm's tidy rows: ``score(flops)`` plus a seed effect per (pre-training,
    fine-tuning) seed shared across budgets and arms (the same seeds pair), plus model noise
    (``seed``) at each budget; ``offsets`` (``[finetune]``) adds this arm's own fixed effect
    per fine-tuning seed. Fraction 0 has 0 FLOPs."""
    effects = np.random.default_rng(12345).normal(0, effect, (pretrain, finetune))
    if offsets is not None:
        effects = effects + np.asarray(offsets, dtype=float)
    rng = np.random.default_rng(seed)
    rows = []
    for fraction in fractions:
        flops = fraction * TOTAL
        for p in range(pretrain):
            for f in range(finetune):
                value = score(flops) + effects[p, f] + rng.normal(0, noise)
                for task, offset in zip(TASKS, TASK_OFFSETS, strict=True):
                    rows.append(
                        {
                            "label": label,
                            "checkpoint_fraction": fraction,
                            "flops_paper": flops,
                            "pretrain_seed": p,
                            "finetune_seed": f,
                            "task": task,
                            "value": value + offset,
                        }
                    )
    return pl.DataFrame(rows)


def curves_of(*frames):
    return budget_curves(pl.concat(frames))


def by_flops(found):
    return {m.flops: m for m in found}


def reference_pava(y):
    """Pool adjacent violators, the textbook way: merge blocks while a block's mean exceeds
    the next one's."""
    blocks = []  # [sum, count]
    for v in y:
        blocks.append([float(v), 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return np.concatenate([np.full(count, total / count) for total, count in blocks])


def exact(label, scores, fractions=(0.25, 0.5, 1.0), finetune=3):
    """Noise-free rows: ``scores`` at ``fractions``, fine-tuning seeds ±1 around them."""
    return pl.concat(
        tidy(
            label, lambda _, s=s: s, fractions=(f,), finetune=finetune, noise=0, effect=0
        ).with_columns(pl.col("value") + pl.col("finetune_seed").cast(pl.Float64) - 1)
        for f, s in zip(fractions, scores, strict=True)
    )


# --- compute multipliers --------------------------------------------------------------------


@pytest.mark.parametrize(("pretrain", "finetune", "tolerance"), [(1, 5, 0.1), (3, 3, 0.15)])
def test_planted_fourfold_multiplier_is_recovered_with_its_interval(pretrain, finetune, tolerance):
    # B's score at F is A's at F / 4: B needs 4× A's compute for A's score
    seeds = {"pretrain": pretrain, "finetune": finetune}
    curves = curves_of(
        tidy("A", curve, seed=1, **seeds), tidy("B", lambda x: curve(x / 4), seed=2, **seeds)
    )
    found = by_flops(multipliers(curves["A"], curves["B"], resamples=RESAMPLES))
    assert sorted(found) == list(BUDGETS)
    for c in BUDGETS[:2]:  # 4C inside B's measured range
        m = found[c]
        assert m.kind == "estimate"
        assert m.multiplier == pytest.approx(4, rel=tolerance)
        assert m.ci_low < 4 < m.ci_high
        assert math.isfinite(m.ci_low) and math.isfinite(m.ci_high)
        assert (m.n_pretrain, m.n_finetune) == (pretrain, finetune)
    for c in BUDGETS[3:]:  # A's score lies beyond B's last budget: only a lower bound
        m = found[c]
        assert m.kind == "lower_bound"
        assert m.multiplier == pytest.approx(BUDGETS[-1] / c)
        assert m.ci_high == math.inf
        assert m.ci_low == pytest.approx(m.multiplier)

    reverse = by_flops(multipliers(curves["B"], curves["A"], resamples=RESAMPLES))
    for c in BUDGETS[3:]:  # C / 4 inside A's measured range
        m = reverse[c]
        assert m.kind == "estimate"
        assert m.multiplier == pytest.approx(0.25, rel=tolerance)
        assert m.ci_low < 0.25 < m.ci_high
    for c in BUDGETS[:2]:  # B's score lies below A's first budget: only an upper bound
        m = reverse[c]
        assert m.kind == "upper_bound"
        assert m.multiplier == pytest.approx(BUDGETS[0] / c)
        assert m.ci_low == 0
        assert m.ci_high == pytest.approx(m.multiplier)


def test_identical_curves_give_a_multiplier_of_one():
    a = tidy("A", curve, seed=1)
    b = a.with_columns(pl.lit("B").alias("label"))
    curves = curves_of(a, b)
    found = multipliers(curves["A"], curves["B"], resamples=RESAMPLES)
    assert len(found) == len(BUDGETS)
    for m in found:
        assert m.multiplier == pytest.approx(1, rel=1e-9)
    for m in found[1:-1]:
        assert m.kind == "estimate"
        # every resample of the same models says 1 too: the interval is (about) the point
        assert m.ci_low == pytest.approx(1, rel=0.01)
        assert m.ci_high == pytest.approx(1, rel=0.01)


def test_an_arm_that_is_never_reached_gives_resolved_lower_bounds():
    # a gentle slope (1.5 points per doubling, 6 over the range) and A 10 points above B:
    # A's score at its smallest budget is 4 points above B's at its largest
    def gentle(x):
        return 50 + 1.5 * math.log2(x / 1e13)

    curves = curves_of(tidy("A", lambda x: gentle(x) + 10, seed=1), tidy("B", gentle, seed=2))
    found = multipliers(curves["A"], curves["B"], resamples=RESAMPLES)
    assert [m.flops for m in found] == pytest.approx(BUDGETS)
    for m in found:
        assert m.kind == "lower_bound"
        assert m.multiplier == pytest.approx(BUDGETS[-1] / m.flops)
        assert m.ci_high == math.inf
        assert m.ci_low == pytest.approx(m.multiplier)

    reverse = multipliers(curves["B"], curves["A"], resamples=RESAMPLES)
    for m in reverse:
        assert m.kind == "upper_bound"
        assert m.multiplier == pytest.approx(BUDGETS[0] / m.flops)
        assert m.ci_low == 0
        assert m.ci_high == pytest.approx(m.multiplier)


def test_a_non_monotone_curve_gives_documented_kinds_and_ordered_intervals():
    # B dips at its middle budgets (noise that an isotonic fit has to pool away)
    dip = {BUDGETS[1]: 5.0, BUDGETS[2]: -4.0}
    curves = curves_of(
        tidy("A", curve, seed=1),
        tidy("B", lambda x: curve(x / 2) + dip.get(x, 0.0), seed=2, noise=1.0),
    )
    values = curves["B"].values(stats.MEDIAN_OF_MODEL_MEANS)
    assert np.any(np.diff(values) < 0)  # the raw curve really folds back
    for a, b in (("A", "B"), ("B", "A")):
        found = multipliers(curves[a], curves[b], resamples=RESAMPLES)
        assert len(found) == len(BUDGETS)
        assert {m.kind for m in found} <= KINDS
        for m in found:
            assert math.isfinite(m.multiplier) and m.multiplier > 0
            if m.kind == "estimate":
                assert m.ci_low <= m.multiplier <= m.ci_high
    # B's dip (51, 48) pools to 49.5; A's score at its 3rd budget (58) B reaches at its 4th
    at = by_flops(multipliers(curves["A"], curves["B"], resamples=RESAMPLES))[BUDGETS[2]]
    assert at.kind == "estimate"
    assert at.multiplier == pytest.approx(2, rel=0.25)
    assert at.ci_low <= 2 <= at.ci_high


def test_a_dipping_curve_is_read_through_its_monotone_fit():
    # noise-free, seeds paired: B's 50, 44 pool to 47, 47, so B reaches 45 at 4e13 · 2^(5/7)
    # and 48 at 1.6e14 · 2^(1/13) (read raw, 48 would come at 4e13 · 2^(4/5))
    fractions = (0.125, 0.25, 0.5, 1.0)
    curves = curves_of(
        exact("A", [45, 48, 70, 70], fractions), exact("B", [40, 50, 44, 60], fractions)
    )
    found = multipliers(curves["A"], curves["B"], resamples=RESAMPLES)
    assert [m.kind for m in found] == ["estimate", "estimate", "lower_bound", "lower_bound"]
    assert found[0].multiplier == pytest.approx(2 ** (5 / 7))
    assert found[1].multiplier == pytest.approx(2 * 2 ** (1 / 13))
    for m in found[:2]:  # no noise in the paired differences: the interval is the point
        assert m.ci_low == pytest.approx(m.multiplier)
        assert m.ci_high == pytest.approx(m.multiplier)


def test_one_model_per_arm_has_no_interval():
    seeds = {"pretrain": 1, "finetune": 1}
    curves = curves_of(
        tidy("A", curve, seed=1, **seeds), tidy("B", lambda x: curve(x / 4), seed=2, **seeds)
    )
    found = multipliers(curves["A"], curves["B"], resamples=RESAMPLES)
    assert len(found) == len(BUDGETS)
    for m in found:
        assert m.kind == "unresolved"
        assert math.isnan(m.ci_low) and math.isnan(m.ci_high)
        assert (m.n_pretrain, m.n_finetune) == (1, 1)
    # the estimate is still there, and what it alone says
    assert found[0].multiplier == pytest.approx(4, rel=0.15)
    assert found[0].point == "estimate"
    assert found[-1].point == "lower_bound"
    assert found[-1].multiplier == pytest.approx(1)

    # no sign change, and no interval at either end
    c = crossover(curves["A"], curves["B"], resamples=RESAMPLES)
    assert c.kind == "unresolved"
    assert c.crossings == 0
    assert math.isnan(c.start.ci_low) and math.isnan(c.end.ci_high)


def test_a_single_budget_per_arm_gives_no_multiplier_or_crossover():
    frame = pl.concat(
        [
            tidy("A", curve, fractions=(1.0,), seed=1),
            tidy("B", lambda x: curve(x) - 3, fractions=(1.0,), seed=2),
        ]
    )
    curves = budget_curves(frame)
    assert multipliers(curves["A"], curves["B"], resamples=RESAMPLES) == []
    assert crossover(curves["A"], curves["B"], resamples=RESAMPLES) is None

    found = family_efficiency("glue", frame, resamples=RESAMPLES)
    assert found.budgets == 1
    table, crossings = multiplier_table([found]), crossover_table([found])
    assert table.height == 0 and crossings.height == 0
    assert dict(table.schema) == MULTIPLIER_COLUMNS
    assert dict(crossings.schema) == CROSSOVER_COLUMNS


# --- crossovers -----------------------------------------------------------------------------


def test_planted_crossover_is_found_with_its_interval():
    x0 = 1.1e14  # between the 3rd and 4th budgets

    def behind_then_ahead(x):  # 3 points per doubling relative to B, zero at x0
        return curve(x) + 3 * math.log2(x / x0)

    frame = pl.concat([tidy("A", behind_then_ahead, seed=1), tidy("B", curve, seed=2)])
    curves = budget_curves(frame)
    c = crossover(curves["A"], curves["B"], resamples=RESAMPLES)
    assert c.kind == "crossover"
    assert c.crossings == 1
    assert c.crossover == pytest.approx(x0, rel=0.15)
    assert c.ci_low < x0 < c.ci_high
    assert BUDGETS[0] < c.ci_low and c.ci_high < BUDGETS[-1]  # closed on both sides
    assert (c.flops_min, c.flops_max) == pytest.approx((BUDGETS[0], BUDGETS[-1]))
    assert stats.verdict(">", c.start.ci_low, c.start.ci_high) == stats.CONTRADICTED
    assert stats.verdict(">", c.end.ci_low, c.end.ci_high) == stats.SUPPORTED

    row = crossover_table([family_efficiency("glue", frame, resamples=RESAMPLES)]).row(
        0, named=True
    )
    assert (row["score"], row["a"], row["b"], row["kind"]) == ("glue", "A", "B", "crossover")
    assert row["crossover"] == pytest.approx(c.crossover)
    assert row["verdict_start"] == stats.CONTRADICTED
    assert row["verdict_end"] == stats.SUPPORTED
    assert row["a_minus_b_start"] < -3 and row["a_minus_b_end"] > 3


def test_an_arm_ahead_throughout_has_no_crossover():
    curves = curves_of(tidy("A", lambda x: curve(x) + 3, seed=1), tidy("B", curve, seed=2))
    ahead = crossover(curves["A"], curves["B"], resamples=RESAMPLES)
    assert ahead.kind == "a_ahead"
    assert ahead.crossings == 0
    assert math.isnan(ahead.crossover) and math.isnan(ahead.ci_low)
    assert stats.verdict(">", ahead.start.ci_low, ahead.start.ci_high) == stats.SUPPORTED
    assert stats.verdict(">", ahead.end.ci_low, ahead.end.ci_high) == stats.SUPPORTED
    assert ahead.start.value == pytest.approx(3, abs=1)

    behind = crossover(curves["B"], curves["A"], resamples=RESAMPLES)
    assert behind.kind == "b_ahead"
    assert behind.crossings == 0
    assert stats.verdict(">", behind.end.ci_low, behind.end.ci_high) == stats.CONTRADICTED


def test_a_gap_smaller_than_the_noise_is_unresolved():
    # no model noise, so the estimate's gap is exactly 0.2 at every budget (no sign change),
    # but A's fine-tuning seeds spread ±3 around it: neither end is resolved
    spread = [-3.0, -1.5, 0.0, 1.5, 3.0]
    curves = curves_of(
        tidy("A", lambda x: curve(x) + 0.2, noise=0, effect=0, offsets=spread),
        tidy("B", curve, noise=0, effect=0),
    )
    c = crossover(curves["A"], curves["B"], resamples=RESAMPLES)
    assert c.crossings == 0
    assert c.start.value == pytest.approx(0.2) and c.end.value == pytest.approx(0.2)
    assert stats.verdict(">", c.start.ci_low, c.start.ci_high) == stats.UNRESOLVED
    assert stats.verdict(">", c.end.ci_low, c.end.ci_high) == stats.UNRESOLVED
    assert c.kind == "unresolved"


def test_crossover_with_a_flat_reference():
    # a reference evaluated only before pre-training (fraction 0, 0 FLOPs) at 61: A passes it
    # between its 3rd (58) and 4th (64) budgets, at 8e13 · 2^(3/6)
    reference = tidy("none", lambda _: 61.0, fractions=(0.0,), seed=3)
    frame = pl.concat([tidy("A", curve, fractions=FRACTIONS[1:], seed=1), reference])
    curves = budget_curves(frame)
    assert curves["none"].flat and not curves["A"].flat
    assert curves["none"].flops == (0.0,)

    c = crossover(curves["A"], curves["none"], resamples=RESAMPLES)
    assert c.kind == "crossover"
    assert c.crossings == 1
    assert BUDGETS[2] < c.crossover < BUDGETS[3]
    assert c.crossover == pytest.approx(8e13 * 2**0.5, rel=0.1)
    assert c.ci_low < 8e13 * 2**0.5 < c.ci_high
    assert (c.flops_min, c.flops_max) == pytest.approx((BUDGETS[1], BUDGETS[-1]))
    assert stats.verdict(">", c.start.ci_low, c.start.ci_high) == stats.CONTRADICTED
    assert stats.verdict(">", c.end.ci_low, c.end.ci_high) == stats.SUPPORTED

    assert multipliers(curves["A"], curves["none"], resamples=RESAMPLES) == []
    assert multipliers(curves["none"], curves["A"], resamples=RESAMPLES) == []
    assert crossover(curves["none"], curves["none"], resamples=RESAMPLES) is None

    # the reference enters the crossovers but not the multipliers
    found = family_efficiency(
        "glue", pl.concat([frame, tidy("B", curve, seed=2)]), resamples=RESAMPLES
    )
    pairs = [(c.a, c.b) for c in found.crossovers]
    assert pairs == [("A", "B"), ("A", "none"), ("B", "none")]
    assert {(m.a, m.b) for m in found.multipliers} == {("A", "B"), ("B", "A")}
    assert found.budgets == len(BUDGETS)


def test_a_pretrained_arms_rows_at_fraction_zero_are_not_on_its_curve():
    frame = tidy("A", lambda x: curve(max(x, 1e13)), fractions=(0.0, *FRACTIONS), seed=1)
    a = budget_curves(frame)["A"]
    assert not a.flat
    assert a.flops == pytest.approx(BUDGETS)
    assert len(a.grids) == len(BUDGETS)


def test_a_crossover_of_one_model_per_arm_is_unresolved():
    # no interval: a sign change whose place the data cannot bound is no resolved crossover
    curves = curves_of(exact("A", [48, 50, 52], finetune=1), exact("B", [51, 51, 51], finetune=1))
    c = crossover(curves["A"], curves["B"], resamples=RESAMPLES)
    assert c.crossings == 1
    assert math.isnan(c.ci_low) and math.isnan(c.ci_high)
    assert c.kind == "unresolved"


# --- curves from a tidy frame ---------------------------------------------------------------


def test_a_curve_keeps_only_the_seeds_present_at_every_budget():
    a = tidy("A", curve, seed=1)
    missing = (pl.col("checkpoint_fraction") == 0.25) & (pl.col("finetune_seed") == 3)
    curves = curves_of(a.filter(~missing), tidy("B", lambda x: curve(x / 4), seed=2))
    kept = curves["A"]
    assert kept.first.finetune_seeds == (0, 1, 2, 4)
    assert all(g.finetune_seeds == (0, 1, 2, 4) for g in kept.grids)
    assert all(g.values.shape == (1, 4, len(TASKS)) for g in kept.grids)
    assert kept.left_out == len(BUDGETS) - 1  # seed 3's models at the other budgets
    assert curves["B"].left_out == 0
    assert curves["B"].first.finetune_seeds == (0, 1, 2, 3, 4)
    # the two arms now have different fine-tuning seeds: fewer models, and still an answer
    found = by_flops(multipliers(curves["A"], curves["B"], resamples=RESAMPLES))
    assert found[BUDGETS[0]].n_finetune == 4
    assert found[BUDGETS[0]].kind == "estimate"
    assert found[BUDGETS[0]].ci_low < 4 < found[BUDGETS[0]].ci_high


def test_a_budget_without_a_complete_model_is_left_off_and_disjoint_seeds_give_no_curve():
    # C lacks one task at the 4th budget, and a seed-disjoint D shares no seed across budgets
    c = tidy("C", curve, seed=3).filter(
        ~((pl.col("checkpoint_fraction") == 0.5) & (pl.col("task") == TASKS[1]))
    )
    d = tidy("D", curve, seed=4).with_columns(
        pl.when(pl.col("checkpoint_fraction") == 1.0)
        .then(pl.col("finetune_seed") + 10)
        .otherwise(pl.col("finetune_seed"))
        .alias("finetune_seed")
    )
    frame = pl.concat([tidy("A", curve, seed=1), c, d, tidy("B", lambda x: curve(x / 4), seed=2)])
    curves = budget_curves(frame)
    assert list(curves) == ["A", "C", "B"]
    assert curves["C"].flops == pytest.approx(tuple(b for b in BUDGETS if b != 0.5 * TOTAL))

    found = family_efficiency("glue", frame, resamples=RESAMPLES)
    table = multiplier_table([found])
    assert set(table["a"]) | set(table["b"]) == {"A", "B", "C"}
    # every ordered pair, at each budget of its A: C has one budget fewer
    assert table.height == 2 * (2 * len(BUDGETS) + len(BUDGETS) - 1)
    assert crossover_table([found]).height == 3


def test_nan_values_are_left_out_like_missing_ones():
    a = tidy("A", curve, seed=1)
    nan = a.with_columns(
        pl.when((pl.col("checkpoint_fraction") == 0.25) & (pl.col("finetune_seed") == 3))
        .then(float("nan"))
        .otherwise(pl.col("value"))
        .alias("value")
    )
    assert budget_curves(nan)["A"].first.finetune_seeds == (0, 1, 2, 4)


# --- tables ---------------------------------------------------------------------------------


def planted_study():
    return pl.concat(
        [
            tidy("A", curve, seed=1),
            tidy("B", lambda x: curve(x / 4), seed=2),
            tidy("none", lambda _: 50.0, fractions=(0.0,), seed=3),
        ]
    )


def test_tables_have_their_schema_and_one_row_per_pair_and_budget():
    found = family_efficiency("glue", planted_study(), resamples=RESAMPLES)
    table = multiplier_table([found])
    assert dict(table.schema) == MULTIPLIER_COLUMNS
    assert table.height == 2 * len(BUDGETS)
    assert set(table["kind"].to_list()) <= KINDS
    assert table.filter(pl.col("a") == "A")["flops"].to_list() == pytest.approx(BUDGETS)
    crossings = crossover_table([found])
    assert dict(crossings.schema) == CROSSOVER_COLUMNS
    assert crossings.select("a", "b").rows() == [("A", "B"), ("A", "none"), ("B", "none")]
    assert crossings.filter(pl.col("b") == "B")["kind"].to_list() == ["a_ahead"]


def test_results_are_deterministic():
    frame = planted_study()
    first = family_efficiency("glue", frame, resamples=RESAMPLES)
    second = family_efficiency("glue", frame, resamples=RESAMPLES)
    assert_frame_equal(multiplier_table([first]), multiplier_table([second]))
    assert_frame_equal(crossover_table([first]), crossover_table([second]))
    # the seed is what fixes the intervals
    other = family_efficiency("glue", frame, resamples=RESAMPLES, seed=1)
    assert not multiplier_table([other])["ci_low"].equals(multiplier_table([first])["ci_low"])


# --- monotone fit and interpolation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "expected"),
    [
        ([1, 3, 2, 4], [1, 2.5, 2.5, 4]),
        ([3, 2, 1], [2, 2, 2]),
        ([1, 2, 3], [1, 2, 3]),
        ([5, 1, 1, 1, 6], [2, 2, 2, 2, 6]),
        ([2, 2, 1, 5, 3], [5 / 3, 5 / 3, 5 / 3, 4, 4]),
        ([7.0], [7.0]),
    ],
)
def test_isotonic_pools_adjacent_violators(y, expected):
    assert isotonic(np.array(y, dtype=float)) == pytest.approx(expected)


def test_isotonic_matches_a_reference_pava_row_by_row():
    rng = np.random.default_rng(7)
    y = rng.normal(size=(300, 6)) + np.linspace(0, 1, 6)
    fit = isotonic(y)
    assert fit.shape == y.shape
    assert np.all(np.diff(fit, axis=-1) >= -1e-12)
    expected = np.stack([reference_pava(row) for row in y])
    np.testing.assert_allclose(fit, expected, atol=1e-12)
    # the fit keeps each row's mean, and rows may carry more leading axes
    np.testing.assert_allclose(fit.mean(axis=-1), y.mean(axis=-1), atol=1e-12)
    np.testing.assert_allclose(isotonic(y.reshape(10, 30, 6)), fit.reshape(10, 30, 6))


def test_interpolate_is_linear_between_knots_row_by_row():
    xp = np.array([0.0, 1.0, 3.0])
    yp = np.array([[0.0, 2.0, 6.0], [1.0, 1.0, 0.0]])
    x = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(interpolate(x, xp, yp), [[0, 1, 2, 4, 6], [1, 1, 1, 0.5, 0]])
    assert interpolate(x, xp, yp[0]) == pytest.approx([0, 1, 2, 4, 6])


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (0.0, 0.0),  # reached at the first point
        (1.0, 0.5),
        (2.0, 1.0),  # the first of a plateau
        (2.5, 2.5),
        (3.0, 3.0),
        (-0.1, math.nan),  # above it already at the first point
        (3.1, math.nan),  # never reached
    ],
)
def test_first_reach_on_a_hand_example(target, expected):
    x = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([0.0, 2.0, 2.0, 3.0])
    found = first_reach(x, y, target)
    if math.isnan(expected):
        assert math.isnan(found)
    else:
        assert found == pytest.approx(expected)


# --- ties and options ----------------------------------------------------------------------


def test_a_crossover_exactly_at_a_budget_is_found():
    curves = curves_of(exact("A", [48, 50, 52]), exact("B", [50, 50, 50]))
    c = crossover(curves["A"], curves["B"], resamples=RESAMPLES)
    assert stats.verdict(">", c.start.ci_low, c.start.ci_high) == stats.CONTRADICTED
    assert stats.verdict(">", c.end.ci_low, c.end.ci_high) == stats.SUPPORTED
    assert c.kind == "crossover" and c.crossings == 1
    assert c.crossover == pytest.approx(0.5 * TOTAL)


def test_crossover_end_differences_use_the_confidence_asked_for():
    curves = curves_of(tidy("A", lambda x: curve(x) + 3, seed=1), tidy("B", curve, seed=2))
    c = crossover(curves["A"], curves["B"], resamples=RESAMPLES, confidence=0.5)
    expected = stats.difference(
        curves["A"].first, curves["B"].first, resamples=RESAMPLES, confidence=0.5
    )
    assert c.start.ci_low == pytest.approx(expected.ci_low)


def test_a_difference_inside_the_noise_floor_is_marked_not_to_be_drawn():
    """Issue 72: no multiplier or crossover is drawn for a difference the measured noise
    cannot tell from none; with one model per arm there is no measured floor at all."""
    spread = [-3.0, -1.5, 0.0, 1.5, 3.0]
    close = curves_of(
        tidy("A", lambda x: curve(x) + 0.2, noise=0, effect=0, offsets=spread),
        tidy("B", curve, noise=0, effect=0),
    )
    assert all(m.within_noise for m in multipliers(close["A"], close["B"], resamples=RESAMPLES))
    assert crossover(close["A"], close["B"], resamples=RESAMPLES).within_noise
    seeds = {"pretrain": 1, "finetune": 1}
    single = curves_of(
        tidy("A", curve, seed=1, **seeds), tidy("B", lambda x: curve(x / 4), seed=2, **seeds)
    )
    assert all(m.within_noise for m in multipliers(single["A"], single["B"], resamples=RESAMPLES))
    apart = curves_of(tidy("A", curve, seed=1), tidy("B", lambda x: curve(x / 4), seed=2))
    found = multipliers(apart["A"], apart["B"], resamples=RESAMPLES)
    assert not found[0].within_noise and found[0].ci_low > 1  # fourfold, resolved: drawn
