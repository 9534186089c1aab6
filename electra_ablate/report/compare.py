"""``ablate compare``: the same objectives across studies (two budgets, two backbones, CPU and
GPU) in one table and one score-vs-FLOPs figure per task family with an aggregate, so that a
crossover, if there is one, shows.

Each study is a study folder or a report folder that kept its tables (``report.source``). Scores
are the ones its own report gives: the median per model with its 95% CI at each checkpoint
(``results.score_intervals``). Objectives are matched by label; each keeps the colour of its
objective (``plots.objective_colors``) and each study gets its own line style, on one log FLOPs
axis that spans every study's budget.

Like is compared with like. A folder given twice is refused (a study beside itself would show
once, without a word). A family's aggregate is computed over the tasks every study evaluated
(an RTE-only study's "GLUE score" beside a five-task study's is two different averages in one
column), and the page says which; a family whose aggregated tasks the studies do not share is
left out, saying why, and nothing left to compare is one error line. The header says what each
study ran (tasks, caps, backbone, data, seeds), and each family names the objectives left out
because not every study has them. Which tasks enter an aggregate, each results row says
(``in_aggregate``, from the family's hooks): nothing here knows a family by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from electra_ablate.analysis.efficiency import Efficiency, crossover_table, multiplier_table
from electra_ablate.analysis.results import (
    evaluated_only_at_start,
    families_in_order,
    family_scores_with_intervals,
    final_fraction,
    ordered_tasks,
)
from electra_ablate.evaluation.task import TaskFamily, describe_family
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import safe_name
from electra_ablate.infra.storage import atomic_file, atomic_write_text
from electra_ablate.report.document import writable_folder
from electra_ablate.report.efficiency import (
    CROSSOVERS_FILE,
    EFFICIENCY_FILE,
    NO_FLOOR,
    WITHIN_NOISE,
    crossover_cell,
    family_efficiency,
    inside_noise_floor,
    interval_marks,
    multiplier_cell,
)
from electra_ablate.report.header import caps_text, evaluation_blocks
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
from electra_ablate.scaleout.packs import data_fingerprints

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
    return family_scores_with_intervals(source.results)


def distinct_folders(folders: Sequence[Path]) -> list[Path]:
    """``folders``, refusing one given twice however it is spelt (``a``, ``a/``, ``./a``):
    a study beside itself would show once, under one name, without a word."""
    seen: dict[Path, Path] = {}
    for folder in map(Path, folders):
        first = seen.setdefault(folder.resolve(), folder)
        if first is not folder:
            also = f" (also as {folder})" if str(folder) != str(first) else ""
            raise InputError(
                f"{first} is given twice{also}: ablate compare compares different studies"
            )
    return list(seen.values())


@dataclass(frozen=True)
class FamilyTasks:
    """The tasks of one family's aggregate in each study, and those every study shares:
    the only ones a comparison may average, so that a column holds one kind of average."""

    family: TaskFamily
    own: dict[str, list[str]]
    """Study name -> the tasks its own aggregate of the family averages, in registry order."""
    narrowed_from: tuple[str, ...] = ()
    """For a like-for-like aggregate (``like_for_like``): the tasks the studies share, of which
    ``own`` keeps those every objective has in every study; empty otherwise."""

    @property
    def title(self) -> str:
        """The section's heading."""
        return f"{self.family.title}, like for like" if self.narrowed_from else self.family.title

    @property
    def stem(self) -> str:
        """The stem of the section's figure."""
        if self.narrowed_from:
            return f"{self.family.name}_like_for_like_compare_vs_flops"
        return compare_stem(self.family)

    @property
    def shared(self) -> list[str]:
        return ordered_tasks(set.intersection(*(set(t) for t in self.own.values())))

    def not_compared(self) -> str | None:
        """Why the family cannot be compared (a sentence without its subject), or None."""
        missing = [n for n, tasks in self.own.items() if not tasks]
        if missing:
            return f"{', '.join(missing)} evaluated no task of its {self.family.aggregate}"
        if not self.shared:
            each = "; ".join(f"{n}: {', '.join(t)}" for n, t in self.own.items())
            return f"the studies share none of the tasks of its {self.family.aggregate} ({each})"
        return None

    def sentence(self) -> str:
        """Which tasks the family's column averages, and what each study's own report averages
        besides."""
        shared, agg = self.shared, self.family.aggregate
        count = "the task" if len(shared) == 1 else f"the {len(shared)} tasks"
        if self.narrowed_from:
            lacking = [t for t in self.narrowed_from if t not in shared]
            return (
                f"{agg} like for like, over {count} every objective has in every study: "
                f"{', '.join(shared)}. The studies share {', '.join(self.narrowed_from)}, but "
                f"some objective lacks {', '.join(lacking)} somewhere, and a label missing a "
                f"task has no {agg} of its own."
            )
        if all(len(t) == len(shared) for t in self.own.values()):
            return f"{agg} over {count} every study evaluated: {', '.join(shared)}."
        extra = [
            f"{n} also evaluated {', '.join(x for x in t if x not in shared)} (its own report "
            f"averages all {len(t)})"
            for n, t in self.own.items()
            if len(t) > len(shared)
        ]
        return (
            f"{agg} over {count} all studies share: {', '.join(shared)}; "
            f"{'; '.join(extra)}: left out here, so that every study's score averages the "
            "same tasks."
        )


