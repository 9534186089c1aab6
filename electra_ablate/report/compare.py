"""``ablate compare``: the same objectives across studies (two budgets, two backbones, CPU and
GPU) in one table and one score-vs-FLOPs figure per task family with an aggregate, so that a
crossover, if there is one, shows.

Each study is a study folder or a report folder that kept its tables (``report.source``). Scores
are the ones its own report gives: the median per model with its 95% CI at each checkpoint
(``results.score_intervals``). Objectives are matched by label; each keeps the colour of its
objective (``plots.objective_colors``) and each study gets its own line style, on one log FLOPs
axis that spans every study's budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from electra_ablate.analysis.efficiency import Efficiency, crossover_table, multiplier_table
from electra_ablate.analysis.results import (
    evaluated_only_at_start,
    families_in_order,
    family_scores,
    final_fraction,
    score_intervals,
    with_intervals,
)
from electra_ablate.evaluation.task import describe_family
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import safe_name
from electra_ablate.infra.storage import atomic_file, atomic_write_text
from electra_ablate.report.document import writable_folder
from electra_ablate.report.efficiency import (
    CROSSOVERS_FILE,
    EFFICIENCY_FILE,
    crossover_cell,
    family_efficiency,
    interval_marks,
    multiplier_cell,
)
from electra_ablate.report.markdown import NO_VALUE, figure, sci, table
from electra_ablate.report.plots import (
    BASELINE_COLOR,
    BASELINE_OBJECTIVE,
    FLOPS_LABEL,
    flops_axis,
    objective_colors,
    save_figure,
)
from electra_ablate.report.source import StudyTables, read_tables
from electra_ablate.report.verdicts import NO_INTERVAL_NOTE, seeds, with_interval

COMPARE_FILE = "compare.md"
COMPARE_TABLE = "compare.csv"
STUDY_STYLES = ("-", "--", ":", "-.")
STUDY_MARKERS = ("o", "s", "^", "D", "v", "P")


def default_out(names: Sequence[str]) -> Path:
    return Path("compare") / safe_name("_vs_".join(names))


def study_names(sources: Sequence[StudyTables]) -> list[str]:
    """Each study's name, or its folder when two studies share a name (a study and its
    report), or its path when those clash too."""
    names = [s.name for s in sources]
    if len(set(names)) < len(names):
        names = [s.folder.name for s in sources]
    if len(set(names)) < len(names):
        names = [str(s.folder) for s in sources]
    return names


def scored(source: StudyTables) -> pl.DataFrame:
    """The study's per-checkpoint scores with their intervals, every family."""
    assert source.results is not None
    return with_intervals(family_scores(source.results), score_intervals(source.results))


def write_comparison(folders: Sequence[Path], out_dir: Path | None = None) -> Path:
    """Write ``compare.md``, ``compare.csv`` and one figure per family; return the markdown's
    path. Bad input (a missing folder, a study without results, nothing in common) is one
    ``InputError`` line."""
    if len(folders) < 2:
        raise InputError("ablate compare needs at least two study or report folders")
    sources = [read_tables(Path(f)) for f in folders]
    for source in sources:
        if source.results is None:
            raise InputError(f"{source.folder} has no evaluation results: nothing to compare")
    names = study_names(sources)
    frames = {name: scored(source) for name, source in zip(names, sources, strict=True)}
    sections, long_rows, plotted, efficiency_rows = [], [], [], []
    out_dir = Path(out_dir) if out_dir is not None else default_out(names)

    writable_folder(out_dir)
    for family_name in families_in_order(pl.concat([f.select("family") for f in frames.values()])):
        family = describe_family(family_name)
        if family.aggregate is None:
            continue
        own = {n: f.filter(pl.col("family") == family_name) for n, f in frames.items()}
        common = common_labels(own)
        if not common:
            continue
        objective_of = dict(
            next(iter(own.values()))
            .filter(pl.col("label").is_in(common))
            .select("label", "objective")
            .unique()
            .iter_rows()
        )
        colors = objective_colors({x: objective_of[x] for x in common})
        long_rows += [
            row.with_columns(pl.lit(n).alias("study")) for n, row in own.items() if row.height
        ]
        plotted.append(family_name)
        sections.append(family_section(family, own, common, sources, names))
        plot_comparison(family, own, common, colors, out_dir)
        found = {
            n: family_efficiency(shared_rows(s, family_name, common), family)
            for n, s in zip(names, sources, strict=True)
        }
        sections.append(efficiency_part(family, found, NO_INTERVAL_NOTE in sections[-1]))
        efficiency_rows.append(study_tables(found))
    if not plotted:
        raise InputError(
            "no common objectives: "
            + "; ".join(
                f"{n} has {', '.join(sorted(pretrained_labels(f))) or 'none'}"
                for n, f in frames.items()
            )
            + " (objectives are matched by label, in a family with an aggregate)"
        )
    header = [
        f"# Comparison: {', '.join(f'`{n}`' for n in names)}",
        table(
            ["Study", "Source", "Pre-training FLOPs (paper) at the final checkpoint", "Seeds"],
            [
                [n, f"`{s.folder}`", final_flops(s), seed_text(s)]
                for n, s in zip(names, sources, strict=True)
            ],
        ),
        "Scores: the median per model of each study's own aggregate, with its 95% CI "
        "(hierarchical bootstrap over pre-training, then fine-tuning seeds; with one "
        "pre-training seed it covers fine-tuning noise only). Objectives are matched by label. "
        "Studies with different data, backbones or recipes are different experiments: read "
        "each study's report for what it ran.",
    ]
    atomic_write_text(out_dir / COMPARE_FILE, "\n\n".join(header + sections) + "\n")
    write_long_table(pl.concat(long_rows, how="diagonal_relaxed"), out_dir / COMPARE_TABLE)
    multipliers, crossovers = (pl.concat(tables) for tables in zip(*efficiency_rows, strict=True))
    for frame, name in ((multipliers, EFFICIENCY_FILE), (crossovers, CROSSOVERS_FILE)):
        with atomic_file(out_dir / name) as tmp:
            frame.write_csv(tmp, float_precision=4)
    return out_dir / COMPARE_FILE


