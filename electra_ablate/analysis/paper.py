"""Reference numbers, findings and claims of Clark et al., "ELECTRA" (ICLR 2020), for reports.

Only what the paper states in its text or tables (checked against arXiv 2003.10555), keyed by
this project's objective names so a report can print them beside measured values. The claims a
study can test (Table 5's order, weight tying, generator size, two-stage and adversarial
training, ELECTRA-Small against BERT-Small) are data: :data:`CLAIMS`. :func:`covered_claims`
says which a study's arms cover and :func:`evaluate_claims` gives each a verdict from the
confidence interval of the measured difference (``electra_ablate.analysis.stats``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from electra_ablate.analysis import stats
from electra_ablate.evaluation.glue.data import FAMILY as GLUE_FAMILY
from electra_ablate.evaluation.glue.published import PAPER as PAPER
from electra_ablate.evaluation.glue.published import TABLE5_GLUE as TABLE5_GLUE
from electra_ablate.evaluation.glue.published import TABLE5_NAMES as TABLE5_NAMES
from electra_ablate.evaluation.glue.published import TABLE5_SOURCE as TABLE5_SOURCE
from electra_ablate.infra.errors import AblateError
from electra_ablate.pretraining.departures import params_departures
from electra_ablate.pretraining.registry import get_objective

if TYPE_CHECKING:  # frames only in annotations: a GPU node's job path has no polars
    import polars as pl


def claims_family() -> str:
    """The task family whose aggregate the paper's numbers and claims are about (GLUE's
    score)."""
    return GLUE_FAMILY


# §3.2: GLUE with a generator the size of the discriminator, 500k steps, by what G and D share.
TYING_GLUE: dict[str, float] = {"none": 83.6, "embeddings": 84.3, "all": 84.4}

# Table 1: GLUE dev of the small models at their training FLOPs.
TABLE1_GLUE: dict[str, tuple[float, float]] = {
    "ELECTRA-Small": (79.9, 1.4e18),
    "BERT-Small": (75.1, 1.4e18),
    "ELECTRA-Small, 6.25% trained": (74.1, 8.9e16),
}

# §3.2 and Figure 3, per objective that the statement is about.
FINDINGS: dict[str, tuple[str, ...]] = {
    "electra": (
        f"Weight tying with a same-size generator, 500k steps (§3.2): GLUE {TYING_GLUE['none']}"
        f" with no tying, {TYING_GLUE['embeddings']} tying token embeddings, "
        f"{TYING_GLUE['all']} tying all weights.",
        "Generator size (Figure 3 left, 500k steps each): generators 1/4–1/2 the size of the "
        "discriminator work best; a generator smaller than the discriminator improves results.",
    ),
    "two_stage": (
        "Two-stage training (Figure 3 right): GLUE improves notably after the switch from the "
        "generative to the discriminative objective but does not end up above joint training; "
        "without initialising D from G, D sometimes fails to learn beyond the majority class.",
    ),
    "adversarial": (
        "Adversarial training (Figure 3 right, §3.2): above BERT but below "
        "maximum-likelihood ELECTRA; the adversarial generator reaches 58% MLM accuracy against "
        "65% for an MLE-trained one and has a low-entropy output distribution.",
    ),
}


# --- The paper's claims, as data a study can test -------------------------------------------
#
# Each claim compares two arms, A and B, described by the objective they run and conditions on
# its params (the resolved params ``runs.parquet`` stores as ``params_json``). Its relation is
# "A > B" or "A ≈ B"; its gap is the paper's A − B in GLUE points, or None where the paper
# gives only a figure. A study covers a claim when it has an arm on each side.

EQUIVALENCE_MARGIN = 0.5
"""GLUE points within which two arms count as tied ("≈"). The paper's ties are 0.0–0.2 apart
(Table 5: Replace MLM 82.4, ELECTRA 15% 82.4, BERT 82.2; §3.2: tying all weights 84.4 against
tying embeddings 84.3, "little improvement"), and the smallest gap it builds a conclusion on,
besides its "slightly" for Replace MLM over BERT (0.2), is 0.7 (ELECTRA over All-Tokens MLM;
tied embeddings over no tying). Half a point lies between. It is in points of the score the
study computes, which for a CPU study is not the paper's GLUE: compare with care."""

