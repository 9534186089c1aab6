"""The report's figures, as PNG (for reading on GitHub) and SVG (for papers and slides).

Figures are built on ``matplotlib.figure.Figure`` directly, so no pyplot state or interactive
backend is involved; PNGs go through Agg. The x-axis is always cumulative pre-training FLOPs in
the paper's convention on a log scale, as in the ELECTRA paper's figures. Each figure is built
by a ``*_figure`` function that returns it: the report saves it (``save_figure``, or a
``plot_*`` function that does both) and ``electra_ablate.api`` hands it to a notebook, so a
notebook's figure is the report's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from electra_ablate.analysis.results import constant_tasks, ordered_tasks
from electra_ablate.evaluation.task import TaskFamily
from electra_ablate.infra.entry_points import registered
from electra_ablate.infra.storage import atomic_file
from electra_ablate.pretraining.metric_names import KIND_PRIOR, metric_kind
from electra_ablate.pretraining.registry import ENTRY_POINT_GROUP

BASELINE_OBJECTIVE = "none"  # = study.units.BASELINE_OBJECTIVE (kept free of torch imports)
FLOPS_LABEL = "pre-training FLOPs (paper convention)"
PANEL_WIDTH, PANEL_HEIGHT = 4.2, 3.2
BASELINE_COLOR = (0.35, 0.35, 0.35)


def format_flops(x: float) -> str:
    """FLOPs as ``1.23e16``: short, and the way the paper writes them."""
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def tick_label(x: float) -> str:
    """A tick's FLOPs as ``3e13``: two characters of mantissa at most, so ticks never collide."""
    mantissa, exponent = f"{x:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


TICK_MANTISSAS = ((1.0, 3.0), (1.0, 2.0, 5.0), tuple(float(m) for m in range(1, 10)))
"""Tick mantissas per decade, coarsest first: an axis takes the first set that puts at least
three ticks in view (a range within one decade needs the finer ones)."""


def log_ticks(low: float, high: float) -> list[float]:
    """Ticks for a log axis from ``low`` to ``high``, at one-digit mantissas, so every label
    (``tick_label``) is distinct and short."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    ticks: list[float] = []
    for mantissas in TICK_MANTISSAS:
        ticks = [
            m * 10.0**k
            for k in range(first, last + 1)
            for m in mantissas
            if low <= m * 10.0**k <= high
        ]
        if len(ticks) >= 3:
            break
    return ticks


def flops_axis(ax: Axes, ticks: Sequence[float] | None = None) -> None:
    """Log x-axis labelled ``1e13 3e13 1e14``: ticks at the given FLOPs (the checkpoints), else
    at one-digit mantissas spaced so their labels never overlap (``log_ticks``); no minor ticks
    (mathtext labels on every minor tick clutter and are most of the drawing time). Call it
    after drawing: it reads the data's range."""
    ax.set_xscale("log")
    if ticks:
        ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_flops(x)))
    else:
        ax.autoscale_view()
        low, high = ax.get_xlim()
        if low > 0 and high > low:
            ax.set_xlim(low, high)
            ax.xaxis.set_major_locator(FixedLocator(log_ticks(low, high)))
        else:
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 3.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: tick_label(x)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.tick_params(axis="x", labelsize="small")


PALETTE = tuple(matplotlib.colormaps["tab10"].colors) + tuple(
    matplotlib.colormaps["tab20"].colors[1::2]
)
"""Twenty colours: tab10's ten, then their lighter twins."""

TOOLKIT_DISTRIBUTION = "electra-ablate"


def objective_order() -> list[str]:
    """Every registered objective, the toolkit's own first, then plugins', each by name: the
    order that fixes each objective's colour (names only: no objective is imported)."""
    found = registered(ENTRY_POINT_GROUP)
    own = sorted(ep.name for ep in found if ep.dist and ep.dist.name == TOOLKIT_DISTRIBUTION)
    return own + sorted({ep.name for ep in found} - set(own))


