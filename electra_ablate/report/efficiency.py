"""The report's "Compute efficiency" section and figure: how much pre-training compute one
objective saves over another, and from what budget on one leads, read from curves of scores
against FLOPs (``electra_ablate.analysis.efficiency``, where the statistics and their intervals
are defined).

Nothing here names a task family: the caller passes one family's aggregated rows and scores.
The numbers go beside the report as ``compute_efficiency.csv`` (multipliers) and
``crossovers.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from electra_ablate.analysis import efficiency, stats
from electra_ablate.analysis.efficiency import Crossover, Efficiency, Multiplier
from electra_ablate.analysis.results import score_aggregation
from electra_ablate.evaluation.task import TaskFamily
from electra_ablate.report.markdown import NO_VALUE, figure, sci, table
from electra_ablate.report.plots import (
    FLOPS_LABEL,
    PANEL_HEIGHT,
    PANEL_WIDTH,
    band_columns,
    flops_axis,
    median_with_band,
    remove_figure,
    save_figure,
)
from electra_ablate.report.verdicts import NO_INTERVAL, NO_INTERVAL_NOTE, signed, with_interval

EFFICIENCY_FILE = "compute_efficiency.csv"
CROSSOVERS_FILE = "crossovers.csv"

READING = (
    "How much pre-training compute one objective saves over another, and from what budget on "
    "one leads, each with its 95% CI from the same bootstrap over seeds as the scores. A "
    "**multiplier** in row A, column C is the compute B needs to reach A's score at C, as a "
    "multiple of C, read on B's curve (fitted non-decreasing, interpolated on log-FLOPs): "
    "4× says B needs four times A's compute for A's score, 0.25× a quarter of it. `>` marks a "
    "bound where B's measured curve never reaches A's score (beyond the budgets measured: "
    "nothing is extrapolated), `<` one where B is above it already at its smallest budget; "
    "`≥`/`≤` in an interval, an end the budgets measured do not close. A **crossover** is "
    "where A − B changes sign between the budgets both were evaluated at; each end's "
    "difference is the paired one of the score tables. `compute_efficiency.csv` and "
    "`crossovers.csv` beside this report hold every number."
)


def family_efficiency(values: pl.DataFrame, family: TaskFamily) -> Efficiency:
    """One family's multipliers and crossovers from its aggregated rows at every checkpoint
    (``values``: the family's rows with ``in_aggregate``)."""
    return efficiency.family_efficiency(family.name, values, score_aggregation())


# --- text -----------------------------------------------------------------------------------


def times(x: float) -> str:
    """``6.6×``, ``12×``, ``0.16×``: two significant digits."""
    if x == 0:
        return "0"
    if math.isinf(x):
        return "∞"
    digits = max(0, 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{digits}f}×"


def has_interval(low: float, high: float) -> bool:
    return not (math.isnan(low) or math.isnan(high))


def bounded(low: float, high: float, show: Callable[[float], str], anything: str) -> str:
    """``[low, high]`` with ``show`` for each end; ``[≥ low]`` / ``[≤ high]`` where the range
    measured leaves an end open (``0`` / ``inf``), ``anything`` where it leaves both."""
    if low == 0 and math.isinf(high):
        return anything
    if low == 0:
        return f"[≤ {show(high)}]"
    if math.isinf(high):
        return f"[≥ {show(low)}]"
    return f"[{show(low)}, {show(high)}]"


def multiplier_cell(m: Multiplier, mark: bool = True) -> str:
    """``6.6× [6.1×, 7.3×]``, ``> 4.0× [≥ 4.0×]``, ``unresolved (6.6×, [any])``; without an
    interval the estimate alone, marked ``NO_INTERVAL`` when ``mark`` (as in the score
    tables: where nothing has an interval, the section says so once)."""
    value = {"estimate": "", "lower_bound": "> ", "upper_bound": "< "}[m.point] + times(
        m.multiplier
    )
    if not has_interval(m.ci_low, m.ci_high):
        return f"{value}{NO_INTERVAL}" if mark else value
    ci = bounded(m.ci_low, m.ci_high, times, "[any]")
    if m.kind == "unresolved":
        return f"unresolved ({value}, {ci})"
    return f"{value} {ci}"


def crossover_cell(c: Crossover, mark: bool = True) -> str:
    """What A − B does between the first and last shared budget, in words."""
    where = f"in [{sci(c.flops_min)}, {sci(c.flops_max)}]"
    if c.crossings:
        before, after = (c.b, c.a) if c.start.value < 0 else (c.a, c.b)
        at = f"at {sci(c.crossover)}"
        if has_interval(c.ci_low, c.ci_high):
            at += f" {bounded(c.ci_low, c.ci_high, sci, '[anywhere]')}"
        elif mark:
            at += NO_INTERVAL
        text = f"{at}: {before} ahead before, {after} after"
        if c.crossings > 1:
            text += f" (the first of {c.crossings} sign changes)"
        return f"unresolved: {text}" if c.kind == "unresolved" else text
    ahead = {"a_ahead": f"{c.a} ahead throughout", "b_ahead": f"{c.b} ahead throughout"}
    return f"none {where}: " + ahead.get(c.kind, "unresolved (neither end resolved)")


def difference_cell(d: stats.Difference, mark: bool = True) -> str:
    return with_interval(signed(d.value, 1), d.ci_low, d.ci_high, sign=True, mark=mark)


def interval_marks(found: Sequence[Efficiency]) -> tuple[bool, bool]:
    """(some figure has an interval, some has none): figures without one are marked only
    where others have one; where none has one, the section says so once."""
    bounds = [(m.ci_low, m.ci_high) for e in found for m in e.multipliers]
    bounds += [(d.ci_low, d.ci_high) for e in found for c in e.crossovers for d in (c.start, c.end)]
    present = [has_interval(low, high) for low, high in bounds]
    return any(present), not all(present)


SAME_BUDGET = 0.02
"""Budgets within this relative distance are one column: every objective of a study reaches a
checkpoint's FLOPs within a step of the others."""


def budget_columns(flops: Sequence[float]) -> list[float]:
    """The distinct budgets of a table, ascending: those within ``SAME_BUDGET`` of the
    previous one are one column, at their mean."""
    groups: list[list[float]] = []
    for x in sorted(flops):
        if not groups or x > groups[-1][-1] * (1 + SAME_BUDGET):
            groups.append([])
        groups[-1].append(x)
    return [sum(g) / len(g) for g in groups]


def shown(found: Efficiency, reference: str | None) -> Callable[[tuple[str, str]], bool]:
    """Whether the report's markdown and figure show pair (A, B): a pair with the headline's
    reference (``lead.headline_reference``: BERT's MLM) or with a reference evaluated without
    pre-training (a flat curve: from what budget pre-training beats it), or every pair when
    there is no reference; the rest are in the CSV files (issue 69: 42 multiplier rows and 28
    crossovers buried the answer)."""
    keep = {reference} | {label for label, c in found.curves.items() if c.flat}
    return lambda pair: reference is None or bool(keep & set(pair))


def multiplier_table_md(found: Efficiency, mark: bool, reference: str | None = None) -> str:
    """One row per ordered pair, one column per budget (a pair lacks the budgets its A was
    not evaluated at)."""
    columns = budget_columns([m.flops for m in found.multipliers])
    rows = []
    for (a, b), found_pair in found.multipliers_by_pair().items():
        if all(m.within_noise for m in found_pair) or not shown(found, reference)((a, b)):
            continue  # nothing outside the noise floor: no row (``drawn_pairs`` says so)
        cells = [NO_VALUE] * len(columns)
        for m in found_pair:
            at = min(range(len(columns)), key=lambda i: abs(math.log(m.flops / columns[i])))
            cells[at] = WITHIN_NOISE if m.within_noise else multiplier_cell(m, mark)
        rows.append([a, b, *cells])
    return table(["A", "B", *(f"at {sci(x)}" for x in columns)], rows)


def crossover_table_md(found: Efficiency, mark: bool, reference: str | None = None) -> str:
    head = ["A", "B", "Crossover of A − B", "A − B at the first budget", "A − B at the last"]
    rows = [
        [
            c.a,
            c.b,
            crossover_cell(c, mark),
            difference_cell(c.start, mark),
            difference_cell(c.end, mark),
        ]
        for c in found.crossovers
        if not c.within_noise and shown(found, reference)((c.a, c.b))
    ]
    return table(head, rows)


WITHIN_NOISE = "within noise"
"""A multiplier cell whose difference the measured noise floor holds (``Multiplier.within_noise``):
not drawn."""


def within_noise_line(found: Efficiency, reference: str | None = None) -> str:
    """One line naming the pairs shown (``shown``) whose every multiplier, or whose
    crossover, lies inside the noise floor and so has no row (issue 72: nothing is drawn for
    such a difference)."""
    show = shown(found, reference)
    quiet = [
        f"{a} over {b}"
        for (a, b), ms in found.multipliers_by_pair().items()
        if all(m.within_noise for m in ms) and show((a, b))
    ]
    crossings = [
        f"{c.a} and {c.b}" for c in found.crossovers if c.within_noise and show((c.a, c.b))
    ]
    parts = []
    if quiet:
        parts.append(f"no multiplier of {', '.join(quiet)}")
    if crossings:
        parts.append(f"no crossover of {', '.join(crossings)}")
    return inside_noise_floor(parts, "report")


def inside_noise_floor(undrawn: list[str], beside: str) -> str:
    """The line for estimates inside the noise floor, ``undrawn`` naming them, the CSV files
    beside this ``beside`` (a report, a comparison page) holding them; empty when none is."""
    if not undrawn:
        return ""
    return (
        f"*Inside the noise floor* (the 95% CI of the difference holds none, or 1×), so not "
        f"drawn: {'; '.join(undrawn)}. Their estimates are in the CSV files beside this {beside}."
    )


NO_FLOOR = (
    "One model per objective (one pre-training and one fine-tuning seed): there is no measured "
    "noise floor, so no multiplier or crossover is drawn; the estimates alone are in "
    "`compute_efficiency.csv` and `crossovers.csv`."
)


ONE_BUDGET = (
    "One budget per objective: a multiplier or a crossover needs each objective's score at two "
    "budgets at least, so there is none (keep checkpoints, `budget.checkpoints`, to trace "
    "curves)."
)


def heading(family: TaskFamily) -> str:
    return family.aggregate or family.title


def family_part(
    found: Efficiency, family: TaskFamily, stem: str | None, reference: str | None = None
) -> str | None:
    """One family's subsection: multipliers, crossovers, the figure; None when its objectives
    were evaluated at one budget (``section`` says so). With a ``reference`` label only its
    pairs (``headline``), and a line says where the others are."""
    if found.budgets < 2:
        return None
    some, missing = interval_marks([found])
    mark = some and missing
    parts = [f"### {heading(family)}"]
    if not some:
        return "\n\n".join([*parts, NO_FLOOR])
    show = shown(found, reference)
    drawn = [m for m in found.multipliers if not m.within_noise and show((m.a, m.b))]
    if reference is not None:
        parts.append(
            f"Each objective against {reference} here; every other pair is in "
            f"`{EFFICIENCY_FILE}` and `{CROSSOVERS_FILE}` beside this report."
        )
    if drawn:
        parts += ["Multipliers (B's compute for A's score, as a multiple of A's):"]
        parts.append(multiplier_table_md(found, mark, reference))
    elif not found.multipliers:
        parts.append("One pre-trained objective: no pair to compute a multiplier for.")
    if any(not c.within_noise and show((c.a, c.b)) for c in found.crossovers):
        parts += [
            "Crossovers, and each objective against the references evaluated without pre-training:",
            crossover_table_md(found, mark, reference),
        ]
    quiet = within_noise_line(found, reference)
    if quiet:
        parts.append(quiet)
    if stem is not None:
        parts.append(figure(f"{family.title}: compute efficiency", stem))
    return "\n\n".join(parts)


def section(parts: Sequence[tuple[str, str | None]]) -> str:
    """The whole section from each family's (name, part): the parts, a line per family with
    one budget, or one line when every family has one budget."""
    written = [part for _, part in parts if part is not None]
    if not written:
        return f"## Compute efficiency\n\n{ONE_BUDGET}"
    single = [name for name, part in parts if part is None]
    marked = any(NO_INTERVAL in part for part in written)
    return "\n\n".join(
        [
            "## Compute efficiency",
            READING,
            *written,
            *([f"{', '.join(single)}: {ONE_BUDGET[0].lower()}{ONE_BUDGET[1:]}"] if single else []),
            *([NO_INTERVAL_NOTE] if marked else []),
        ]
    )


# --- figure ---------------------------------------------------------------------------------


def plot_efficiency(
    found: Efficiency,
    family: TaskFamily,
    scores: pl.DataFrame,
    colors: Mapping[str, tuple],
    out_dir,
    reference: str | None = None,
) -> str | None:
    """``efficiency_figure`` saved as ``<family>_efficiency``; returns that stem, or None when
    there is no pair to draw, and then an earlier report's figure of that name is removed: a
    rewritten report must not leave a figure beside it that it no longer draws."""
    fig = efficiency_figure(found, family, scores, colors, reference)
    stem = f"{family.name}_efficiency"
    if fig is None:
        remove_figure(out_dir, stem)
        return None
    save_figure(fig, out_dir, stem)
    return stem


def efficiency_figure(
    found: Efficiency,
    family: TaskFamily,
    scores: pl.DataFrame,
    colors: Mapping[str, tuple],
    reference: str | None = None,
) -> Figure | None:
    """A row per pair of pre-trained objectives: both curves with their 95% CI bands and the
    crossover marked (left), the multiplier of each over the other against budget (right, log
    scale). Only what lies outside the measured noise floor is drawn (``within_noise``): a pair
    with nothing outside it has no row. None when there is no pair to draw."""
    trained = [label for label, c in found.curves.items() if not c.flat and len(c.flops) > 1]
    outside = {(m.a, m.b) for m in found.multipliers if not m.within_noise}
    outside |= {(c.a, c.b) for c in found.crossovers if not c.within_noise}
    pairs = [
        (a, b)
        for a, b in combinations(trained, 2)
        if {(a, b), (b, a)} & outside and shown(found, reference)((a, b))
    ]
    if not pairs:
        return None
    if reference is not None:
        return against_reference_figure(
            found, reference, [b if a == reference else a for a, b in pairs], colors
        )
    fig = Figure(figsize=(2 * PANEL_WIDTH, 0.85 * PANEL_HEIGHT * len(pairs)), layout="constrained")
    axes = fig.subplots(len(pairs), 2, squeeze=False)
    band = band_columns(scores)
    crossings = {(c.a, c.b): c for c in found.crossovers}
    for (a, b), (left, right) in zip(pairs, axes, strict=True):
        pair = {label: colors[label] for label in (a, b)}
        median_with_band(left, scores.filter(pl.col("label").is_in(pair)), pair, band)
        if (c := crossings.get((a, b))) is not None and c.crossings and not c.within_noise:
            mark_crossover(left, c)
        left.set_ylabel(family.aggregate or family.title, fontsize="small")
        left.set_title(f"{a} vs {b}", fontsize="small")
        left.legend(fontsize="x-small")
        for x, y in ((a, b), (b, a)):
            own = [m for m in found.multipliers if m.a == x and m.b == y and not m.within_noise]
            multiplier_panel(right, own, colors[x], f"{y}'s compute for {x}'s score")
        right.axhline(1.0, color="0.5", linewidth=0.8)
        multiplier_axis(right)
        right.set_ylim(*multiplier_limits([m for m in found.multipliers if {m.a, m.b} == {a, b}]))
        right.set_ylabel("multiplier", fontsize="small")
        right.legend(fontsize="x-small")
        flops_axis(right, sorted({m.flops for m in found.multipliers if m.a in (a, b)}))
    for ax in axes[-1]:
        ax.set_xlabel(FLOPS_LABEL, fontsize="small")
    return fig


MAX_HEIGHT = 2000 / 120
"""The tallest a figure of this section may be, in inches at the report's 120 dpi (issue 69:
a panel per pair grew to 6,854 px, its ticks overprinted)."""


def against_reference_figure(
    found: Efficiency, reference: str, others: Sequence[str], colors: Mapping[str, tuple]
) -> Figure:
    """Two panels whatever the number of objectives: each objective's multiplier over the
    reference (the reference's compute for its score, left) and the reference's over each
    (its compute for the reference's score, right), against budget; only what lies outside
    the noise floor."""
    height = min(MAX_HEIGHT, 1.3 * PANEL_HEIGHT + 0.12 * len(others))
    fig = Figure(figsize=(2 * PANEL_WIDTH, height), layout="constrained")
    axes = fig.subplots(1, 2, squeeze=False)[0]
    for ax, over in zip(axes, (True, False), strict=True):
        shown_here = []
        for other in others:
            a, b = (other, reference) if over else (reference, other)
            own = [m for m in found.multipliers if (m.a, m.b) == (a, b) and not m.within_noise]
            multiplier_panel(ax, own, colors[other], other)
            shown_here += [m for m in found.multipliers if {m.a, m.b} == {a, b}]
        ax.axhline(1.0, color="0.5", linewidth=0.8)
        multiplier_axis(ax)
        ax.set_ylim(*multiplier_limits(shown_here))
        ax.set_title(
            f"{reference}'s compute for each one's score"
            if over
            else f"each one's compute for {reference}'s score",
            fontsize="small",
        )
        ax.set_ylabel("multiplier", fontsize="small")
        ax.set_xlabel(FLOPS_LABEL, fontsize="small")
        flops_axis(ax)  # ticks spaced so their labels never overlap
    handles = {}
    for ax in axes:
        handles.update({label: h for h, label in zip(*ax.get_legend_handles_labels(), strict=True)})
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncols=4,
            fontsize="x-small",
        )
    return fig