TYING_SOURCE = (
    f"{PAPER}, §3.2 (weight sharing): generator the size of the discriminator, base size, "
    "500k steps each"
)
GENERATOR_SIZE_SOURCE = (
    f"{PAPER}, §3.2 and Figure 3 (left): 500k steps each, so smaller generators used less "
    "compute (a study at equal FLOPs gives them more steps instead)"
)
TRAINING_ALGORITHMS_SOURCE = f"{PAPER}, §3.2 and Figure 3 (right): curves against FLOPs"
TABLE1_SOURCE = (
    f"{PAPER}, Table 1 and §3.3: GLUE dev, ELECTRA-Small and BERT-Small trained with the same "
    "hyper-parameters to 1.4e18 FLOPs (1M and 1.5M steps)"
)

FIGURE_ONLY = "not stated: figure only"


@dataclass(frozen=True)
class Condition:
    """A test on one param's value, with the words a report prints for it."""

    text: str
    test: Callable[[Any], bool]


def equals(value: Any) -> Condition:
    return Condition(f"= {value}", lambda v: v == value)


def in_range(low: float, high: float) -> Condition:
    return Condition(f"in [{low:g}, {high:g}]", lambda v: low <= v <= high)


def outside(low: float, high: float) -> Condition:
    return Condition(f"outside [{low:g}, {high:g}]", lambda v: not low <= v <= high)


def below(limit: float) -> Condition:
    return Condition(f"< {limit:g}", lambda v: v < limit)


@dataclass(frozen=True)
class ArmPattern:
    """Which arms stand for one side of a claim: the objective and conditions on its params.
    A param the pattern does not name can take any value."""

    name: str
    objective: str
    params: Mapping[str, Condition] = field(default_factory=dict)

    def matches(self, objective: str, params: Mapping[str, Any]) -> bool:
        return objective == self.objective and all(
            key in params and condition.test(params[key]) for key, condition in self.params.items()
        )

    def describe(self) -> str:
        conditions = ", ".join(f"{k} {c.text}" for k, c in self.params.items())
        return f"`{self.objective}`" + (f" ({conditions})" if conditions else "")


@dataclass(frozen=True)
class Claim:
    """One claim of the paper a study can test: "A > B" or "A ≈ B"."""

    id: str
    statement: str
    source: str
    a: ArmPattern
    b: ArmPattern
    relation: Literal[">", "≈"]
    paper_a: float | None = None
    paper_b: float | None = None
    gap_note: str = ""
    """Where the paper's gap comes from, or why there is none."""
    backbone: str | None = None
    """Only a study on this backbone preset tests it (``None``: any)."""
    margin: float = EQUIVALENCE_MARGIN
    """The equivalence margin of an "≈" claim."""

    @property
    def gap(self) -> float | None:
        """The paper's A − B in GLUE points, where it states both numbers."""
        if self.paper_a is None or self.paper_b is None:
            return None
        return round(self.paper_a - self.paper_b, 2)

    @property
    def constrained(self) -> frozenset[str]:
        return frozenset(self.a.params) | frozenset(self.b.params)


TRAINED = {"generator": equals("mlm")}
"""A jointly trained MLM generator, the paper's default (not its unigram ablation)."""

TABLE5_ARMS: dict[str, ArmPattern] = {
    objective: ArmPattern(
        TABLE5_NAMES[objective], objective, {} if objective == "bert_mlm" else TRAINED
    )
    for objective in TABLE5_GLUE
}

# What the paper's text says about a pair of Table 5's columns; it decides the relation where
# the numbers alone would not (Replace MLM over BERT by 0.2, within the equivalence margin).
TABLE5_TEXT: dict[tuple[str, str], str] = {
    ("electra", "bert_mlm"): "abstract and §1: ELECTRA's representations 'substantially "
    "outperform' BERT's given the same model size, data and compute",
    ("electra", "electra_15"): "§3.5: 'ELECTRA 15% performs much worse than ELECTRA'",
    ("replace_mlm", "bert_mlm"): "§3.5: 'Replace MLM slightly outperforms BERT'",
    ("all_tokens_mlm", "bert_mlm"): "§3.5: All-Tokens MLM 'closes most of the gap between BERT "
    "and ELECTRA'",
    ("electra", "all_tokens_mlm"): "§3.5: 'the improvement of ELECTRA over All-Tokens MLM'",
}


