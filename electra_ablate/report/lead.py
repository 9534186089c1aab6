"""The report's first screen, "At a glance" (issue 69): what the plan did (pre-training runs done,
failed, reused; wall time), the headline comparison (each objective against the paper's
baseline, BERT's MLM, with its interval) and what is unresolved and why, before the detail
the sections below give. Every number is one the sections below also print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from electra_ablate.analysis.stats import Difference
from electra_ablate.report.markdown import duration, fraction
from electra_ablate.report.verdicts import Comparison, few_seeds_words, signed
from electra_ablate.study.reuse import REUSED_MESSAGE
from electra_ablate.study.units import BASELINE_OBJECTIVE

HEADLINE_BASELINE = "bert_mlm"
"""The objective every other is compared against on the first screen: the paper's baseline
(Table 5's BERT)."""


def headline_reference(objective_of: Mapping[str, str]) -> str | None:
    """The label the headline compares against: the first label running BERT's MLM, else None
    (then the first screen lists the ranking alone)."""
    return next((x for x, o in objective_of.items() if o == HEADLINE_BASELINE), None)


def family_reference(rows: pl.DataFrame) -> str | None:
    """``headline_reference`` of one family's rows: what the report's efficiency section and
    figure compare against (``electra_ablate.api.efficiency_figure`` draws the same)."""
    return headline_reference(
        dict(rows.select("label", "objective").unique(maintain_order=True).iter_rows())
    )


def plan_line(study: Mapping[str, Any], runs: pl.DataFrame | None) -> str:
    """``7 pre-training runs: 7 done (7 reused), 0 failed; wall time 15 s``: from the tables
    the report keeps, so a regenerated report says the same."""
    parts = []
    if runs is not None and runs.height:
        trained = runs.filter(pl.col("objective") != BASELINE_OBJECTIVE)
        counts = dict(trained["status"].value_counts().iter_rows())
        reused = trained.filter(
            pl.col("message").fill_null("").str.starts_with(REUSED_MESSAGE)
        ).height
        done = f"{counts.pop('done', 0)} done" + (
            f" ({reused} reused from an identical finished run)" if reused else ""
        )
        failed = f"{counts.pop('failed', 0)} failed"
        rest = [f"{n} {state}" for state, n in sorted(counts.items())]
        runs_ = "run" if trained.height == 1 else "runs"
        parts.append(f"{trained.height} pre-training {runs_}: {', '.join([done, failed, *rest])}")
    if merged := study.get("merged_from"):  # the merge's own wall time says nothing
        n = len(merged)
        sources = f"{n} source{'' if n == 1 else 's'}"
        parts.append(f"merged from {sources} (each one's wall time: Provenance)")
    else:
        parts.append(f"wall time {duration(study.get('wall_s'))}")
    return "; ".join(parts)


def headline_cell(d: Difference, comparison: Comparison) -> str:
    """``−0.4``, ``+1.2 [+0.3, +2.1] (resolved)`` (with the caution of a verdict from fewer
    than 3 seeds, ``verdicts.few_seeds_words``) or ``+0.4 [−0.8, +1.6]`` (the line
    "Unresolved" names those once)."""
    if comparison.single_models:  # the line "Unresolved" says why, once
        return signed(d.value, 1)
    if math.isnan(d.ci_low) or math.isnan(d.ci_high):
        return f"{signed(d.value, 1)} (one model on a side: no interval)"
    cell = comparison.difference_cell(d)
    if not (d.ci_low > 0 or d.ci_high < 0):
        return cell
    caution = few_seeds_words(d, resolved=True)
    return f"{cell} (resolved{'; ' + caution if caution else ''})"


def lead_section(
    study: Mapping[str, Any],
    runs: pl.DataFrame | None,
    headline: tuple[str, float, Comparison, Mapping[str, str], list[str]] | None,
) -> str:
    """ "At a glance": the plan's outcome, then (``headline``: the family's title, the final
    budget, its comparison, each label's objective and the ranked labels) each objective's
    score minus the reference's, and what is unresolved and why."""
    lines = [f"- **Plan**: {plan_line(study, runs)}."]
    if headline is not None:
        title, final, comparison, objective_of, ranked = headline
        reference = headline_reference(objective_of)
        at = f"{title} at {fraction(final)} of the budget"
        if reference is not None and reference in comparison.grids:
            cells = [
                f"{label} {headline_cell(comparison.difference(label, reference), comparison)}"
                for label in ranked
                if label != reference and label in comparison.grids
            ]
            ci = "" if comparison.single_models else " [95% CI]"
            lines.append(
                f"- **Headline** ({at}, each label minus {reference}{ci}): "
                + ("; ".join(cells) or "no other label")
                + "."
            )
        elif ranked:
            lines.append(f"- **Headline** ({at}): best first, {', '.join(ranked)}.")
        missing = [label for label in ranked if label not in comparison.grids]
        if missing:
            lines.append(
                f"- **No score** at {fraction(final)} of the budget: {', '.join(missing)} (the "
                "runs table says why)."
            )
        if comparison.single_models:
            lines.append(
                "- **Unresolved**: every difference. One model per label (one pre-training "
                "and one fine-tuning seed): no variance, so no interval; the claims section "
                "gives the seeds that would resolve them."
            )
        elif reference in comparison.grids:
            open_ = [
                label
                for label in ranked
                if label != reference
                and label in comparison.grids
                and not (d := comparison.difference(label, reference)).ci_low > 0
                and not d.ci_high < 0
            ]
            if open_:
                lines.append(
                    f"- **Unresolved** against {reference}: {', '.join(open_)} (the 95% CI "
                    "holds 0, or there is none: these seeds cannot tell; the claims section "
                    "gives the seeds that would)."
                )
    return "## At a glance\n\n" + "\n".join(lines)
