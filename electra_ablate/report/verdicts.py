"""The report's verdicts: every ordering, every comparison with no pre-training and every claim
of the paper is read from a 95% confidence interval (``electra_ablate.analysis.stats``: hierarchical
bootstrap over pre-training, then fine-tuning seeds, paired where the arms share seeds), never
from a comparison of min–max ranges. Each figure says how many seeds stand behind it, and with
one pre-training seed that its interval covers fine-tuning noise only.

Nothing here names a task family: the caller passes one family's rows at one checkpoint. The
paper's claims are about the family ``paper.claims_family()`` names; the report asks for them there.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, pairwise
from typing import Any

import polars as pl

from electra_ablate.analysis import paper, stats
from electra_ablate.analysis.results import score_aggregation
from electra_ablate.report.markdown import NO_VALUE, table

ABOVE, BELOW, OPEN = "above", "below", "unresolved"

NO_INTERVAL = "†"
"""Marks a figure that has no interval where figures beside it have one. Where no figure has
one (one model per arm), figures go unmarked and the section says so once."""

NO_INTERVAL_NOTE = (
    f"{NO_INTERVAL} No 95% CI: one model (one pre-training and one fine-tuning seed) stands "
    "behind this score, or behind one side of this difference, so it resolves nothing."
)


@dataclass(frozen=True)
class Comparison:
    """One family's scores and differences at one checkpoint."""

    scores: dict[str, stats.Score]
    grids: dict[str, stats.ArmGrid]

    def difference(self, a: str, b: str) -> stats.Difference:
        return stats.difference(self.grids[a], self.grids[b], score_aggregation())

    def one_pretrain_seed(self, labels: Sequence[str]) -> bool:
        """Whether one of these (pre-trained) labels has a single pre-training seed. The
        no-pre-training baseline has one by design: its initialisation is not a study seed."""
        return any(self.scores[x].finetune_noise_only for x in labels if x in self.scores)

    @property
    def single_models(self) -> bool:
        """Every arm has one model: no interval anywhere."""
        return all(s.n_pretrain * s.n_finetune == 1 for s in self.scores.values())

    @property
    def marks(self) -> bool:
        """Whether a figure without an interval needs ``NO_INTERVAL``: some arms have one
        and others do not (with none anywhere, the section says so once instead)."""
        return not self.single_models

    @property
    def some_without_interval(self) -> bool:
        """Some arms have an interval and some do not: the section explains the mark."""
        return self.marks and any(not has_interval(s) for s in self.scores.values())

    def score_text(self, label: str) -> str:
        """``label``'s score with its CI, marked if it has none and others do."""
        return score_with_ci(self.scores.get(label), mark=self.marks)

    def difference_cell(self, d: stats.Difference, digits: int = 1) -> str:
        """``+1.2 [−0.3, +2.7]``, or the difference alone (marked if others have a CI)."""
        return with_interval(
            signed(d.value, digits), d.ci_low, d.ci_high, sign=True, mark=self.marks
        )


def compare(values: pl.DataFrame) -> Comparison:
    """Scores and grids of one family's aggregated rows at one checkpoint
    (``results.checkpoint_values``)."""
    grids = stats.arm_grids(values)
    return Comparison({k: stats.score(g, score_aggregation()) for k, g in grids.items()}, grids)


def signed(x: float, digits: int = 2) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def has_interval(s: stats.Score | stats.Difference) -> bool:
    """Fewer than two resampled models (one pre-training × one fine-tuning seed) give none."""
    return not (math.isnan(s.ci_low) or math.isnan(s.ci_high))


