"""The study planned: every variant's data prepared and every unit named, before anything trains.

``plan_study`` is the one heavy step of opening a study. It trains the tokenizer and packs the
corpus of each data setting (or reads them from the cache), checks and fingerprints each task's
data, and resolves the spec into units that carry their data and backbone. Everything after it
(execution, integrity, tables, estimates, workers, launch, merge) takes the plan or a unit and
never prepares data. Objectives are built on the ``meta`` device here (shapes, no memory): a
``large`` study plans in an instant, and a unit's real objective is built only when it trains.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from electra_ablate.data.pretraining import data_vocab, prepare_pretraining
from electra_ablate.evaluation.run import reference_run_id
from electra_ablate.evaluation.task import family_of, get_task
from electra_ablate.infra.errors import SpecError
from electra_ablate.pretraining.engine.optim import per_run_shapes, warmup_beyond_run
from electra_ablate.pretraining.engine.plan import budget_rounding, plan_run
from electra_ablate.pretraining.flops import training_flops
from electra_ablate.pretraining.objective import Objective
from electra_ablate.pretraining.registry import build_on_meta
from electra_ablate.spec import ObjectiveEntry, StudySpec, task_settings
from electra_ablate.study.context import Study
from electra_ablate.study.units import (
    BASELINE_LABEL,
    IDENTITY_EXCLUDED,
    BaselineUnit,
    ReferenceUnit,
    RunUnit,
    Unit,
    VariantData,
    config_hash,
    variant_label,
)


@dataclass(frozen=True)
class StudyPlan:
    """Every unit of the study, in spec order, and the data of each variant (``None`` is the
    base spec), as ``plan_study`` made them."""

    units: list[Unit]
    variants: list[tuple[str | None, StudySpec, VariantData]]

    @property
    def base(self) -> VariantData:
        """The base spec's data (the first variant's): what ``study.json`` describes."""
        return self.variants[0][2]

    @property
    def notes(self) -> list[str]:
        """What the plan does that the spec's settings alone do not show, one line each (the
        dry run prints them, a run warns them): a budget rounded far from whole steps, a
        warm-up longer than a run (``pretrain.warmup_beyond_run``), an absolute warm-up that
        gives the objectives different schedule shapes (``optim.per_run_shapes``),
        ``task_epochs`` overriding ``epochs``."""
        lines: list[str] = []
        for variant, spec, _ in self.variants:
            lines += [variant_note(variant, line) for line in spec.plan_notes()]
            runs = {
                unit.label: unit.plan
                for unit in self.units
                if isinstance(unit, RunUnit) and unit.variant == variant
            }
            if (shapes := per_run_shapes(list(runs.items()), spec.pretrain)) is not None:
                lines.append(variant_note(variant, shapes))
        for unit in self.units:
            if not isinstance(unit, RunUnit):
                continue
            label = variant_label(unit.label, unit.variant)
            rounded = budget_rounding(
                unit.plan, unit.config["budget_flops"], unit.config["convention"]
            )
            if rounded is not None:
                lines.append(f"{label}: {rounded}")
            pretrain = unit.spec.pretrain
            stages = len(unit.plan.stage_steps)
            for short in warmup_beyond_run(unit.plan, pretrain):
                lines.append(f"{label}: {short.describe(pretrain, stages)} (warmup_beyond_run)")
        return list(dict.fromkeys(lines))  # seeds of one objective plan alike


def variant_note(variant: str | None, line: str) -> str:
    return line if variant is None else f"variant {variant}: {line}"


def plan_study(study: Study, progress: bool = False) -> StudyPlan:
    """The study's data prepared and its units planned: per variant, each objective at each
    seed, then its no-pre-training baseline, then the reference scorers its tasks declare.
    Missing or malformed task data fails here, before any compute. Under ``torchrun`` rank 0
    prepares the data while the other ranks wait, then they read it from the cache."""
    dist = study.dist
    if not dist.is_main:
        dist.barrier()
    prepared: dict[str, VariantData] = {}
    variants = [
        (variant, spec, prepare_variant(spec, prepared, progress))
        for variant, spec in study.spec.variant_specs()
    ]
    if dist.is_main:
        dist.barrier()
    units: list[Unit] = []
    for variant, spec, data in variants:
        units += plan_variant(study, variant, spec, data)
    return StudyPlan(units, variants)


def prepare_variant(
    spec: StudySpec, prepared: dict[str, VariantData], progress: bool
) -> VariantData:
    """The spec's tokenizer and packed corpus (built once, cached on disk; variants with the
    same data settings share them and their task fingerprints), the fingerprints of its tasks'
    data, and the variant's own backbone sized to the vocabulary (a variant may change the
    backbone and keep the data)."""
    seq_len = spec.backbone_config().max_seq_len
    key = json.dumps([spec.data.model_dump(mode="json"), seq_len], sort_keys=True)
    if key not in prepared:
        data = prepare_pretraining(spec.data, seq_len, spec_dir=spec.spec_dir, progress=progress)
        backbone = spec.backbone_config(vocab_size=data.vocab_size)
        prepared[key] = VariantData(data, data_vocab(data), backbone)
    shared = prepared[key]
    for block in spec.evaluation_blocks():
        for name in block.tasks:
            task = get_task(name)
            settings = task_settings(spec, block, name)
            family_of(task).check(task, settings)
            if name not in shared.task_fingerprints:  # once per data setting
                shared.task_fingerprints[name] = family_of(task).fingerprint(task, settings)
    backbone = spec.backbone_config(vocab_size=shared.data.vocab_size)
    return replace(shared, backbone=backbone)  # the data, vocab and fingerprints are shared


def plan_variant(
    study: Study, variant: str | None, spec: StudySpec, data: VariantData
) -> list[Unit]:
    """One variant's units: its runs, its baseline, its references."""
    units: list[Unit] = []
    budget = budget_flops(spec, data)
    for entry in spec.objectives:
        for seed in spec.pretrain.seeds:
            units.append(run_unit(study, variant, spec, entry, seed, budget, data))
    if any(block.baseline for block in spec.evaluation_blocks()):
        units.append(baseline_unit(study, variant, spec, data))
    references: list[str] = []
    for block in spec.evaluation_blocks():
        for name in block.tasks:
            references += [r for r in get_task(name).references if r not in references]
    for reference in references:
        reference_id = reference_run_id(reference, data.fingerprint)
        layout = study.layout.reference(variant_label(reference, variant), reference_id)
        units.append(ReferenceUnit(variant, spec, reference, reference_id, layout, data))
    return units