def objective_colors(objective_of: Mapping[str, str]) -> dict[str, tuple[float, ...]]:
    """A colour per label (``objective_of``: label -> objective) that depends on the objective
    only, so BERT has one colour in every report and every ``ablate compare`` figure.

    The registered objectives own the first slots of ``PALETTE`` in ``objective_order``. Where
    several labels run one objective (a generator-size study: five ELECTRA arms), each gets
    its own colour from the slots no objective of the figure owns, in label order, so the arms
    stay apart; a study with one arm per objective never uses them.
    """
    order = objective_order()
    slot = {name: i for i, name in enumerate(order)}
    labels_of: dict[str, list[str]] = {}
    for label, objective in objective_of.items():
        labels_of.setdefault(objective, []).append(label)
    owned = {slot[o] for o in labels_of if o in slot and len(labels_of[o]) == 1}
    spare = [i for i in range(len(PALETTE)) if i not in owned]
    colors = {}
    for objective, labels in labels_of.items():
        if len(labels) == 1 and objective in slot:
            colors[labels[0]] = PALETTE[slot[objective] % len(PALETTE)]
    for label in sorted(x for x in objective_of if x not in colors):
        colors[label] = PALETTE[spare.pop(0) if spare else len(colors) % len(PALETTE)]
    return {label: colors[label] for label in objective_of}