def interval(low: float, high: float, sign: bool = False, digits: int = 1) -> str:
    """``[low, high]``, or ``NO_INTERVAL`` when there is none (one model behind it)."""
    if math.isnan(low) or math.isnan(high):
        return NO_INTERVAL
    if sign:
        return f"[{signed(low, digits)}, {signed(high, digits)}]"
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def with_interval(
    value: str, low: float, high: float, *, sign: bool = False, digits: int = 1, mark: bool = True
) -> str:
    """``value [low, high]``; without an interval, ``value`` alone, followed by
    ``NO_INTERVAL`` when ``mark`` (figures beside it have one, so a reader must tell them
    apart; where none has one, the section says so once and the figures stay clean)."""
    if math.isnan(low) or math.isnan(high):
        return f"{value}{NO_INTERVAL}" if mark else value
    return f"{value} {interval(low, high, sign, digits)}"


def shown_score(s: stats.Score) -> str:
    """A score as the report prints it (one decimal)."""
    return f"{s.value:.1f}"


def score_with_ci(s: stats.Score | None, mark: bool = True) -> str:
    if s is None:
        return NO_VALUE
    return with_interval(shown_score(s), s.ci_low, s.ci_high, mark=mark)


def seeds(n_pretrain: int, n_finetune: int) -> str:
    return f"{n_pretrain} × {n_finetune}"


def direction(d: stats.Difference) -> str:
    """``above`` when the CI of A − B lies above 0, ``below`` when below, else unresolved."""
    found = stats.verdict(">", d.ci_low, d.ci_high)
    if found == stats.SUPPORTED:
        return ABOVE
    return BELOW if found == stats.CONTRADICTED else OPEN


def pairing(d: stats.Difference) -> str:
    return "paired" if d.paired else "unpaired"


def difference_text(d: stats.Difference) -> str:
    """``+0.49 [−0.31, +1.29], paired, 1 × 3 seeds`` (``+0.49†, …`` without an interval)."""
    shown = with_interval(signed(d.value), d.ci_low, d.ci_high, sign=True, digits=2)
    return f"{shown}, {pairing(d)}, {seeds(d.n_pretrain, d.n_finetune)} seeds"


def few_seeds_words(d: stats.Difference, resolved: bool) -> str:
    """``from 2 fine-tuning seeds: read with caution`` for a verdict that ``resolved`` a
    difference whose interval rests on fewer than ``stats.FEW_SEEDS`` resampled seeds (its
    spread is estimated from two numbers); empty otherwise. Every verdict the report, the
    notebook face and its tables show is cautioned through here (``resolved_caution``)."""
    units = d.dof + 1
    if not resolved or units >= stats.FEW_SEEDS or not has_interval(d):
        return ""
    kind = "pre-training " if d.n_pretrain > 1 else "fine-tuning " if units == d.n_finetune else ""
    return f"from {units} {kind}seeds: read with caution"


def resolved_caution(d: stats.Difference, resolved: bool) -> str:
    """`` (from 2 fine-tuning seeds: read with caution)`` beside a verdict, or empty
    (``few_seeds_words``)."""
    words = few_seeds_words(d, resolved)
    return f" ({words})" if words else ""


def verdict_words(d: stats.Difference) -> str:
    found = direction(d)
    caution = resolved_caution(d, found != OPEN)
    if found == ABOVE:
        return f"{d.label_a} above {d.label_b}{caution}"
    if found == BELOW:
        return f"{d.label_b} above {d.label_a}{caution}"
    return "no interval: unresolved" if math.isnan(d.ci_low) else "CI includes 0: unresolved"


def noise_note(comparison: Comparison, pretrained: Sequence[str]) -> str:
    """What the intervals cover, in one sentence a reader cannot miss."""
    if comparison.single_models:
        return (
            "*One model per objective* (one pre-training and one fine-tuning seed): no "
            "interval can be computed, so no difference in this section is resolved; run more "
            "seeds (the claims section says how many)."
        )
    if comparison.one_pretrain_seed(pretrained):
        return (
            f"*One pre-training seed*: {stats.FINETUNE_NOISE_ONLY}. A second pre-training seed "
            "can move a score by more than these intervals show."
        )
    return ""