def aggregate_tasks(sources: Mapping[str, StudyTables]) -> list[FamilyTasks]:
    """Each family with an aggregate that any study evaluated, in the order the studies list
    them, with the tasks each study's aggregate averages (the results rows' ``in_aggregate``)."""
    tables = [s.results for s in sources.values() if s.results is not None]
    found = []
    for family_name in families_in_order(pl.concat([t.select("family") for t in tables])):
        family = describe_family(family_name)
        if family.aggregate is None:
            continue
        own = {}
        for n, source in sources.items():
            assert source.results is not None
            rows = source.results.filter((pl.col("family") == family_name) & pl.col("in_aggregate"))
            own[n] = ordered_tasks(rows["task"].to_list())
        found.append(FamilyTasks(family, own))
    return found


def like_for_like(tasks: FamilyTasks, sources: Mapping[str, StudyTables]) -> FamilyTasks | None:
    """Where an objective in every study lacks one of the family's shared tasks at its final
    checkpoint somewhere (a fine-tune cut by a deadline, one that failed), the same family over
    the tasks every such objective has everywhere, labelled as such (issue 72); None where none
    lacks one or no task is left. ``sources``: restricted to the shared tasks."""
    rows = pretrained_rows(tasks, sources)
    labels = [set(r["label"].to_list()) for r in rows.values()]
    everywhere = set.intersection(*labels) if labels else set()
    held = []
    for r in rows.values():
        for label in everywhere:
            own = r.filter(pl.col("label") == label)
            last = own.filter(pl.col("checkpoint_fraction") == own["checkpoint_fraction"].max())
            held.append(set(last["task"].to_list()))
    common = set.intersection(*held) if held else set()
    if not common or common >= set(tasks.shared):
        return None
    kept = ordered_tasks(common)
    return FamilyTasks(tasks.family, {n: kept for n in tasks.own}, tuple(tasks.shared))


def restricted(source: StudyTables, shared: Mapping[str, Sequence[str]]) -> StudyTables:
    """``source`` with only ``shared``'s tasks (family -> tasks) entering an aggregate: the
    rows of the other tasks stay, outside every aggregate, and a family not in ``shared``
    aggregates nothing."""
    assert source.results is not None
    keep = pl.lit(False)
    for family, tasks in shared.items():
        keep = keep | ((pl.col("family") == family) & pl.col("task").is_in(list(tasks)))
    return replace(source, results=source.results.with_columns(pl.col("in_aggregate") & keep))