def _table5_claims() -> list[Claim]:
    """Table 5's chain as pairwise claims: every pair of its columns. A pair is "≈" when the
    paper's numbers are within the equivalence margin and its text states no order, else ">"
    (the higher column first)."""
    claims = []
    for upper, lower in combinations(TABLE5_GLUE, 2):
        gap = TABLE5_GLUE[upper] - TABLE5_GLUE[lower]
        text = TABLE5_TEXT.get((upper, lower))
        relation = ">" if text is not None or gap > EQUIVALENCE_MARGIN else "≈"
        a, b = TABLE5_ARMS[upper], TABLE5_ARMS[lower]
        sign = ">" if relation == ">" else "≈"
        claims.append(
            Claim(
                id=f"table5:{upper}{'>' if relation == '>' else '~'}{lower}",
                statement=(
                    f"{a.name} {TABLE5_GLUE[upper]:.1f} {sign} {b.name} {TABLE5_GLUE[lower]:.1f}"
                ),
                source=TABLE5_SOURCE + (f"; {text}" if text else ""),
                a=a,
                b=b,
                relation=relation,
                paper_a=TABLE5_GLUE[upper],
                paper_b=TABLE5_GLUE[lower],
                gap_note="Table 5",
            )
        )
    return claims


TYING_ARMS: dict[str, ArmPattern] = {
    tying: ArmPattern(
        name, "electra", {**TRAINED, "generator_size": equals(1.0), "tying": equals(tying)}
    )
    for tying, name in (
        ("none", "no tying"),
        ("embeddings", "tied token embeddings"),
        ("all", "all weights tied"),
    )
}

# What §3.2 says about each pair of tying strategies, and the relation it implies.
TYING_TEXT: dict[tuple[str, str], tuple[Literal[">", "≈"], str]] = {
    ("embeddings", "none"): (">", "'ELECTRA benefits from tied token embeddings'"),
    ("all", "none"): (">", "tying all weights and tying embeddings both score above no tying"),
    ("all", "embeddings"): ("≈", "'tying all encoder weights caused little improvement'"),
}


def _tying_claims() -> list[Claim]:
    claims = []
    for (upper, lower), (relation, text) in TYING_TEXT.items():
        a, b = TYING_ARMS[upper], TYING_ARMS[lower]
        claims.append(
            Claim(
                id=f"tying:{upper}{'>' if relation == '>' else '~'}{lower}",
                statement=f"{a.name.capitalize()} {TYING_GLUE[upper]:.1f} {relation} {b.name} "
                f"{TYING_GLUE[lower]:.1f}",
                source=f"{TYING_SOURCE}; {text}",
                a=a,
                b=b,
                relation=relation,
                paper_a=TYING_GLUE[upper],
                paper_b=TYING_GLUE[lower],
                gap_note="§3.2",
            )
        )
    return claims


BEST_GENERATOR = ArmPattern(
    "ELECTRA, generator 1/4–1/2 of D",
    "electra",
    {**TRAINED, "generator_size": in_range(0.25, 0.5)},
)
OTHER_GENERATOR = ArmPattern(
    "ELECTRA, generator outside 1/4–1/2 of D",
    "electra",
    {**TRAINED, "generator_size": outside(0.25, 0.5)},
)
SMALLER_GENERATOR = ArmPattern(
    "ELECTRA, generator smaller than D", "electra", {**TRAINED, "generator_size": below(1.0)}
)
SAME_SIZE_GENERATOR = ArmPattern(
    "ELECTRA, generator the size of D", "electra", {**TRAINED, "generator_size": equals(1.0)}
)
UNIGRAM_GENERATOR = ArmPattern(
    "ELECTRA, unigram generator", "electra", {"generator": equals("unigram")}
)
JOINT_ELECTRA = ArmPattern("ELECTRA (joint, maximum likelihood)", "electra", TRAINED)
TWO_STAGE = ArmPattern(
    "two-stage (D initialised from G)", "two_stage", {"init_from_generator": equals(True)}
)
ADVERSARIAL = ArmPattern("adversarial ELECTRA", "adversarial")
BERT = TABLE5_ARMS["bert_mlm"]
_ELECTRA_SMALL = TABLE1_GLUE["ELECTRA-Small"]