def ordering(
    ranked_labels: Sequence[str], comparison: Comparison, heading: str
) -> tuple[str, list[stats.Difference]]:
    """The measured ranking with each score's CI, and each adjacent pair's difference.
    ``heading`` names what is ranked, as ``**Measured ordering** (median … of the budget``: this
    closes it with what the figures are. With one model per arm the heading says once that no
    step is resolved, in place of a line per step that would say so each time."""
    present = [x for x in ranked_labels if x in comparison.scores]
    if not present:
        return "", []
    names = ranked_line(present, comparison)
    diffs = [comparison.difference(a, b) for a, b in zip(present, present[1:], strict=False)]
    if comparison.single_models:
        closing = "; one model each, so no step of it is resolved)"
        return f"{heading}{closing}: {names}.", diffs
    lines = [f"{heading}, 95% CI): {names}."]
    lines += [
        f"- {d.label_a} − {d.label_b}: {difference_text(d)} → {verdict_words(d)}" for d in diffs
    ]
    return "\n".join(lines), diffs


def ranked_line(present: Sequence[str], comparison: Comparison) -> str:
    """``a 80.0 [..] > b 75.0 [..] = c 75.0 [..]``: labels best first, each with its score; two
    neighbours whose scores read the same as printed are tied (``ranked_text``), so the line
    never claims an order it does not show (whether a step is more than seeds make is for the
    difference's CI, on the lines below it)."""
    return ranked_text(
        [(f"{x} {comparison.score_text(x)}", shown_score(comparison.scores[x])) for x in present]
    )


def ranked_text(entries: Sequence[tuple[str, object]]) -> str:
    """Entries best first as ``a > b = c``: each is (its text, what ranks it), and neighbours
    that rank equal are joined by ``=``."""
    text = entries[0][0]
    for (_, above), (entry, below) in pairwise(entries):
        text += f" {'=' if above == below else '>'} {entry}"
    return text


def baseline_comparison(
    pretrained: Sequence[str], baseline: str | None, comparison: Comparison
) -> str:
    """Each objective minus the no-pre-training baseline, read from the difference's CI."""
    if baseline is None or baseline not in comparison.scores:
        return "No no-pre-training baseline was evaluated (`baseline: false`)."
    groups: dict[str, list[str]] = {ABOVE: [], OPEN: [], BELOW: []}
    for label in pretrained:
        if label not in comparison.scores:
            continue
        d = comparison.difference(label, baseline)
        found = direction(d)
        caution = few_seeds_words(d, found != OPEN)
        cell = comparison.difference_cell(d) + (f"; {caution}" if caution else "")
        groups[found].append(f"{label} ({cell})")
    parts = [f"**No pre-training**: {comparison.score_text(baseline)}."]
    words = {
        ABOVE: "Above it (95% CI of the difference above 0)",
        OPEN: (
            "Not resolved from it (the CI of the difference includes 0, or there is none)"
            if comparison.marks
            else "Not resolved from it"
        ),
        BELOW: "Below it (95% CI of the difference below 0)",
    }
    parts += [f"{words[k]}: {', '.join(v)}." for k, v in groups.items() if v]
    return " ".join(parts)


def table_pairs(labels: Sequence[str], comparison: Comparison) -> list[stats.Difference]:
    """Every pair's difference, each label against the ones after it in ``labels`` (those
    without a score skipped): the rows of ``pairs_table``."""
    present = [x for x in labels if x in comparison.scores]
    return [comparison.difference(a, b) for a, b in combinations(present, 2)]


def pairs_table(labels: Sequence[str], comparison: Comparison) -> str:
    """Every pair's difference, each label against the ones ranked below it."""
    rows = []
    for d in table_pairs(labels, comparison):
        a, b = d.label_a, d.label_b
        rows.append(
            [
                a,
                b,
                signed(d.value),
                interval(d.ci_low, d.ci_high, sign=True),
                pairing(d),
                seeds(d.n_pretrain, d.n_finetune),
                verdict_words(d),
            ]
        )
    if not rows:
        return ""
    if all(row[-1] == "no interval: unresolved" for row in rows):
        return (
            f"*Every pair's difference*: none of the {len(rows)} pairs has an interval (one "
            "model per arm), so none is resolved; the scores above give each difference."
        )
    return table(
        ["A", "B", "A − B", "95% CI", "Draw", "Seeds (pre-training × fine-tuning)", "Verdict"], rows
    )