def write_comparison(folders: Sequence[Path], out_dir: Path | None = None) -> Path:
    """Write ``compare.md``, ``compare.csv`` and one figure per family; return the markdown's
    path. Bad input (a missing folder, one given twice, a study without results, nothing in
    common) is one ``InputError`` line."""
    if len(folders) < 2:
        raise InputError("ablate compare needs at least two study or report folders")
    read = [read_tables(f) for f in distinct_folders(folders)]
    for source in read:
        if source.results is None:
            raise InputError(f"{source.folder} has no evaluation results: nothing to compare")
    names = study_names(read)
    families = aggregate_tasks(dict(zip(names, read, strict=True)))
    skipped = {f.family.title: f.not_compared() for f in families if f.not_compared()}
    compared = [f for f in families if not f.not_compared()]
    shared = {f.family.name: f.shared for f in compared}
    sources = [restricted(s, shared) for s in read]
    frames = {name: scored(source) for name, source in zip(names, sources, strict=True)}
    sections, long_rows, plotted, efficiency_rows = [], [], [], []
    out_dir = Path(out_dir) if out_dir is not None else default_out(names)

    writable_folder(out_dir)
    passes: list[tuple[FamilyTasks, list[StudyTables]]] = []
    for tasks in compared:
        passes.append((tasks, sources))
        narrowed = like_for_like(tasks, dict(zip(names, sources, strict=True)))
        if narrowed is not None:
            narrow = {**shared, tasks.family.name: narrowed.shared}
            passes.append((narrowed, [restricted(s, narrow) for s in read]))
    with_section: set[str] = set()
    for tasks, family_sources in passes:
        family, family_name = tasks.family, tasks.family.name
        family_frames = (
            frames
            if family_sources is sources
            else {n: scored(s) for n, s in zip(names, family_sources, strict=True)}
        )
        own = {n: f.filter(pl.col("family") == family_name) for n, f in family_frames.items()}
        common = common_labels(own)
        if not common:
            if not tasks.narrowed_from:
                skipped[family.title] = unscored_reason(
                    tasks, own, dict(zip(names, family_sources, strict=True))
                )
            continue
        if tasks.narrowed_from and family.title in skipped:
            skipped[family.title] += (
                f"; compared like for like below over {', '.join(tasks.shared)}"
            )
        objective_of = dict(
            next(iter(own.values()))
            .filter(pl.col("label").is_in(common))
            .select("label", "objective")
            .unique()
            .iter_rows()
        )
        colors = objective_colors({x: objective_of[x] for x in common})
        long_rows += [
            row.with_columns(
                pl.lit(n).alias("study"), pl.lit(" ".join(tasks.shared)).alias("tasks")
            )
            for n, row in own.items()
            if row.height
        ]
        plotted.append(family_name)
        sections.append(family_section(tasks, own, common, family_sources, names))
        plot_comparison(family, own, common, colors, out_dir, tasks.stem)
        if family_name in with_section:  # its efficiency is the shared tasks' section's
            continue
        with_section.add(family_name)
        found = {
            n: family_efficiency(shared_rows(s, family_name, common), family)
            for n, s in zip(names, family_sources, strict=True)
        }
        sections.append(efficiency_part(family, found, NO_INTERVAL_NOTE in sections[-1]))
        efficiency_rows.append(study_tables(found))
    if not plotted:
        if not compared:  # no family's aggregate is over the same tasks in every study
            raise InputError(
                "nothing to compare: "
                + "; ".join(f"{title}: {why}" for title, why in skipped.items())
                + " (an aggregate is compared over the tasks every study evaluated)"
            )
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
        table(["", *names], study_rows(read, names)),
        "Scores: the median per model of each family's aggregate over the tasks every study "
        "evaluated (a study's own report may average more), with its 95% CI (hierarchical "
        "bootstrap over pre-training, then fine-tuning seeds; with one pre-training seed it "
        "covers fine-tuning noise only). Objectives are matched by label. Studies with "
        "different data, backbones or recipes are different experiments: read each study's "
        "report for what it ran.",
        *[f"{title}: not compared, {why}." for title, why in skipped.items()],
    ]
    atomic_write_text(out_dir / COMPARE_FILE, "\n\n".join(header + sections) + "\n")
    write_long_table(pl.concat(long_rows, how="diagonal_relaxed"), out_dir / COMPARE_TABLE)
    multipliers, crossovers = (pl.concat(tables) for tables in zip(*efficiency_rows, strict=True))
    for frame, name in ((multipliers, EFFICIENCY_FILE), (crossovers, CROSSOVERS_FILE)):
        with atomic_file(out_dir / name) as tmp:
            frame.write_csv(tmp, float_precision=4)
    return out_dir / COMPARE_FILE