def _flops(value: float) -> str:
    return f"{value:.1e}".replace("e+", "e")


_BERT_SMALL = TABLE1_GLUE["BERT-Small"]
_SIXTEENTH = TABLE1_GLUE["ELECTRA-Small, 6.25% trained"]

CLAIMS: tuple[Claim, ...] = (
    *_table5_claims(),
    *_tying_claims(),
    Claim(
        id="generator_size:best",
        statement="Generators 1/4–1/2 the discriminator's size work best",
        source=f"{GENERATOR_SIZE_SOURCE}; §3.2: 'models work best with generators 1/4-1/2 the "
        "size of the discriminator'",
        a=BEST_GENERATOR,
        b=OTHER_GENERATOR,
        relation=">",
        gap_note=FIGURE_ONLY,
    ),
    Claim(
        id="generator_size:smaller>same",
        statement="A generator smaller than the discriminator beats one of the same size",
        source=f"{GENERATOR_SIZE_SOURCE}; Figure 3's caption: 'having a generator smaller than "
        "the discriminator improves results' (stated in general; the text names 1/4–1/2 as best)",
        a=SMALLER_GENERATOR,
        b=SAME_SIZE_GENERATOR,
        relation=">",
        gap_note=FIGURE_ONLY,
    ),
    Claim(
        id="generator_size:trained>unigram",
        statement="A trained generator of 1/4–1/2 the discriminator's size beats the unigram "
        "generator",
        source=f"{GENERATOR_SIZE_SOURCE}; the text introduces the unigram generator but states "
        "no result for it: read from the figure",
        a=BEST_GENERATOR,
        b=UNIGRAM_GENERATOR,
        relation=">",
        gap_note=FIGURE_ONLY,
    ),
    Claim(
        id="two_stage:joint>two_stage",
        statement="Joint training ends above two-stage training",
        source=f"{TRAINING_ALGORITHMS_SOURCE}; two-stage 'does not end up outscoring joint "
        "training' (so a tie would not contradict the text, only the figure)",
        a=JOINT_ELECTRA,
        b=TWO_STAGE,
        relation=">",
        gap_note=FIGURE_ONLY,
    ),
    Claim(
        id="adversarial:adversarial>bert",
        statement="Adversarial ELECTRA beats BERT",
        source=f"{TRAINING_ALGORITHMS_SOURCE}; 'although still outperforming BERT, we found "
        "adversarial training to underperform maximum-likelihood training'",
        a=ADVERSARIAL,
        b=BERT,
        relation=">",
        gap_note=FIGURE_ONLY,
    ),
    Claim(
        id="adversarial:mle>adversarial",
        statement="Maximum-likelihood ELECTRA beats adversarial ELECTRA",
        source=f"{TRAINING_ALGORITHMS_SOURCE}; 'we found adversarial training to underperform "
        "maximum-likelihood training'",
        a=JOINT_ELECTRA,
        b=ADVERSARIAL,
        relation=">",
        gap_note=FIGURE_ONLY,
    ),
    Claim(
        id="small:electra>bert",
        statement="At equal pre-training FLOPs ELECTRA-Small beats BERT-Small: "
        f"{_ELECTRA_SMALL[0]} > {_BERT_SMALL[0]} at {_flops(_BERT_SMALL[1])}",
        source=f"{TABLE1_SOURCE}; §3.3: it 'scores 5 points higher than a comparable BERT-Small "
        "model'; Figure 1: replaced token detection 'consistently outperforms masked language "
        "model pre-training given the same compute budget'",
        a=ArmPattern("ELECTRA-Small", "electra", TRAINED),
        b=ArmPattern("BERT-Small", "bert_mlm"),
        relation=">",
        paper_a=_ELECTRA_SMALL[0],
        paper_b=_BERT_SMALL[0],
        gap_note=f"Table 1, at {_flops(_BERT_SMALL[1])} FLOPs (full training). Below that the "
        f"paper gives ELECTRA-Small alone ({_SIXTEENTH[0]} at {_flops(_SIXTEENTH[1])} FLOPs, "
        "6.25% trained) and BERT-Small only as Figure 1's curve. Not claimed: that 6.25% of "
        "ELECTRA-Small's "
        f"compute beats BERT-Small trained fully; at 1/16 of the FLOPs it is "
        f"{_BERT_SMALL[0] - _SIXTEENTH[0]:.1f} below it ({_SIXTEENTH[0]} against "
        f"{_BERT_SMALL[0]}), 'reasonable performance' in the paper's words",
        backbone="small",
    ),
)