def run_unit(
    study: Study,
    variant: str | None,
    spec: StudySpec,
    entry: ObjectiveEntry,
    seed: int,
    budget: float,
    data: VariantData,
) -> RunUnit:
    """One pre-training run, named by a hash of everything that changes its result. A warm-up
    longer than the run is refused here, before anything trains, unless the spec allows it."""
    objective = objective_on_meta(entry, data)
    plan = plan_run(
        objective,
        budget,
        spec.budget.convention,
        spec.pretrain.batch_size,
        data.backbone.max_seq_len,
        spec.budget.checkpoints,
    )
    short = warmup_beyond_run(plan, spec.pretrain)
    if short and not spec.pretrain.warmup_beyond_run:
        where = variant_note(variant, f"`{entry.display}`")
        raise SpecError(
            f"{where}: pretrain.warmup_steps is longer than the run "
            f"({short[0].describe(spec.pretrain, len(plan.stage_steps))}); set "
            "pretrain.warmup_beyond_run: true if the run is meant as the first steps of a "
            "longer schedule, or shorten pretrain.warmup_steps"
        )
    config = {
        "objective": entry.name,
        "params": objective.params.model_dump(),
        "backbone": data.backbone.model_dump(),
        # an option left unset (None) stays out, so adding one never changes earlier ids
        "pretrain": spec.pretrain.model_dump(exclude=set(IDENTITY_EXCLUDED), exclude_none=True),
        "budget_flops": budget,
        "convention": spec.budget.convention,
        "checkpoints": sorted(spec.budget.checkpoints),
        "data": data.fingerprint,
        "seed": seed,
    }
    run_id = config_hash(config)
    layout = study.layout.run(variant_label(entry.display, variant), seed, run_id)
    return RunUnit(variant, spec, entry, seed, plan, config, run_id, layout, data)


def baseline_unit(
    study: Study, variant: str | None, spec: StudySpec, data: VariantData
) -> BaselineUnit:
    config = {"baseline": data.backbone.model_dump(), "data": data.fingerprint, "init": 0}
    baseline_id = config_hash(config)
    layout = study.layout.baseline(variant_label(BASELINE_LABEL, variant), baseline_id)
    return BaselineUnit(variant, spec, config, baseline_id, layout, data)


def budget_flops(spec: StudySpec, data: VariantData) -> float:
    """The spec's budget in FLOPs: given, or ``budget.steps`` of the objective it names."""
    budget = spec.budget
    if budget.flops is not None:
        return budget.flops
    label = budget.steps_of or spec.objectives[0].display
    entry = next(o for o in spec.objectives if o.display == label)
    return training_flops(
        objective_on_meta(entry, data),
        data.backbone.max_seq_len,
        spec.pretrain.batch_size,
        budget.steps,
        budget.convention,
    )


def objective_on_meta(entry: ObjectiveEntry, data: VariantData) -> Objective:
    """The entry's objective with shapes and no memory: enough to plan and count FLOPs."""
    return build_on_meta(entry.name, data.backbone, entry.params, data.vocab)