def mark_crossover(ax: Axes, c: Crossover) -> None:
    ax.axvline(c.crossover, color="0.3", linestyle="--", linewidth=0.9)
    if not math.isnan(c.ci_low):
        low = max(c.ci_low, c.flops_min)
        high = min(c.ci_high, c.flops_max)
        ax.axvspan(low, high, color="0.5", alpha=0.12, lw=0)


def multiplier_panel(ax: Axes, found: list[Multiplier], color: tuple, label: str) -> None:
    """Estimates as dots, bounds as triangles pointing the way the bound opens, unresolved ones
    hollow; intervals as bars, an open end drawn to the panel's edge."""
    if not found:
        return
    x = np.array([m.flops for m in found])
    y = np.array([m.multiplier for m in found])
    ax.plot(x, y, "-", color=color, linewidth=0.8, alpha=0.6)
    for m in found:
        marker = {"estimate": "o", "lower_bound": "^", "upper_bound": "v"}[m.point]
        face = "none" if m.kind == "unresolved" else color
        ax.plot([m.flops], [m.multiplier], marker, color=color, markerfacecolor=face, ms=5)
        if not math.isnan(m.ci_low):  # an open end runs off the panel (multiplier_limits)
            low, high = max(m.ci_low, OFF_PANEL[0]), min(m.ci_high, OFF_PANEL[1])
            ax.plot([m.flops, m.flops], [low, high], color=color, linewidth=1.2, alpha=0.7)
    ax.plot([], [], "o", color=color, label=label, ms=4)


OFF_PANEL = (1e-12, 1e12)


def multiplier_axis(ax: Axes) -> None:
    """Log y-axis with ticks at powers of two, labelled ``0.25×``, ``1.0×``, ``4.0×``."""
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_locator(LogLocator(base=2))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: times(y)))
    ax.tick_params(axis="y", labelsize="small")


def multiplier_limits(found: list[Multiplier]) -> tuple[float, float]:
    """The multiplier panel's y-range: every estimate, bound and closed interval end, and 1,
    with a margin; open ends run beyond it."""
    values = [1.0]
    for m in found:
        values += [v for v in (m.multiplier, m.ci_low, m.ci_high) if 0 < v < math.inf]
    return min(values) / 2, max(values) * 2
