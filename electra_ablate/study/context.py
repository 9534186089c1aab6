"""A study spec resolved into units of work, with the data each needs.

Planning builds objectives on the ``meta`` device (shapes, no memory): a ``large`` study plans in
an instant, and a unit's real objective is built only when that unit trains.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.data.pretraining import PretrainingData, data_vocab, prepare_pretraining
from electra_ablate.evaluation.run import (
    EvaluationJob,
    plan_job,
    plan_reference_job,
    reference_run_id,
)
from electra_ablate.evaluation.task import Task, TaskSettings, family_of, get_task
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import StudyLayout
from electra_ablate.pretraining.engine.compiling import CUDA_GRAPHS
from electra_ablate.pretraining.engine.distributed import Distributed
from electra_ablate.pretraining.engine.plan import plan_run
from electra_ablate.pretraining.flops import training_flops
from electra_ablate.pretraining.objective import (
    Objective,
    build_objective,
    build_on_meta,
    init_output_biases,
)
from electra_ablate.study.spec import ObjectiveEntry, StudySpec, task_settings
from electra_ablate.study.units import (
    BASELINE_LABEL,
    IDENTITY_EXCLUDED,
    BaselineUnit,
    ReferenceUnit,
    RunUnit,
    Unit,
    config_hash,
    variant_label,
)


def resolve_device(requested: str) -> torch.device:
    if requested == "cuda" and not torch.cuda.is_available():
        raise InputError("device 'cuda' requested but CUDA is not available")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def refuse_cuda_graphs_off_cuda(spec: StudySpec, device: torch.device) -> None:
    """``pretrain.compile: reduce-overhead`` captures CUDA graphs: on another device it would
    fail (or silently do something else) mid-run, so a study that trains here is refused before
    any work. Called where training starts (``runner.run_study``, a launched job, the dry run's
    timing), never where a study is only opened: merging, reporting or checking a GPU node's
    results needs no GPU."""
    for variant, variant_spec in spec.variant_specs():
        if variant_spec.pretrain.compile == CUDA_GRAPHS and device.type != "cuda":
            where = f" (variant {variant})" if variant else ""
            raise InputError(
                f"pretrain.compile: {CUDA_GRAPHS}{where} captures CUDA graphs and needs a CUDA "
                f"device, but this study runs on {device.type}"
            )


@dataclass
class VariantData:
    """Tokenizer, packed sequences, token statistics and task data fingerprints of one data
    setting."""

    data: PretrainingData
    vocab: Vocab
    task_fingerprints: dict[str, str] = field(default_factory=dict)  # per task, for job ids

    @property
    def fingerprint(self) -> str:
        """The data fingerprint (``data.pretraining.data_fingerprint``: a hash of the tokenizer's
        files and every packed sequence), part of every run, baseline and reference id: a unit
        trained on other data is another unit, whichever cache or machine built the data."""
        return self.data.summary["fingerprint"]


class Study:
    def __init__(
        self,
        spec: StudySpec,
        spec_path: Path,
        out_dir: Path,
        device: str | None = None,
        overrides: dict[str, Any] | None = None,
        reuse: bool = True,
    ) -> None:
        self.spec, self.spec_path = spec, Path(spec_path)
        self.reuse = reuse  # copy identical finished work from study folders beside this one
        self.layout = StudyLayout(Path(out_dir))
        self.overrides = dict(overrides or {})
        requested = resolve_device(device or spec.device)
        self.dist = Distributed.from_env(requested)
        self.device = self.dist.device(requested)
        self._data: dict[str, VariantData] = {}

    # ------------------------------------------------------------------- planning
    def prepare(self, progress: bool = False) -> list[Unit]:
        """Every unit of the study, in spec order: per variant, each objective at each seed,
        then its no-pre-training baseline, then the reference scorers its tasks declare.
        Missing task data fails here, before any compute."""
        units: list[Unit] = []
        for variant, spec in self.spec.variant_specs():
            data = self.data(spec, progress)
            references: list[str] = []
            for block in spec.evaluation_blocks():
                for name in block.tasks:
                    task = get_task(name)
                    family_of(task).check(task, task_settings(spec, block, name))
                    references += [r for r in task.references if r not in references]
            budget = self.budget_flops(spec)
            for entry in spec.objectives:
                for seed in spec.pretrain.seeds:
                    units.append(self.run_unit(variant, spec, entry, seed, budget))
            if any(block.baseline for block in spec.evaluation_blocks()):
                units.append(self.baseline_unit(variant, spec, data))
            for reference in references:
                reference_id = reference_run_id(reference, data.fingerprint)
                layout = self.layout.reference(variant_label(reference, variant), reference_id)
                units.append(ReferenceUnit(variant, spec, reference, reference_id, layout))
        return units

    def run_unit(
        self, variant: str | None, spec: StudySpec, entry: ObjectiveEntry, seed: int, budget: float
    ) -> RunUnit:
        objective = self.build_on_meta(spec, entry)
        backbone = self.backbone(spec)
        plan = plan_run(
            objective,
            budget,
            spec.budget.convention,
            spec.pretrain.batch_size,
            backbone.max_seq_len,
            spec.budget.checkpoints,
        )
        config = {
            "objective": entry.name,
            "params": objective.params.model_dump(),
            "backbone": backbone.model_dump(),
            # an option left unset (None) stays out, so adding one never changes earlier ids
            "pretrain": spec.pretrain.model_dump(exclude=set(IDENTITY_EXCLUDED), exclude_none=True),
            "budget_flops": budget,
            "convention": spec.budget.convention,
            "checkpoints": sorted(spec.budget.checkpoints),
            "data": self.data(spec).fingerprint,
            "seed": seed,
        }
        run_id = config_hash(config)
        layout = self.layout.run(variant_label(entry.display, variant), seed, run_id)
        return RunUnit(variant, spec, entry, seed, plan, config, run_id, layout)

    def baseline_unit(
        self, variant: str | None, spec: StudySpec, data: VariantData
    ) -> BaselineUnit:
        config = {"baseline": self.backbone(spec).model_dump(), "data": data.fingerprint, "init": 0}
        baseline_id = config_hash(config)
        layout = self.layout.baseline(variant_label(BASELINE_LABEL, variant), baseline_id)
        return BaselineUnit(variant, spec, config, baseline_id, layout)

    def budget_flops(self, spec: StudySpec) -> float:
        budget = spec.budget
        if budget.flops is not None:
            return budget.flops
        label = budget.steps_of or spec.objectives[0].display
        entry = next(o for o in spec.objectives if o.display == label)
        return training_flops(
            self.build_on_meta(spec, entry),
            self.backbone(spec).max_seq_len,
            spec.pretrain.batch_size,
            budget.steps,
            budget.convention,
        )

    def task_fingerprint(self, spec: StudySpec, task: Task, settings: TaskSettings) -> str:
        """The task data's fingerprint, computed once per data setting."""
        known = self.data(spec).task_fingerprints
        if task.name not in known:
            known[task.name] = family_of(task).fingerprint(task, settings)
        return known[task.name]

    def jobs(self, unit: Unit, ready_only: bool = True) -> list[EvaluationJob]:
        """The unit's evaluations: per evaluation block, checkpoint, task and seed (a task with
        no seed once); ``ready_only`` leaves out checkpoints the unit has not reached (a run that
        failed before them). A finished unit has reached all of them, even where its kept encoder
        is missing: its evaluations on disk are never dropped."""
        if isinstance(unit, ReferenceUnit):
            return self.reference_jobs(unit)
        jobs = []
        for block in unit.spec.evaluation_blocks():
            for fraction in unit.fractions(block):
                kept_dir = unit.kept_dir(fraction)
                if ready_only and not (unit.done or (kept_dir / "kept.json").exists()):
                    continue
                for name in block.tasks:
                    task = get_task(name)
                    settings = task_settings(unit.spec, block, name)
                    fingerprint = self.task_fingerprint(unit.spec, task, settings)
                    for seed in block.seeds if task.seeded else block.seeds[:1]:
                        job = plan_job(
                            unit.run_id, fraction, kept_dir, task, seed, settings, fingerprint
                        )
                        jobs.append(job)
        return jobs

    def reference_jobs(self, unit: ReferenceUnit) -> list[EvaluationJob]:
        """The reference scored on every task that declares it, with that task's seeds."""
        data = self.data(unit.spec)
        jobs = []
        for block in unit.spec.evaluation_blocks():
            for name in block.tasks:
                task = get_task(name)
                if unit.reference not in task.references:
                    continue
                settings = task_settings(unit.spec, block, name)
                fingerprint = self.task_fingerprint(unit.spec, task, settings)
                for seed in block.seeds if task.seeded else block.seeds[:1]:
                    job = plan_reference_job(
                        unit.reference,
                        data.fingerprint,
                        task,
                        seed,
                        settings,
                        fingerprint,
                        data.data.tokenizer_dir,
                    )
                    jobs.append(job)
        return jobs

    # ------------------------------------------------------------------- building
    def build(self, unit: RunUnit) -> Objective:
        """The unit's objective, initialised (seeded) exactly as its run starts."""
        torch.manual_seed(unit.seed)
        spec = unit.spec
        objective = build_objective(
            unit.entry.name, self.backbone(spec), unit.entry.params, self.data(spec).vocab
        )
        init_output_biases(objective, spec.pretrain.prior_bias)
        return objective

    def build_on_meta(self, spec: StudySpec, entry: ObjectiveEntry) -> Objective:
        vocab = self.data(spec).vocab
        return build_on_meta(entry.name, self.backbone(spec), entry.params, vocab)

    def backbone(self, spec: StudySpec) -> BackboneConfig:
        return spec.backbone_config(vocab_size=self.data(spec).data.vocab_size)

    # ----------------------------------------------------------------------- data
    def data(self, spec: StudySpec, progress: bool = False) -> VariantData:
        """The spec's tokenizer and packed corpus (built once and cached on disk; under
        ``torchrun`` rank 0 builds while the others wait)."""
        seq_len = spec.backbone_config().max_seq_len
        key = json.dumps([spec.data.model_dump(mode="json"), seq_len], sort_keys=True)
        if key not in self._data:
            if not self.dist.is_main:
                self.dist.barrier()
            data = prepare_pretraining(
                spec.data, seq_len, spec_dir=spec.spec_dir, progress=progress
            )
            if self.dist.is_main:
                self.dist.barrier()
            self._data[key] = VariantData(data, data_vocab(data))
        return self._data[key]