def pretrained_rows(
    tasks: FamilyTasks, sources: Mapping[str, StudyTables]
) -> dict[str, pl.DataFrame]:
    """Each study's rows of the family's shared aggregated tasks, pre-trained labels only."""
    rows = {}
    for n, source in sources.items():
        assert source.results is not None
        rows[n] = source.results.filter(
            (pl.col("family") == tasks.family.name)
            & pl.col("in_aggregate")
            & (pl.col("objective") != BASELINE_OBJECTIVE)
            & (pl.col("checkpoint_fraction") > 0)
        )
    return rows


def gaps(
    tasks: FamilyTasks, own: Mapping[str, pl.DataFrame], rows: Mapping[str, pl.DataFrame]
) -> dict[str, list[str]]:
    """Label -> where it has no score though every study evaluated it: a score needs every
    shared task (a run that stopped, a fine-tune that failed leaves one out)."""
    everywhere = set.intersection(*(set(r["label"].to_list()) for r in rows.values()))
    found: dict[str, list[str]] = {}
    for n, r in rows.items():
        for label in r["label"].unique(maintain_order=True).to_list():
            if label not in everywhere or label in pretrained_labels(own[n]):
                continue
            done = r.filter(pl.col("label") == label).group_by("checkpoint_fraction").agg("task")
            most = max((set(t) for t in done["task"].to_list()), key=len)
            missing = [t for t in tasks.shared if t not in most]
            found.setdefault(label, []).append(
                f"lacks {', '.join(missing)} in {n}"
                if missing
                else f"has no model with every task in {n}"
            )
    return found


def unscored_reason(
    tasks: FamilyTasks, own: Mapping[str, pl.DataFrame], sources: Mapping[str, StudyTables]
) -> str:
    """Why no objective of a family has a score in every study: none is in every study, or
    those that are lack a shared task somewhere, named study by study."""
    rows = pretrained_rows(tasks, sources)
    found = gaps(tasks, own, rows)
    if not found:
        return "no objective is in every study"
    return (
        f"no objective has a {tasks.family.aggregate} in every study (over "
        f"{', '.join(tasks.shared)}; "
        + "; ".join(f"{label} {gap}" for label, where in found.items() for gap in where)
        + ")"
    )


def left_out_text(
    tasks: FamilyTasks,
    own: Mapping[str, pl.DataFrame],
    common: Sequence[str],
    sources: Mapping[str, StudyTables],
) -> str:
    """The pre-trained labels left out of a family's table and figure, and why (only in some
    studies, or without a score in some), so that their absence is not read as a result."""
    rows = pretrained_rows(tasks, sources)
    found = gaps(tasks, own, rows)
    having: dict[str, list[str]] = {}
    for n, r in rows.items():
        for label in r["label"].unique(maintain_order=True).to_list():
            if label not in common:
                having.setdefault(label, []).append(n)
    if not having:
        return ""
    return (
        "Left out, without a score in every study: "
        + "; ".join(
            f"{label} ({'; '.join(found[label]) if label in found else 'only in ' + ', '.join(ns)})"
            for label, ns in having.items()
        )
        + "."
    )


def study_rows(sources: Sequence[StudyTables], names: Sequence[str]) -> list[list[str]]:
    """What each study ran, one column per study: where it was read from, its budget, its
    tasks, caps, backbone, data and seeds, so that a reader sees which differences are the
    experiment and which are not."""
    rows: list[tuple[str, Any]] = [
        ("Source", lambda s: f"`{s.folder}`"),
        ("Pre-training FLOPs (paper) at the final checkpoint", final_flops),
        ("Tasks", tasks_text),
        ("Training examples per task", lambda s: caps_text(evaluation_blocks(s.study), s.results)),
        ("Backbone", lambda s: backbone_text(s.study)),
        ("Data fingerprint", lambda s: ", ".join(f"`{f}`" for f in data_fingerprints(s.study))),
        ("Pre-training seeds", lambda s: seed_list(s, "pretrain_seed")),
        ("Fine-tuning seeds", lambda s: seed_list(s, "finetune_seed")),
    ]
    return [[title, *(cell(s) or NO_VALUE for s in sources)] for title, cell in rows]