CLAIMS_BY_ID: dict[str, Claim] = {claim.id: claim for claim in CLAIMS}


# --- Which claims a study covers, and the verdicts ------------------------------------------


class Arm(NamedTuple):
    """One arm of a study: what it runs. ``variant`` is the study variant it belongs to."""

    objective: str
    params: Mapping[str, Any]
    variant: str | None = None


@dataclass(frozen=True)
class ClaimBinding:
    """A claim with the study's labels bound to its sides: ``label_a`` plays A."""

    claim: Claim
    label_a: str
    label_b: str


def arms_from_runs(runs: pl.DataFrame) -> dict[str, Arm]:
    """A study's arms from its ``runs.parquet`` (``label, objective, params_json[, variant]``),
    one per label."""
    arms: dict[str, Arm] = {}
    has_variant = "variant" in runs.columns
    for row in runs.iter_rows(named=True):
        params = json.loads(row["params_json"] or "{}")
        arms.setdefault(
            row["label"],
            Arm(row["objective"], params, row["variant"] if has_variant else None),
        )
    return arms


def setting_departures(runs: pl.DataFrame | None) -> dict[str, list[str]]:
    """Each label whose params are set away from the paper's values (a mask rate, tying,
    BERT's 80/10/10 …: ``params_departures``), with the departures; the paper's published
    number for its objective was measured at another setting, so a report prints none beside
    it. A default that departs for every arm alike (an option left unset) is not a variant's
    and is left to the header's deviations."""
    if runs is None or not {"label", "objective", "params_json"} <= set(runs.columns):
        return {}
    found = {}
    for label, arm in arms_from_runs(runs).items():
        departures = params_departures(arm.objective, arm.params, unset=False)
        if departures:
            found[label] = departures
    return found