def shared_rows(source: StudyTables, family: str, common: Sequence[str]) -> pl.DataFrame:
    """A study's aggregated rows of ``family`` for the objectives every study shares and the
    references evaluated without pre-training."""
    assert source.results is not None
    rows = source.results.filter(pl.col("in_aggregate") & (pl.col("family") == family))
    start = evaluated_only_at_start(rows)
    return rows.filter(pl.col("label").is_in([*common, *start]))


def study_tables(found: dict[str, Efficiency]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each study's multipliers and crossovers, a ``study`` column first."""
    tables = [
        (
            multiplier_table([e]).select(pl.lit(n).alias("study"), pl.all()),
            crossover_table([e]).select(pl.lit(n).alias("study"), pl.all()),
        )
        for n, e in found.items()
    ]
    return pl.concat(t[0] for t in tables), pl.concat(t[1] for t in tables)


def efficiency_part(family, found: dict[str, Efficiency], explained: bool) -> str:
    """Each study's multipliers and crossovers for the objectives they share, side by side:
    one row per pair and study, the multipliers at that study's own budgets. ``explained``:
    the family's section above already explains the mark of a figure without an interval."""
    rows, crossings = [], []
    some, missing = interval_marks(list(found.values()))
    mark = some and missing
    for n, e in found.items():
        for (a, b), ms in e.multipliers_by_pair().items():
            cells = "; ".join(f"{sci(m.flops)}: {multiplier_cell(m, mark)}" for m in ms)
            rows.append([a, b, n, cells])
        crossings += [[c.a, c.b, n, crossover_cell(c, mark)] for c in e.crossovers]
    single = [n for n, e in found.items() if e.budgets < 2]
    parts = [f"### {family.title}: compute efficiency"]
    if rows:
        parts.append(
            "B's compute for A's score at each of the study's budgets, as a multiple of A's "
            "(each study's report explains how to read it):"
        )
        parts.append(table(["A", "B", "Study", "Multiplier at each budget [95% CI]"], rows))
    if crossings:
        parts.append(table(["A", "B", "Study", "Crossover of A − B"], sorted(crossings)))
    if single:
        parts.append(
            f"{', '.join(single)}: one budget per objective, so no multiplier or crossover."
        )
    if rows and not some:
        parts.append("One model per objective everywhere: no estimate here has an interval.")
    elif mark and not explained:
        parts.append(NO_INTERVAL_NOTE)
    return "\n\n".join(parts)


def pretrained_labels(scores: pl.DataFrame) -> set[str]:
    return set(
        scores.filter(
            (pl.col("objective") != BASELINE_OBJECTIVE) & (pl.col("checkpoint_fraction") > 0)
        )["label"].to_list()
    )


def common_labels(own: dict[str, pl.DataFrame]) -> list[str]:
    """Pre-trained labels every study scored in this family, in the first study's order."""
    sets = [pretrained_labels(f) for f in own.values()]
    shared = set.intersection(*sets) if sets else set()
    first = next(iter(own.values()))["label"].unique(maintain_order=True).to_list()
    return [x for x in first if x in shared]


def final_flops(source: StudyTables) -> str:
    assert source.results is not None
    at = source.results.filter(pl.col("checkpoint_fraction") == final_fraction(source.results))
    low, high = sci(at["flops_paper"].min()), sci(at["flops_paper"].max())
    return low if low == high else f"{low}–{high}"


def seed_text(source: StudyTables) -> str:
    assert source.results is not None
    pretrained = source.results.filter(pl.col("objective") != BASELINE_OBJECTIVE)
    return (
        f"{pretrained['pretrain_seed'].n_unique()} pre-training × "
        f"{pretrained['finetune_seed'].n_unique()} fine-tuning"
    )


def family_section(
    family,
    own: dict[str, pl.DataFrame],
    common: list[str],
    sources: Sequence[StudyTables],
    names: Sequence[str],
) -> str:
    """One row per objective, one column pair per study: its final score with CI, and FLOPs."""
    finals = {
        n: final_fraction(s.results)
        for n, s in zip(names, sources, strict=True)
        if s.results is not None
    }
    found: dict[tuple[str, str], dict] = {}
    for label in [*common, *baseline_labels(own)]:
        for n, frame in own.items():
            at = 0.0 if label in baseline_labels(own) else finals[n]
            hit = frame.filter((pl.col("label") == label) & (pl.col("checkpoint_fraction") == at))
            if hit.height:
                found[label, n] = hit.row(0, named=True)
    # a cell without an interval is marked only where other cells have one
    bounds = {
        key: (nan_if_none(r["ci_low"]), nan_if_none(r["ci_high"])) for key, r in found.items()
    }
    some = [not math.isnan(low) and not math.isnan(high) for low, high in bounds.values()]
    marks = any(some)
    rows = []
    for label in [*common, *baseline_labels(own)]:
        cells = [label]
        for n in own:
            if (label, n) not in found:
                cells += [NO_VALUE, NO_VALUE]
                continue
            r = found[label, n]
            shown = with_interval(f"{r['median']:.1f}", *bounds[label, n], mark=marks)
            n_seeds = (
                f", {seeds(r['n_pretrain'], r['n_finetune'])}"
                if r["n_pretrain"] is not None
                else ""
            )
            at = r["checkpoint_fraction"]
            cells += [f"{shown}{n_seeds}", sci(r["flops_paper"]) if at else "0"]
        rows.append(cells)
    head = ["Label"]
    for n in own:
        head += [f"{n}: {family.aggregate}{' [95% CI]' if marks else ''}, seeds", f"{n}: FLOPs"]
    return "\n\n".join(
        [
            f"## {family.title}",
            f"Median {family.aggregate} per model at each study's final checkpoint"
            + ("." if marks else "; one model each, so no interval."),
            table(head, rows),
            *([NO_INTERVAL_NOTE] if marks and not all(some) else []),
            figure(f"{family.aggregate} vs pre-training FLOPs, every study", compare_stem(family)),
            "Colour: the objective; line style and marker: the study; band: 95% CI.",
        ]
    )


def nan_if_none(x: float | None) -> float:
    return math.nan if x is None else x


def baseline_labels(own: dict[str, pl.DataFrame]) -> list[str]:
    """The no-pre-training rows every study has."""
    sets = [
        set(f.filter(pl.col("objective") == BASELINE_OBJECTIVE)["label"].to_list())
        for f in own.values()
    ]
    return sorted(set.intersection(*sets)) if sets else []


def compare_stem(family) -> str:
    return f"{family.name}_compare_vs_flops"


def plot_comparison(family, own, common, colors, out_dir: Path) -> list[Path]:
    fig = Figure(figsize=(8.0, 4.8), layout="constrained")
    ax = fig.subplots()
    for i, frame in enumerate(own.values()):
        style, marker = STUDY_STYLES[i % len(STUDY_STYLES)], STUDY_MARKERS[i % len(STUDY_MARKERS)]
        for label in common:
            points = frame.filter((pl.col("label") == label) & (pl.col("flops_paper") > 0)).sort(
                "flops_paper"
            )
            x = points["flops_paper"].to_list()
            if "ci_low" in points.columns:
                low = points["ci_low"].fill_nan(None).fill_null(points["median"]).to_list()
                high = points["ci_high"].fill_nan(None).fill_null(points["median"]).to_list()
                ax.fill_between(x, low, high, color=colors[label], alpha=0.15, lw=0)
            ax.plot(
                x,
                points["median"].to_list(),
                linestyle=style,
                marker=marker,
                color=colors[label],
                markersize=4,
            )
        for row in frame.filter(pl.col("objective") == BASELINE_OBJECTIVE).iter_rows(named=True):
            ax.axhline(row["median"], color=BASELINE_COLOR, linestyle=style, linewidth=1.0)
    flops_axis(ax)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel(FLOPS_LABEL)
    ax.set_ylabel(f"{family.aggregate} (median per model; band: 95% CI)")
    handles = [Line2D([], [], color=c, label=label) for label, c in colors.items()]
    if any(f.filter(pl.col("objective") == BASELINE_OBJECTIVE).height for f in own.values()):
        handles.append(Line2D([], [], color=BASELINE_COLOR, label="no pre-training"))
    handles += [
        Line2D(
            [],
            [],
            color="black",
            linestyle=STUDY_STYLES[i % len(STUDY_STYLES)],
            marker=STUDY_MARKERS[i % len(STUDY_MARKERS)],
            label=f"study: {name}",
        )
        for i, name in enumerate(own)
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize="small")
    return save_figure(fig, out_dir, compare_stem(family))


def write_long_table(frame: pl.DataFrame, path: Path) -> None:
    columns = [
        c
        for c in (
            "family",
            "study",
            "objective",
            "label",
            "checkpoint_fraction",
            "flops_paper",
            "median",
            "ci_low",
            "ci_high",
            "n_pretrain",
            "n_finetune",
            "n",
        )
        if c in frame.columns
    ]
    with atomic_file(path) as tmp:
        frame.select(columns).sort("family", "label", "study", "checkpoint_fraction").write_csv(
            tmp, float_precision=4
        )
