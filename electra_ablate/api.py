"""The stable face for analysing a study in a notebook: the report's numbers and figures, one
call each.

Analysis happens in notebooks, and a notebook that re-derives a report's aggregates and
intervals by hand from ``results.parquet`` gets other numbers. Every function here calls what
``ablate report`` itself calls (``electra_ablate.report``, ``electra_ablate.analysis``), never a
copy of it, so a score, an interval or a verdict computed here is the one ``report.md`` prints
(the same hierarchical bootstrap: 10,000 resamples, seed 0, 95% confidence, paired where the
design pairs the arms) and a figure is the one the report saves.

**What is promised.** Like ``electra_ablate.plugin``, this module is a stable face: the names
below and their signatures are kept across minor versions (a name that must go warns for one
minor version first), and the frames they return keep their columns (they may gain some). The
modules behind it may move; a notebook imports from here only.

Every function takes the ``Tables`` that ``load`` returns (to analyse a subset, pass
``dataclasses.replace(tables, results=...)``) and, where it is about one task family's score,
that family's name (``families``: ``"glue"``, ``"rtd_probe"``, ...). What is here:

- ``load(folder) -> Tables``: a study folder's or a report folder's tables (``.results``,
  ``.runs``, ``.pretrain_metrics`` as polars DataFrames, ``.study`` the ``study.json`` dict);
  ``families(tables)`` and ``final_fraction(tables)``;
- ``scores(tables, family)``: each label's score per model (the median over models of their
  mean over the family's tasks) at every checkpoint, with its 95% CI and seeds: the report's
  score tables, ``summary.csv`` and the band of ``<family>_vs_flops``; ``paper_scores`` (the
  paper's aggregation) and ``task_scores`` (each task's median, min and max over models);
- ``differences(tables, family, at=None, pairs=None)``: paired differences A − B with their 95%
  CIs and the report's verdict: its measured ordering, *vs none* and every-pair table;
- ``claims(tables, at=None)``: the paper's claims the study covers, each with its difference,
  CI, verdict and the seeds that would resolve it: the report's claims table;
- ``efficiency(tables, family) -> Efficiency``, then ``multiplier_table`` and
  ``crossover_table``: compute multipliers and crossovers with their intervals
  (``compute_efficiency.csv``, ``crossovers.csv``);
- the report's figures as ``matplotlib.figure.Figure`` objects: ``scores_figure``,
  ``tasks_figure``, ``curves_figure`` (pre-training diagnostics) and ``efficiency_figure``.

A walk through them on a committed report: ``docs/notebook.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from matplotlib.figure import Figure

from electra_ablate.analysis import efficiency as efficiency_tables
from electra_ablate.analysis import paper, results, stats
from electra_ablate.analysis.efficiency import Efficiency
from electra_ablate.evaluation.task import TaskFamily, describe_family
from electra_ablate.infra.errors import InputError
from electra_ablate.report import document, plots, verdicts
from electra_ablate.report import efficiency as efficiency_section
from electra_ablate.report import scores as score_sections
from electra_ablate.report.lead import family_reference
from electra_ablate.report.source import read_tables

__all__ = [
    "Efficiency",
    "Tables",
    "claims",
    "crossover_table",
    "curves_figure",
    "differences",
    "efficiency",
    "efficiency_figure",
    "families",
    "final_fraction",
    "load",
    "multiplier_table",
    "paper_scores",
    "scores",
    "scores_figure",
    "task_scores",
    "tasks_figure",
]


@dataclass(frozen=True)
class Tables:
    """One study's tables, as the report reads them. ``results`` is None when nothing was
    evaluated (a pre-training-only study); ``runs`` and ``pretrain_metrics`` are None when the
    folder holds no such table."""

    folder: Path
    study: dict[str, Any]
    """``study.json``: what ran, where and when, with the resolved spec."""
    results: pl.DataFrame | None
    """``results.parquet``: one row per run × checkpoint × task × fine-tuning seed × metric."""
    runs: pl.DataFrame | None
    """``runs.parquet``: one row per pre-training run (and the baseline)."""
    pretrain_metrics: pl.DataFrame | None
    """``pretrain_metrics.parquet``: every logged pre-training metric, train and held-out."""

    @property
    def name(self) -> str:
        return self.study.get("name") or self.folder.name


def load(folder: str | Path) -> Tables:
    """The tables of a study folder (``runs/<name>``) or of a report folder that kept them
    (``reports/long_budget``); a folder without them raises ``InputError`` saying what to do."""
    found = read_tables(Path(folder))
    return Tables(found.folder, found.study, found.results, found.runs, found.metrics)


def families(tables: Tables) -> list[str]:
    """The task families evaluated, in the order the study ran them (the report's sections)."""
    return results.families_in_order(_results(tables))


def final_fraction(tables: Tables) -> float:
    """The last checkpoint (a budget fraction): where the report ranks, compares and tests."""
    return results.final_fraction(_results(tables))


# --- numbers --------------------------------------------------------------------------------


def scores(tables: Tables, family: str) -> pl.DataFrame:
    """One row per label and checkpoint: ``label, objective, checkpoint_fraction, median``
    (the family's score per model: the median over models of each model's mean over the
    family's tasks), ``min, max, q1, q3, n`` over models, ``flops_paper, flops_standard``,
    and the 95% CI of the median, ``ci_low, ci_high`` (NaN: one model), with the seeds behind
    it, ``n_pretrain, n_finetune``. The no-pre-training baseline is at fraction 0."""
    _family(tables, family)
    return results.of_family(results.family_scores_with_intervals(_results(tables)), family)


def paper_scores(tables: Tables, family: str) -> pl.DataFrame:
    """The paper's aggregation per label and checkpoint (``score_paper``: each task's median
    over seeds, then the mean over tasks): the report's "(paper)" column."""
    _family(tables, family)
    return results.of_family(results.paper_scores(_results(tables)), family)


def task_scores(tables: Tables, family: str) -> pl.DataFrame:
    """Every task metric's ``median, min, max, q1, q3, n`` over models, per label and
    checkpoint; ``headline`` marks the task's own metric, ``in_aggregate`` those the family's
    score averages: the report's task columns and ``<family>_tasks_vs_flops``."""
    _family(tables, family, aggregate=False)
    return results.of_family(results.task_scores(_results(tables)), family)


def differences(
    tables: Tables,
    family: str,
    at: float | None = None,
    pairs: Iterable[tuple[str, str]] | None = None,
) -> pl.DataFrame:
    """A − B in the family's score per model at checkpoint ``at`` (default: the final one),
    one row per pair: ``a, b, difference, ci_low, ci_high`` (the 95% CI), ``se, dof``,
    ``paired`` (whether the bootstrap drew the same seeds for both), ``n_pretrain,
    n_finetune`` and the report's ``verdict`` ("a above b", "CI includes 0: unresolved").

    ``pairs`` defaults to the report's: every pre-trained label against each ranked below it,
    then each against the no-pre-training baseline."""
    _family(tables, family)
    rows = _results(tables)
    fraction = _checkpoint(tables, at)
    comparison = verdicts.compare(
        results.checkpoint_values(results.of_family(rows, family), fraction)
    )
    if pairs is None:
        ranked = results.of_family(results.family_scores(rows), family)
        found = verdicts.table_pairs(score_sections.compared_labels(ranked, fraction), comparison)
    else:
        pairs = list(pairs)
        unknown = sorted({x for pair in pairs for x in pair} - set(comparison.scores))
        if unknown:
            raise InputError(
                f"no {family!r} score at {fraction:g} for {', '.join(unknown)}: the labels with "
                f"one are {', '.join(comparison.scores)}"
            )
        found = [comparison.difference(a, b) for a, b in pairs]
    words = [verdicts.verdict_words(d) for d in found]
    return stats.difference_table(found).with_columns(pl.Series("verdict", words, pl.String))


_CLAIM_COLUMNS = {
    "claim": pl.String,
    "source": pl.String,
    "paper_a": pl.Float64,
    "paper_b": pl.Float64,
    "a": pl.String,
    "b": pl.String,
    "difference": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "paired": pl.Boolean,
    "n_pretrain": pl.Int64,
    "n_finetune": pl.Int64,
    "verdict": pl.String,
    "finetune_noise_only": pl.Boolean,
    "plan": pl.String,
    "command": pl.String,
}
"""The columns ``claims`` returns, in order (an empty frame has them too)."""


def claims(tables: Tables, at: float | None = None) -> pl.DataFrame:
    """The paper's claims the study's arms cover, tested at checkpoint ``at`` (default: the
    final one, as the report does), one row per claim and pair of labels: ``claim`` (its
    statement), ``source``, ``paper_a, paper_b`` (the paper's numbers; null where it states
    none), ``a, b`` (our labels), ``difference, ci_low, ci_high, paired, n_pretrain,
    n_finetune``, ``verdict`` (supported, contradicted, unresolved at this power),
    ``finetune_noise_only`` (one pre-training seed behind it), ``plan`` (for an unresolved
    claim, the seeds that would resolve it, in words) and ``command`` (the ``ablate run
    --dry-run`` that prices that plan; empty when there is none)."""
    rows = _results(tables)
    fraction = _checkpoint(tables, at)
    values = results.checkpoint_values(results.of_family(rows, paper.claims_family()), fraction)
    found = verdicts.claim_verdicts(values, tables.runs, tables.study)
    records = [
        {
            "claim": v.binding.claim.statement,
            "source": v.binding.claim.source,
            "paper_a": v.binding.claim.paper_a,
            "paper_b": v.binding.claim.paper_b,
            "a": v.binding.label_a,
            "b": v.binding.label_b,
            "difference": v.difference.value,
            "ci_low": v.difference.ci_low,
            "ci_high": v.difference.ci_high,
            "paired": v.difference.paired,
            "n_pretrain": v.difference.n_pretrain,
            "n_finetune": v.difference.n_finetune,
            "verdict": v.verdict,
            "finetune_noise_only": verdicts.noise_only(v.difference),
            "plan": v.power,
            "command": verdicts.plan_command(tables.study, v.plan, v.difference)
            if v.verdict == stats.UNRESOLVED
            else "",
        }
        for v in found
    ]
    return pl.DataFrame(records, schema=_CLAIM_COLUMNS)


def efficiency(tables: Tables, family: str) -> Efficiency:
    """The family's compute multipliers and crossovers with their 95% intervals, as the
    report's *Compute efficiency* section reads them; pass it to ``multiplier_table``,
    ``crossover_table`` and ``efficiency_figure``."""
    described = _family(tables, family)
    rows = results.of_family(_results(tables), family).filter(pl.col("in_aggregate"))
    return efficiency_section.family_efficiency(rows, described)


def multiplier_table(*found: Efficiency) -> pl.DataFrame:
    """``compute_efficiency.csv``'s rows: per family (``score``), ordered pair ``a, b`` and
    budget of A (``flops``), the ``multiplier`` of A over B, ``ci_low, ci_high``, its ``kind``
    (estimate, lower_bound, upper_bound, unresolved) and seeds."""
    return efficiency_tables.multiplier_table(list(found))


def crossover_table(*found: Efficiency) -> pl.DataFrame:
    """``crossovers.csv``'s rows: per family and pair, the ``kind`` (crossover, a_ahead,
    b_ahead, unresolved), the ``crossover`` FLOPs with ``ci_low, ci_high``, the number of sign
    changes, and the paired A − B with its verdict at the first and last shared budget."""
    return efficiency_tables.crossover_table(list(found))


# --- figures --------------------------------------------------------------------------------


def scores_figure(tables: Tables, family: str) -> Figure:
    """The report's ``<family>_vs_flops``: each label's score against pre-training FLOPs, its
    95% CI as a band."""
    described = _family(tables, family)
    return plots.scores_figure(described, scores(tables, family), _colors(tables))


def tasks_figure(tables: Tables, family: str) -> Figure:
    """The report's ``<family>_tasks_vs_flops``: a panel per task, its headline metric against
    pre-training FLOPs."""
    described = _family(tables, family, aggregate=False)
    return plots.task_scores_figure(described, task_scores(tables, family), _colors(tables))


def curves_figure(tables: Tables) -> Figure:
    """The report's ``pretrain_curves``: every pre-training diagnostic against FLOPs, training
    curves smoothed, held-out values at the checkpoints."""
    if tables.pretrain_metrics is None or tables.pretrain_metrics.is_empty():
        raise InputError(f"no pre-training metrics in {tables.folder}")
    return document.curves_figure(tables.pretrain_metrics, _colors(tables))


def efficiency_figure(
    tables: Tables, family: str, found: Efficiency | None = None
) -> Figure | None:
    """The report's ``<family>_efficiency``: each objective's multiplier over BERT's MLM and
    BERT's over each (or, in a study without it, for each pair of pre-trained objectives, both
    curves with their CI bands and the crossover marked, beside each one's multiplier over the
    other); ``found`` is ``efficiency(tables, family)`` if already computed. None when no two
    objectives were evaluated at two budgets or more."""
    described = _family(tables, family)
    found = efficiency(tables, family) if found is None else found
    reference = family_reference(results.of_family(_results(tables), family))
    return efficiency_section.efficiency_figure(
        found, described, scores(tables, family), _colors(tables), reference
    )


# --- helpers --------------------------------------------------------------------------------


def _results(tables: Tables) -> pl.DataFrame:
    if tables.results is None:
        raise InputError(f"no evaluation results in {tables.folder}: nothing was evaluated")
    return tables.results


def _checkpoint(tables: Tables, at: float | None) -> float:
    """``at``, a budget fraction the study evaluated, or the final one."""
    rows = _results(tables)
    if at is None:
        return results.final_fraction(rows)
    fractions = sorted(set(rows["checkpoint_fraction"].to_list()) - {0.0})
    if at not in fractions:
        listed = ", ".join(f"{f:g}" for f in fractions)
        raise InputError(f"no checkpoint at {at:g} in {tables.folder}: it evaluated {listed}")
    return float(at)


def _family(tables: Tables, family: str, aggregate: bool = True) -> TaskFamily:
    """The family, which the study must have evaluated and, with ``aggregate``, which must
    have an aggregate score (a family of separate tasks has none)."""
    present = families(tables)
    if family not in present:
        raise InputError(
            f"no {family!r} results in {tables.folder}: its families are {', '.join(present)}"
        )
    described = describe_family(family)
    if aggregate and described.aggregate is None:
        raise InputError(f"task family {family!r} has no aggregate score: see task_scores")
    return described


def _colors(tables: Tables) -> dict[str, tuple[float, ...]]:
    """Each label's colour, as in every figure of the report."""
    frames = (tables.results, tables.runs, tables.pretrain_metrics)
    return document.label_colors(document.ordered_labels(*frames), *frames)
