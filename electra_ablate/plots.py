"""The report's figures, as PNG (for reading on GitHub) and SVG (for papers and slides).

Figures are built on ``matplotlib.figure.Figure`` directly, so no pyplot state or interactive
backend is involved; PNGs go through Agg. The x-axis is always cumulative pre-training FLOPs in
the paper's convention on a log scale, as in the ELECTRA paper's figures.
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

from electra_ablate.results import EXCLUDED_FROM_GLUE, ordered_tasks
from electra_ablate.storage import atomic_file

# Identity columns of pretrain_metrics.parquet; every other numeric column is a logged metric.
PRETRAIN_ID_COLUMNS = frozenset(
    {
        "run_id",
        "objective",
        "label",
        "pretrain_seed",
        "step",
        "flops_paper",
        "flops_standard",
        "split",
    }
)
# Logged, but they describe the machine or the schedule rather than what the model learned.
NOT_A_CURVE = frozenset({"tokens_per_s", "lr", "stage", "wall_s", "elapsed_s"})

FLOPS_LABEL = "pre-training FLOPs (paper convention)"
PANEL_WIDTH, PANEL_HEIGHT = 4.2, 3.2


def format_flops(x: float) -> str:
    """FLOPs as ``1.23e16``: short, and the way the paper writes them."""
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _flops_axis(ax: Axes, ticks: Sequence[float] | None = None) -> None:
    """Log x-axis labelled in plain ``1.00e15`` text.

    A study's budget spans less than a decade, where matplotlib's default labels every minor
    tick with mathtext: cluttered, and most of the drawing time. Ticks go at the checkpoints
    when given, else at 1-2-5 steps; no minor ticks.
    """
    ax.set_xscale("log")
    locator = FixedLocator(sorted(ticks)) if ticks else LogLocator(subs=(1.0, 2.0, 5.0))
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: format_flops(x)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.tick_params(axis="x", labelsize="small")


def label_colors(labels: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """A fixed colour per label, in the given order, so every figure uses the same one."""
    palette = matplotlib.colormaps["tab10" if len(labels) <= 10 else "tab20"].colors
    return {label: palette[i % len(palette)] for i, label in enumerate(labels)}


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg``; the SVG carries no date and fixed ids (byte-stable)."""
    paths = []
    with matplotlib.rc_context({"svg.hashsalt": "electra-ablate"}):
        for fmt, metadata in (("png", {"Software": None}), ("svg", {"Date": None})):
            path = Path(out_dir) / f"{stem}.{fmt}"
            with atomic_file(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=120, metadata=metadata)
            paths.append(path)
    return paths


def _grid(n_panels: int, max_cols: int = 3) -> tuple[Figure, list[Axes]]:
    cols = min(max_cols, n_panels)
    rows = math.ceil(n_panels / cols)
    fig = Figure(figsize=(PANEL_WIDTH * cols, PANEL_HEIGHT * rows), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for spare in axes[n_panels:]:
        spare.set_visible(False)
    return fig, axes[:n_panels]


def _median_with_band(ax: Axes, summary: pl.DataFrame, colors: Mapping[str, tuple]) -> None:
    """One line per label through the medians, shaded from min to max across seeds."""
    for label, color in colors.items():
        points = summary.filter(pl.col("label") == label).sort("flops_paper")
        if points.is_empty():
            continue
        x = points["flops_paper"].to_list()
        ax.fill_between(x, points["min"].to_list(), points["max"].to_list(), color=color, alpha=0.2)
        ax.plot(x, points["median"].to_list(), "o-", color=color, label=label, markersize=4)
    # one tick per checkpoint: objectives reach a budget fraction within a step of each other
    ticks = summary.group_by("checkpoint_fraction").agg(pl.col("flops_paper").mean())
    _flops_axis(ax, ticks["flops_paper"].to_list())
    ax.grid(True, which="major", alpha=0.3)


def plot_glue_vs_flops(
    glue: pl.DataFrame, colors: Mapping[str, tuple], out_dir: Path
) -> list[Path]:
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.subplots()
    _median_with_band(ax, glue, colors)
    ax.set_xlabel(FLOPS_LABEL)
    ax.set_ylabel("GLUE score (median; band: min–max over seeds)")
    ax.legend(fontsize="small")
    return save_figure(fig, out_dir, "glue_vs_flops")


def plot_task_scores(tasks: pl.DataFrame, colors: Mapping[str, tuple], out_dir: Path) -> list[Path]:
    """One panel per task, its headline metric against pre-training FLOPs."""
    headline = tasks.filter(pl.col("headline"))
    names = ordered_tasks(headline["task"].to_list())
    fig, axes = _grid(len(names))
    for ax, task in zip(axes, names, strict=True):
        rows = headline.filter(pl.col("task") == task)
        _median_with_band(ax, rows, colors)
        note = " — not in GLUE score" if task in EXCLUDED_FROM_GLUE else ""
        ax.set_title(f"{task} ({rows['metric'][0]}){note}", fontsize="medium")
        ax.set_xlabel(FLOPS_LABEL, fontsize="small")
    handles = [Line2D([], [], color=c, marker="o", label=label) for label, c in colors.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
    return save_figure(fig, out_dir, "glue_tasks_vs_flops")


def curve_metrics(metrics: pl.DataFrame) -> list[str]:
    """The logged metric columns worth a panel, in the order the runner logged them."""
    return [
        name
        for name, dtype in metrics.schema.items()
        if name not in PRETRAIN_ID_COLUMNS
        and name not in NOT_A_CURVE
        and dtype.is_numeric()
        and metrics[name].null_count() < metrics.height
    ]


def plot_pretrain_curves(
    metrics: pl.DataFrame, colors: Mapping[str, tuple], out_dir: Path
) -> list[Path]:
    """One panel per logged metric; train solid, held-out dashed, one line per run."""
    names = curve_metrics(metrics)
    logged = metrics.filter(pl.col("flops_paper") > 0).sort(["run_id", "split", "step"])
    fig, axes = _grid(len(names))
    styles = {"train": "-", "heldout": "--"}
    for ax, name in zip(axes, names, strict=True):
        present = logged.filter(pl.col(name).is_not_null())
        for (_, split), curve in present.group_by(["run_id", "split"], maintain_order=True):
            ax.plot(
                curve["flops_paper"].to_list(),
                curve[name].to_list(),
                styles.get(split, ":"),
                color=colors.get(curve["label"][0], "grey"),
                linewidth=1.2,
                marker="." if split == "heldout" else None,
            )
        _flops_axis(ax)
        ax.set_title(name, fontsize="medium")
        ax.set_xlabel(FLOPS_LABEL, fontsize="small")
        ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color=c, label=label) for label, c in colors.items()]
    handles += [
        Line2D([], [], color="black", linestyle="-", label="train"),
        Line2D([], [], color="black", linestyle="--", marker=".", label="held-out"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5))
    return save_figure(fig, out_dir, "pretrain_curves")