SAVE_DPI = 120
"""The figures' resolution: the layout is solved at it, and both files are saved at it."""


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg``; the SVG carries no date and fixed ids (byte-stable).

    The constrained layout is solved once, at the saving dpi, before either file, and kept for
    both: ``savefig`` of a figure with a layout engine solves it in a draw of its own and again
    in the draw that renders, and a third time for a second format. The positions are the same
    (every committed report's figures regenerated byte for byte); on the smoke study a report
    took 7.6 s against 8.3 s (2 cores, 2026-11-29). The layout is solved by the engine itself,
    not by a draw without rendering (which solves it, then walks every artist for nothing):
    the same bytes, and a quarter less CPU for a ``micro`` study's report (2.2 s against 3.0 s,
    one thread, 2026-11-29)."""
    paths = []
    fig.set_dpi(SAVE_DPI)
    engine = fig.get_layout_engine()
    if engine is not None and fig.axes:  # as a draw would: the layout, solved once
        engine.execute(fig)
    fig.set_layout_engine(None)  # positions stay where the layout put them
    with matplotlib.rc_context({"svg.hashsalt": "electra-ablate"}):
        for fmt, metadata in (("png", {"Software": None}), ("svg", {"Date": None})):
            path = Path(out_dir) / f"{stem}.{fmt}"
            with atomic_file(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=SAVE_DPI, metadata=metadata)
            paths.append(path)
    return paths


def remove_figure(out_dir: Path, stem: str) -> None:
    """Remove ``stem.png`` and ``stem.svg`` (what ``save_figure`` writes) where present."""
    for fmt in ("png", "svg"):
        (Path(out_dir) / f"{stem}.{fmt}").unlink(missing_ok=True)


def grid(n_panels: int, max_cols: int = 3) -> tuple[Figure, list[Axes]]:
    cols = min(max_cols, n_panels)
    rows = math.ceil(n_panels / cols)
    fig = Figure(figsize=(PANEL_WIDTH * cols, PANEL_HEIGHT * rows), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for spare in axes[n_panels:]:
        spare.set_visible(False)
    return fig, axes[:n_panels]


MIN_SPAN_SHARE = 0.1
"""A panel's y-range spans at least this share of its largest |value| (and 0.05): a metric that
barely moves (an AUC at 0.52 ± 0.003) stays a flat line instead of being autoscaled into noise."""


def band_columns(summary: pl.DataFrame) -> tuple[str, str] | None:
    """The band a score figure shades: the 95% CI where the rows carry one, else none."""
    if {"ci_low", "ci_high"} <= set(summary.columns) and summary["ci_low"].is_not_nan().any():
        return "ci_low", "ci_high"
    return None


def median_with_band(
    ax: Axes,
    summary: pl.DataFrame,
    colors: Mapping[str, tuple],
    band: tuple[str, str] | None = ("min", "max"),
) -> None:
    """One line per label through the medians, shaded over ``band`` (two columns: min–max
    across seeds, or a CI; None: no band); rows at zero pre-training FLOPs (off a log axis) as
    horizontal lines: the no-pre-training baseline dashed with its band, a task's reference
    scorer (a count-based detector) dotted."""
    curves = summary.filter(pl.col("flops_paper") > 0)
    for label, color in colors.items():
        points = curves.filter(pl.col("label") == label).sort("flops_paper")
        if points.is_empty():
            continue
        x = points["flops_paper"].to_list()
        if band is not None:  # a point without an interval (one model) pinches the band
            low, high = (points[c].fill_nan(None).fill_null(points["median"]) for c in band)
            ax.fill_between(x, low.to_list(), high.to_list(), color=color, alpha=0.2, lw=0)
        ax.plot(x, points["median"].to_list(), "o-", color=color, label=label, markersize=4)
    for row in summary.filter(pl.col("flops_paper") == 0).iter_rows(named=True):
        if row["objective"] == BASELINE_OBJECTIVE:
            if band is not None and row[band[0]] is not None and not math.isnan(row[band[0]]):
                ax.axhspan(row[band[0]], row[band[1]], color=BASELINE_COLOR, alpha=0.12, lw=0)
            color, style = BASELINE_COLOR, "--"
        else:
            color, style = colors.get(row["label"], BASELINE_COLOR), ":"
        ax.axhline(row["median"], color=color, linestyle=style, linewidth=1.2, label=row["label"])
    # one tick per checkpoint: objectives reach a budget fraction within a step of each other
    ticks = curves.group_by("checkpoint_fraction").agg(pl.col("flops_paper").mean())
    flops_axis(ax, ticks["flops_paper"].to_list())
    ax.grid(True, which="major", alpha=0.3)


def plot_scores_vs_flops(
    family: TaskFamily, scores: pl.DataFrame, colors: Mapping[str, tuple], out_dir: Path
) -> list[Path]:
    """``scores_figure`` saved as ``<family>_vs_flops``."""
    return save_figure(scores_figure(family, scores, colors), out_dir, f"{family.name}_vs_flops")


def scores_figure(family: TaskFamily, scores: pl.DataFrame, colors: Mapping[str, tuple]) -> Figure:
    """One family's score per model against pre-training FLOPs, with its 95% CI as a band; the
    legend sits beside the axes, never over a line."""
    fig = Figure(figsize=(7.6, 4.4), layout="constrained")
    ax = fig.subplots()
    band = band_columns(scores)
    median_with_band(ax, scores, colors, band)
    ax.set_xlabel(FLOPS_LABEL)
    what = "band: 95% CI" if band else "no band: one model per point, so no CI"
    ax.set_ylabel(f"{family.aggregate} (median per model)")
    ax.set_title(what, fontsize="small")
    fig.legend(loc="outside right upper", fontsize="small")
    return fig


def plot_task_scores(
    family: TaskFamily, tasks: pl.DataFrame, colors: Mapping[str, tuple], out_dir: Path
) -> list[Path]:
    """``task_scores_figure`` saved as ``<family>_tasks_vs_flops``."""
    figure = task_scores_figure(family, tasks, colors)
    return save_figure(figure, out_dir, f"{family.name}_tasks_vs_flops")


def task_scores_figure(
    family: TaskFamily, tasks: pl.DataFrame, colors: Mapping[str, tuple]
) -> Figure:
    """One panel per task of the family, its headline metric against pre-training FLOPs."""
    headline = tasks.filter(pl.col("headline"))
    names = ordered_tasks(headline["task"].to_list())
    final = float(tasks["checkpoint_fraction"].max())
    constant = constant_tasks(tasks, final)
    fig, axes = grid(len(names))
    for ax, task in zip(axes, names, strict=True):
        rows = headline.filter(pl.col("task") == task)
        median_with_band(ax, rows, colors)
        left_out = family.aggregate is not None and not rows["in_aggregate"].any()
        note = f" — not in {family.aggregate}" if left_out else ""
        if task in constant:
            note += f"\nevery model {constant[task]:.1f} at {final:.0%}"
        ax.set_title(f"{task} ({rows['metric'][0]}){note}", fontsize="medium")
        ax.set_xlabel(FLOPS_LABEL, fontsize="small")
    several_seeds = bool((headline["n"] > 1).any()) if "n" in headline.columns else True
    band = "; band: min–max over seeds" if several_seeds else " (one seed: no band)"
    fig.suptitle(f"median over models{band}", fontsize="small")
    # a legend entry drawn as its rows are: curves with markers, references dotted at 0 FLOPs
    curves = set(headline.filter(pl.col("flops_paper") > 0)["label"].to_list())
    handles = [
        Line2D([], [], color=c, marker="o", label=label)
        if label in curves
        else Line2D([], [], color=c, linestyle=":", linewidth=1.2, label=label)
        for label, c in colors.items()
        if label in set(headline["label"].to_list())
    ]
    if (headline["objective"] == BASELINE_OBJECTIVE).any():
        handles.append(
            Line2D([], [], color=BASELINE_COLOR, linestyle="--", label="no pre-training")
        )
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
    return fig


def keep_flat_flat(ax: Axes) -> None:
    """Widen a panel's y-range to ``MIN_SPAN_SHARE`` of its largest |value| around its middle,
    so a near-constant curve is drawn flat."""
    low, high = ax.get_ylim()
    span = max(MIN_SPAN_SHARE * max(abs(low), abs(high)), 0.05)
    if high - low < span:
        middle = (low + high) / 2
        ax.set_ylim(middle - span / 2, middle + span / 2)


def curve_panels(
    metrics: pl.DataFrame, panels: Sequence[tuple[str, str]]
) -> list[tuple[str, str, str | None]]:
    """(metric, title, group) per panel. Without variants one panel per metric, a line per
    label; with variants one panel per (objective entry, metric), a line per variant, since
    a recipe study asks how each setting moves one objective's curve."""
    present = [
        (m, t)
        for m, t in panels
        if m in metrics.columns and metrics[m].null_count() < metrics.height
    ]
    if "variant" not in metrics.columns or metrics["variant"].null_count() == metrics.height:
        return [(m, t, None) for m, t in present]
    out = []
    for group in dict.fromkeys(base_label(label) for label in metrics["label"].to_list()):
        rows = metrics.filter(
            pl.col("label").map_elements(base_label, return_dtype=pl.String) == group
        )
        out += [
            (m, f"{group}: {t}", group) for m, t in present if rows[m].null_count() < rows.height
        ]
    return out