def tasks_text(source: StudyTables) -> str:
    """The study's tasks family by family, naming those outside the family's aggregate."""
    assert source.results is not None
    parts = []
    for family_name in families_in_order(source.results):
        rows = source.results.filter(pl.col("family") == family_name)
        family = describe_family(family_name)
        every = ordered_tasks(rows["task"].to_list())
        inside = set(rows.filter(pl.col("in_aggregate"))["task"].to_list())
        outside = [t for t in every if t not in inside]
        note = (
            f" ({', '.join(outside)} outside its {family.aggregate})"
            if outside and family.aggregate
            else ""
        )
        parts.append(f"{family.title}: {', '.join(every)}{note}")
    return "; ".join(parts)


def backbone_text(study: Mapping[str, Any]) -> str:
    """The backbone's preset (as the spec names it) and its size (the resolved backbone
    ``study.json`` records); what a record lacks is left out, never guessed."""
    name = ((study.get("spec") or {}).get("backbone") or {}).get("preset")
    size = study.get("backbone") or {}
    shape = (
        f"hidden {size['hidden_size']}, {size['num_layers']} layers, {size['num_heads']} heads"
        if {"hidden_size", "num_layers", "num_heads"} <= set(size)
        else ""
    )
    if name and shape:
        return f"{name} ({shape})"
    return name or shape


def seed_list(source: StudyTables, column: str) -> str:
    """The seeds of the study's pre-trained models (the no-pre-training baseline has none of
    its own)."""
    assert source.results is not None
    pretrained = source.results.filter(pl.col("objective") != BASELINE_OBJECTIVE)
    return ", ".join(map(str, sorted(set(pretrained[column].to_list()))))


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
    rows, crossings, quiet = [], [], []
    some, missing = interval_marks(list(found.values()))
    mark = some and missing
    single = [n for n, e in found.items() if e.budgets < 2]
    parts = [f"### {family.title}: compute efficiency"]
    if not some and any(e.multipliers or e.crossovers for e in found.values()):
        return "\n\n".join([*parts, NO_FLOOR])  # one model per objective everywhere
    for n, e in found.items():
        for (a, b), ms in e.multipliers_by_pair().items():
            drawn = [m for m in ms if not m.within_noise]
            if not drawn:
                quiet.append(f"{a} over {b} in {n}")
                continue
            cells = "; ".join(
                f"{sci(m.flops)}: {WITHIN_NOISE if m.within_noise else multiplier_cell(m, mark)}"
                for m in ms
            )
            rows.append([a, b, n, cells])
        crossings += [
            [c.a, c.b, n, crossover_cell(c, mark)] for c in e.crossovers if not c.within_noise
        ]
        quiet += [
            f"the crossover of {c.a} and {c.b} in {n}" for c in e.crossovers if c.within_noise
        ]
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
    if quiet:
        parts.append(inside_noise_floor(quiet, "page"))
    if mark and not explained:
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


def family_section(
    tasks: FamilyTasks,
    own: dict[str, pl.DataFrame],
    common: list[str],
    sources: Sequence[StudyTables],
    names: Sequence[str],
) -> str:
    """One row per objective, one column pair per study: its final score with CI, and FLOPs;
    which tasks the scores average, and the objectives left out because not every study has
    them."""
    family = tasks.family
    left_out = left_out_text(tasks, own, common, dict(zip(names, sources, strict=True)))
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
            f"## {tasks.title}",
            tasks.sentence(),
            f"Median {family.aggregate} per model at each study's final checkpoint"
            + ("." if marks else "; one model each, so no interval."),
            table(head, rows),
            *([left_out] if left_out else []),
            *([NO_INTERVAL_NOTE] if marks and not all(some) else []),
            figure(f"{family.aggregate} vs pre-training FLOPs, every study", tasks.stem),
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


def plot_comparison(family, own, common, colors, out_dir: Path, stem: str) -> list[Path]:
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
    return save_figure(fig, out_dir, stem)


def write_long_table(frame: pl.DataFrame, path: Path) -> None:
    columns = [
        c
        for c in (
            "family",
            "tasks",
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
