"""The open study: its spec, folder, device and distribution, and what its units need to run.

A ``Study`` is cheap to make and prepares nothing: ``plan.plan_study`` is the one step that
prepares the data and plans the units. Given a planned unit, the study lists its evaluation jobs
(``jobs``) and builds its objective (``build``), from what the unit carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from electra_ablate.evaluation.run import EvaluationJob, plan_job, plan_reference_job
from electra_ablate.evaluation.task import get_task
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import StudyLayout
from electra_ablate.pretraining.engine.compiling import CUDA_GRAPHS
from electra_ablate.pretraining.engine.distributed import Distributed
from electra_ablate.pretraining.objective import Objective
from electra_ablate.pretraining.registry import build_objective, init_output_biases
from electra_ablate.spec import StudySpec, task_settings
from electra_ablate.study.schedule import Schedule, resolved_schedule
from electra_ablate.study.units import ReferenceUnit, RunUnit, Unit, prepared


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
    results needs no GPU. The same for a fine-tuning recipe's ``compile: reduce-overhead``,
    which ``finetune_task`` would refuse only once the study reached its first fine-tune."""
    if device.type == "cuda":
        return
    for variant, variant_spec in spec.variant_specs():
        where = f" (variant {variant})" if variant else ""
        keys = [("pretrain.compile", variant_spec.pretrain.compile)] + [
            (f"{key}.recipe.compile", block.recipe.compile)
            for key, block in (
                ("finetune", variant_spec.finetune),
                ("evaluation", variant_spec.evaluation),
            )
            if block is not None
        ]
        for key, value in keys:
            if value == CUDA_GRAPHS:
                raise InputError(
                    f"{key}: {CUDA_GRAPHS}{where} captures CUDA graphs and needs a CUDA "
                    f"device, but this study runs on {device.type}"
                )


class Study:
    """A study opened on this machine: the spec, its folder, the device and the ``torchrun``
    ranks it runs on. Planning it (``plan.plan_study``) is a separate, named step."""

    def __init__(
        self,
        spec: StudySpec,
        spec_path: Path,
        out_dir: Path,
        device: str | None = None,
        overrides: dict[str, Any] | None = None,
        reuse: bool = True,
        keep_code_changes: bool = False,
    ) -> None:
        self.spec, self.spec_path = spec, Path(spec_path)
        self.reuse = reuse  # copy identical finished work from study folders beside this one
        # finished work whose code changed since: kept and named, not redone
        # (``study.code_change``); what was kept, and how much records no code, for study.json
        self.keep_code_changes = keep_code_changes
        self.code_changes: list[dict[str, Any]] = []
        self.code_unrecorded = 0
        self.layout = StudyLayout(Path(out_dir))
        self.overrides = dict(overrides or {})
        requested = resolve_device(device or spec.device)
        self.dist = Distributed.from_env(requested)
        self.device = self.dist.device(requested)

    def schedule(self, workers: int) -> Schedule:
        """The order ``workers`` processes take this study's work in: the spec's ``schedule``,
        its ``auto`` resolved for this study's device and the GPUs visible here. One reading
        for the worker pool and the dry run's wall time alike."""
        block = self.spec.schedule
        visible = torch.cuda.device_count()
        return resolved_schedule(block.shape, block.beside, str(self.device), visible, workers)

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
                    fingerprint = prepared(unit).task_fingerprints[name]
                    for seed in block.seeds if task.seeded else block.seeds[:1]:
                        job = plan_job(
                            unit.run_id, fraction, kept_dir, task, seed, settings, fingerprint
                        )
                        jobs.append(job)
        return jobs

    def reference_jobs(self, unit: ReferenceUnit) -> list[EvaluationJob]:
        """The reference scored on every task that declares it, with that task's seeds."""
        jobs = []
        for block in unit.spec.evaluation_blocks():
            for name in block.tasks:
                task = get_task(name)
                if unit.reference not in task.references:
                    continue
                settings = task_settings(unit.spec, block, name)
                fingerprint = prepared(unit).task_fingerprints[name]
                for seed in block.seeds if task.seeded else block.seeds[:1]:
                    job = plan_reference_job(
                        unit.reference,
                        prepared(unit).fingerprint,
                        task,
                        seed,
                        settings,
                        fingerprint,
                        prepared(unit).data.tokenizer_dir,
                    )
                    jobs.append(job)
        return jobs

    # ------------------------------------------------------------------- building
    def build(self, unit: RunUnit) -> Objective:
        """The unit's objective, initialised (seeded) exactly as its run starts."""
        torch.manual_seed(unit.seed)
        spec = unit.spec
        objective = build_objective(
            unit.entry.name, unit.backbone, unit.entry.params, prepared(unit).vocab
        )
        init_output_biases(objective, spec.pretrain.prior_bias)
        return objective