def base_label(label: str) -> str:
    """``electra@pre_ln`` -> ``electra``."""
    return label.rsplit("@", 1)[0]


def pretrain_curves_figure(
    metrics: pl.DataFrame,
    colors: Mapping[str, tuple],
    panels: Sequence[tuple[str, str]],
    smoothing: int,
) -> Figure:
    """Training curves smoothed over ``smoothing`` logged points (solid) and held-out values
    at the checkpoints (dots), one line per run, in the panels ``curve_panels`` chooses."""
    logged = metrics.filter(pl.col("flops_paper") > 0).sort(["run_id", "split", "step"])
    layout = curve_panels(logged, panels)
    by_variant = any(group is not None for _, _, group in layout)
    fig, axes = grid(len(layout))
    for ax, (name, title, group) in zip(axes, layout, strict=True):
        rows = (
            logged
            if group is None
            else logged.filter(
                pl.col("label").map_elements(base_label, return_dtype=pl.String) == group
            )
        )
        present = rows.filter(pl.col(name).is_not_null())
        for (_, split), curve in present.group_by(["run_id", "split"], maintain_order=True):
            key = curve["variant"][0] if by_variant else curve["label"][0]
            color = colors.get(key, "grey")
            x = curve["flops_paper"].to_list()
            if split == "train":
                y = curve[name].rolling_mean(smoothing, min_samples=1).to_list()
                ax.plot(x, y, "-", color=color, linewidth=1.2)
            else:
                ax.plot(x, curve[name].to_list(), "o", color=color, markersize=4)
        prior = KIND_PRIOR.get(metric_kind(name) or "")
        if prior is not None:  # where a model that learnt nothing sits
            ax.axhline(prior, color="black", linewidth=0.6, linestyle=":")
        flops_axis(ax)
        keep_flat_flat(ax)
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel(FLOPS_LABEL, fontsize="small")
        ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color=c, label=label) for label, c in colors.items()]
    handles += [
        Line2D([], [], color="black", linestyle="-", label="train (smoothed)"),
        Line2D([], [], color="black", linestyle="", marker="o", label="held-out"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5))
    return fig