def resolved_params(objective: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with the objective's defaults filled in, as a run records them; as given when
    the objective is not registered here (e.g. the no-pre-training baseline)."""
    try:
        return get_objective(objective).Params.model_validate(dict(params)).model_dump()
    except (AblateError, ValueError):
        return dict(params)


def _controlled(a: Arm, b: Arm, constrained: frozenset[str]) -> bool:
    """Two arms compare what a claim is about only if they agree on everything else: same
    variant, and the same value for every param both have that the claim does not constrain."""
    shared = (set(a.params) & set(b.params)) - constrained
    return a.variant == b.variant and all(a.params[k] == b.params[k] for k in shared)


def covered_claims(
    arms: Mapping[str, Arm | tuple[str, Mapping[str, Any]]],
    *,
    backbone: str | None = None,
    claims: Iterable[Claim] = CLAIMS,
) -> list[ClaimBinding]:
    """Every claim the study's arms can test, once per pair of labels that plays its sides.

    ``arms``: label → (objective, params[, variant]). Params as ``runs.parquet`` records them
    (every field) are used as they are; an arm lacking a param some claim constrains gets its
    objective's defaults (which loads the objective registry). A claim tied to a backbone
    (``Claim.backbone``) is covered only when ``backbone`` (the study's preset) is that one.
    Arms are bound only when they differ in nothing but what the claim is about
    (:func:`_controlled`).
    """
    claims = list(claims)
    constrained: dict[str, set[str]] = {}
    for claim in claims:
        for side in (claim.a, claim.b):
            constrained.setdefault(side.objective, set()).update(side.params)
    study = {}
    for label, given in arms.items():
        arm = Arm(*given)
        if constrained.get(arm.objective, set()) - set(arm.params):
            arm = arm._replace(params=resolved_params(arm.objective, arm.params))
        study[label] = arm
    bindings = []
    for claim in claims:
        if claim.backbone is not None and claim.backbone != backbone:
            continue
        for label_a, arm_a in study.items():
            if not claim.a.matches(arm_a.objective, arm_a.params):
                continue
            for label_b, arm_b in study.items():
                if (
                    label_b != label_a
                    and claim.b.matches(arm_b.objective, arm_b.params)
                    and _controlled(arm_a, arm_b, claim.constrained)
                ):
                    bindings.append(ClaimBinding(claim, label_a, label_b))
    return bindings


PILOT = (3, 3)
"""Pre-training × fine-tuning seeds that measure both variance components, for a study that
ran one model per arm and so cannot plan anything from its own spread."""


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim tested on a study: our A − B with its CI, the verdict read from the CI, and for
    an unresolved claim the seeds that would resolve it (``plan``) in one line (``power``)."""

    binding: ClaimBinding
    difference: stats.Difference
    verdict: str
    plan: stats.SeedPlan | None
    power: str

    @property
    def caveat(self) -> str:
        return self.difference.caveat


def evaluate_claims(
    values: pl.DataFrame,
    arms: Mapping[str, Arm | tuple[str, Mapping[str, Any]]],
    aggregation: stats.Aggregation = stats.MEDIAN_OF_MODEL_MEANS,
    *,
    backbone: str | None = None,
    external_between: float | None = None,
    power: float = stats.POWER,
    finetune_cost: float = stats.FINETUNE_COST,
    **options: Any,
) -> list[ClaimVerdict]:
    """Each covered claim's verdict on one checkpoint's ``values`` (see ``stats.arm_grids``).

    ``external_between``: one arm's between-pre-training-seed variance measured elsewhere, for
    studies with one pre-training seed (see ``stats.between_pretrain_from_scores``).
    ``options`` go to ``stats.difference`` (resamples, seed, confidence, interval, nested).
    """
    grids = stats.arm_grids(values)
    verdicts = []
    for binding in covered_claims(arms, backbone=backbone):
        claim = binding.claim
        if binding.label_a not in grids or binding.label_b not in grids:
            continue
        a, b = grids[binding.label_a], grids[binding.label_b]
        diff = stats.difference(a, b, aggregation, **options)
        found = stats.verdict(claim.relation, diff.ci_low, diff.ci_high, claim.margin)
        plan, line = None, ""
        if found == stats.UNRESOLVED:
            plan, line = _power(claim, a, b, aggregation, external_between, power, finetune_cost)
        verdicts.append(ClaimVerdict(binding, diff, found, plan, line))
    return verdicts


def _power(
    claim: Claim,
    a: stats.ArmGrid,
    b: stats.ArmGrid,
    aggregation: stats.Aggregation,
    external_between: float | None,
    power: float,
    finetune_cost: float,
) -> tuple[stats.SeedPlan | None, str]:
    """The seeds that would resolve an unresolved claim, in one line. With one model per arm
    no variance was measured, so there is no plan to compute, and the line says so."""
    if min(a.units, b.units) < 2:
        return None, (
            "one model per arm, so no variance was measured and no seed plan can be computed; "
            f"a pilot with {PILOT[0]} pre-training × {PILOT[1]} fine-tuning seeds measures it"
        )
    components = stats.difference_components(a, b, external_between=external_between)
    factor = aggregation.variance_factor
    if claim.gap is None and components.zero:
        return None, (
            f"the difference did not vary at all over {a.n_pretrain} × {a.n_finetune} seeds "
            "(as when every model predicts one class), so its variance is unknown (not zero) "
            "and no detectable difference can be computed"
        )
    if claim.gap is None:
        smallest = stats.detectable_difference(
            components, a.n_pretrain, a.n_finetune, variance_factor=factor, power=power
        )
        text = (
            f"the paper's gap is {claim.gap_note}; these {a.n_pretrain} × {a.n_finetune} seeds"
            f" resolve a difference of {smallest:.2f} at {power:.0%} power"
        )
        if a.n_pretrain == 1:
            text += " (fine-tuning noise only: one pre-training seed)"
        return None, text
    plan = stats.seed_plan(
        components,
        claim.gap,
        claim.relation,
        margin=claim.margin,
        variance_factor=factor,
        power=power,
        finetune_cost=finetune_cost,
    )
    return plan, plan.describe()