# --- the paper's claims ---------------------------------------------------------------------


def claims_section(
    title: str,
    values: pl.DataFrame,
    runs: pl.DataFrame | None,
    study: Mapping[str, Any],
    fraction: str,
) -> str:
    """The paper's claims this study covers, each with our difference, its CI and the verdict;
    for each unresolved one, the seeds that would resolve it and the command that prices them."""
    found = claim_verdicts(values, runs, study)
    if not found:
        return ""
    rows, plans = [], []
    # No arm with a variance: every claim is unresolved for the same reason, said once below.
    single_models = all(v.difference.n_pretrain * v.difference.n_finetune == 1 for v in found)
    unmarked = [v.difference for v in found if not has_interval(v.difference)]
    for v in found:
        claim, d = v.binding.claim, v.difference
        paper_numbers = (
            f"{claim.paper_a:.1f} vs {claim.paper_b:.1f} ({signed(claim.gap)})"
            if claim.gap is not None
            else claim.gap_note
        )
        rows.append(
            [
                claim.statement,
                paper_numbers,
                f"{v.binding.label_a} − {v.binding.label_b}",
                with_interval(
                    signed(d.value), d.ci_low, d.ci_high, sign=True, mark=not single_models
                ),
                f"{seeds(d.n_pretrain, d.n_finetune)}, {pairing(d)}",
                f"**{v.verdict}**"
                + resolved_caution(d, v.verdict != stats.UNRESOLVED)
                + (" (fine-tuning noise only)" if noise_only(d) else ""),
            ]
        )
        if v.verdict == stats.UNRESOLVED and not single_models:
            line = f"- *{claim.statement}* ({v.binding.label_a} − {v.binding.label_b}): {v.power}."
            command = plan_command(study, v.plan, v.difference)
            if command:
                line += f" Its cost: `{command}`"
            plans.append(line)
    relations = (
        f'A claim "A > B" is *supported* when the 95% CI of A − B lies above 0, '
        f'*contradicted* when it lies below 0; a tie "A ≈ B" is supported when the CI lies '
        f"within ±{paper.EQUIVALENCE_MARGIN:g} points and contradicted when it lies outside. "
        "Anything else is *unresolved at this power*: these seeds cannot tell. A verdict marked "
        "*(fine-tuning noise only)* rests on one pre-training seed per arm: "
        f"{stats.FINETUNE_NOISE_ONLY}, and another pre-training seed may move the difference by "
        "more than its interval shows, so read it as a verdict about these models, not yet "
        "about the objectives."
    )
    parts = [
        f"## The paper's claims ({title} at {fraction} of the budget)",
        f"Each claim of {paper.PAPER} that this study's arms cover, tested on the median "
        f"{title} per model. {relations} The paper's numbers come from base-size (Table 5, "
        "§3.2) or small (Table 1) models trained far longer: compare the direction, not the "
        "size.",
        *folded_table(
            [
                "Claim",
                "Paper: A vs B (A − B)",
                "Our labels: A − B",
                "Ours: A − B" if single_models else "Ours: A − B [95% CI]",
                "Seeds, draw",
                "Verdict",
            ],
            rows,
            folded=("Seeds, draw",),
        ),
    ]
    if unmarked and not single_models:
        parts.append(NO_INTERVAL_NOTE)
    if single_models:
        pilot = plan_command(study, None, found[0].difference)
        parts.append(
            "**No claim can be resolved here**: every arm is one model (one pre-training and one "
            "fine-tuning seed), so no variance was measured and no seed plan can be computed "
            f"from this study. A pilot with {paper.PILOT[0]} pre-training × {paper.PILOT[1]} "
            "fine-tuning seeds measures it." + (f" Its cost: `{pilot}`" if pilot else "")
        )
    if plans:
        parts += [
            "**Seeds that would resolve each unresolved claim** (at the variance measured here; "
            "`--dry-run` prints what that plan costs, training nothing):",
            "\n".join(plans),
        ]
    return "\n\n".join(parts)


def folded_table(headers: list[str], rows: list[list[str]], folded: Sequence[str]) -> list[str]:
    """``table(headers, rows)``, but each column of ``folded`` that holds one value in every
    row (of two or more) is left out and said once in a line below: thirteen rows of
    "1 × 1, paired | unresolved at this power" say nothing the line does not."""
    keep = [
        i
        for i, header in enumerate(headers)
        if header not in folded or len(rows) < 2 or len({row[i] for row in rows}) > 1
    ]
    said = [f"{headers[i]}: {rows[0][i]}" for i in range(len(headers)) if i not in keep]
    shown = table([headers[i] for i in keep], [[row[i] for i in keep] for row in rows])
    return [shown] + ([f"Every claim above — {'; '.join(said)}."] if said else [])


def claim_verdicts(
    values: pl.DataFrame, runs: pl.DataFrame | None, study: Mapping[str, Any]
) -> list[paper.ClaimVerdict]:
    """Each claim of the paper that the study's arms (``runs``) cover, tested on ``values``
    (the claims family's aggregated rows at one checkpoint, ``results.checkpoint_values``);
    none when the runs table does not record the arms' params."""
    if runs is None or "params_json" not in runs.columns:
        return []
    arms = paper.arms_from_runs(runs)
    backbone = ((study.get("spec") or {}).get("backbone") or {}).get("preset")
    return paper.evaluate_claims(values, arms, score_aggregation(), backbone=backbone)


def plan_command(
    study: Mapping[str, Any], plan: stats.SeedPlan | None, found: stats.Difference
) -> str:
    """``ablate run SPEC --dry-run --set …``: the study with the plan's seed counts (the pilot's
    when one model per arm left nothing to plan from); empty when no plan in the grid resolves
    the claim or the study has no spec path."""
    if plan is not None and plan.cheapest is not None:
        n_pretrain, n_finetune = plan.cheapest.n_pretrain, plan.cheapest.n_finetune
    elif plan is None and found.n_pretrain * found.n_finetune == 1:
        n_pretrain, n_finetune = paper.PILOT
    else:
        return ""
    if not study.get("spec_path"):
        return ""
    spec = study.get("spec") or {}
    overrides = dict(study.get("overrides") or {})
    pretrain_seeds = list((spec.get("pretrain") or {}).get("seeds") or [0])
    block = "evaluation" if spec.get("evaluation") and not spec.get("finetune") else "finetune"
    finetune_seeds = list((spec.get(block) or {}).get("seeds") or [0])
    overrides["pretrain.seeds"] = extend(pretrain_seeds, n_pretrain)
    overrides[f"{block}.seeds"] = extend(finetune_seeds, n_finetune)
    sets = " ".join(f"--set {shlex.quote(f'{k}={flow(v)}')}" for k, v in overrides.items())
    return f"ablate run {study['spec_path']} --dry-run {sets}"


def extend(existing: list[int], n: int) -> list[int]:
    """``n`` seeds: the study's own first, then the next unused integers."""
    out = list(dict.fromkeys(existing))[:n]
    candidate = 0
    while len(out) < n:
        if candidate not in out:
            out.append(candidate)
        candidate += 1
    return out


def flow(value: Any) -> str:
    """A ``--set`` value in YAML flow style (``[0, 1, 2]``, ``5e-4``)."""
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def noise_only(d: stats.Difference) -> bool:
    """Whether a difference has an interval that covers fine-tuning noise alone (one
    pre-training seed, several fine-tuning seeds); with one model per arm it has none."""
    return d.finetune_noise_only and d.n_finetune > 1
