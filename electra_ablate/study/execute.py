"""Doing a unit of work: pre-train a run, make a baseline's fresh encoder, evaluate a job.

Each records its outcome in the study folder (``done.json`` / ``failed.json`` / a fine-tune
record) and returns it; a failure is recorded, never raised, so one bad run cannot lose the
rest of a study. Finished work is read back, not redone.
"""

from __future__ import annotations

import json
import shutil
import traceback
from collections.abc import Callable
from typing import Any

from electra_ablate.checkpoints.kept_files import kept_problem
from electra_ablate.evaluation.run import EvaluationJob, run_job
from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.progress import ProgressMode
from electra_ablate.infra.storage import atomic_dir, atomic_write_text
from electra_ablate.pretraining.engine.trainer import Trainer
from electra_ablate.study.building import (
    pretrain_run,
    unfinished_jobs,
    write_baseline_kept,
    write_run_json,
)
from electra_ablate.study.context import Study
from electra_ablate.study.integrity import load_study_kept
from electra_ablate.study.records import FINETUNE_KEYS, read_record, record_problem, warn
from electra_ablate.study.tracked import open_tracking, track_unit
from electra_ablate.study.units import (
    BASELINE_FRACTION,
    BaselineUnit,
    ReferenceUnit,
    RunUnit,
    Unit,
)

Log = Callable[[str], None]


def pretrain(
    study: Study, unit: RunUnit, progress: bool | ProgressMode | None, retry_failed: bool = True
) -> dict[str, Any]:
    """Train (or resume) one run and return its summary.

    ``retry_failed=False`` returns a recorded failure as it is: the collecting pass after
    parallel workers must not train again what a worker just saw fail.
    """
    layout = unit.layout
    if unit.done and (done := read_record(layout.done)) is not None:  # a damaged one: redone
        return done
    if not retry_failed and (failed := read_record(layout.failed)) is not None:
        return failed
    layout.root.mkdir(parents=True, exist_ok=True)
    write_run_json(unit)
    layout.failed.unlink(missing_ok=True)
    dist = study.dist
    objective = study.build(unit)
    tracking = open_tracking(study, unit)  # connects when the first row is sent
    run = pretrain_run(study, unit, objective, layout, tracking=tracking)
    trainer = Trainer(objective, run, study.device, dist, progress)
    try:
        summary = {"status": "done", "message": "", **trainer.train()}
    except (AblateError, RuntimeError, ValueError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not isinstance(exc, AblateError):
            layout.error_log.write_text(traceback.format_exc())
        summary = {"status": "failed", "message": message, "steps": trainer.step}
        if dist.is_main:
            atomic_write_text(layout.failed, json.dumps(summary))
        return summary
    finally:
        if tracking is not None:
            tracking.close()
    if dist.is_main:
        atomic_write_text(layout.done, json.dumps(summary))
    return summary


def make_baseline(study: Study, unit: BaselineUnit) -> dict[str, Any]:
    """Save the variant's backbone, freshly initialised, as a checkpoint to fine-tune."""
    if not unit.done:
        write_baseline_kept(study, unit)
    return {"status": "done", "message": "", "steps": 0, "flops_paper": 0.0, "flops_standard": 0.0}


def run_unit(study: Study, unit: Unit, progress: bool | ProgressMode | None, **kw: Any) -> dict:
    if study.reuse:  # rank 0 alone copies; every rank then sees the same folder (a rank that
        if study.dist.is_main and not unit.done:  # saw the copy land would skip training
            reuse_identical(study, unit)  # while another waited in DDP for it)
        study.dist.barrier()
    if isinstance(unit, BaselineUnit):
        return make_baseline(study, unit)
    if isinstance(unit, ReferenceUnit):  # a scorer with no encoder: nothing to train
        return {"status": "done", "message": "", "steps": 0}
    return pretrain(study, unit, progress, **kw)


def reuse_identical(study: Study, unit: Unit) -> str | None:
    """Copy a finished unit with the same identity from a study folder beside this one and
    return that folder's name (None if there is none).

    A unit's id is a hash of everything that changes its result, so an identical finished
    run elsewhere is this run: copying it (without its resumable states) is a cache hit, not an
    approximation. Its ``done.json`` says where it came from. A source whose kept encoders do
    not verify (missing, or failing their checksums) is never copied: it is named and passed
    over, and the unit is trained here instead.
    """
    pattern = "pretrain/*-" if isinstance(unit, RunUnit) else "baseline/*-"
    own, parent = study.layout.root.resolve(), study.layout.root.parent
    if not parent.is_dir():  # the first study of a fresh `runs/`: nothing beside it
        return None
    for study_dir in sorted(p for p in parent.iterdir() if p.is_dir()):
        if study_dir.resolve() == own:
            continue
        for source in sorted(study_dir.glob(f"{pattern}{unit.run_id}")):
            found = RunLayout(source)
            finished = found.done if isinstance(unit, RunUnit) else found.kept(BASELINE_FRACTION)
            if not finished.exists():
                continue
            if (problem := reuse_problem(unit, found)) is not None:
                warn(f"not reusing {source}: {problem}")
                continue
            target = unit.layout.root
            with atomic_dir(target) as tmp:
                shutil.copytree(source, tmp, dirs_exist_ok=True, ignore=NOT_REUSED)
                if isinstance(unit, RunUnit):
                    done = json.loads((tmp / "done.json").read_text())
                    done |= {"message": f"identical run reused from {study_dir.name}"}
                    atomic_write_text(tmp / "done.json", json.dumps(done))
            return study_dir.name
    return None


NOT_REUSED = shutil.ignore_patterns(
    "states", "rebuild", "*.lock", "*.corrupt-*", "tracking.json"
)  # what the other study's trackers were sent is that study's


def reuse_problem(unit: Unit, source: RunLayout) -> str | None:
    """Why a finished unit in another study must not be copied, or None: a record that does not
    read, or a kept encoder that is missing or fails its checksum."""
    if isinstance(unit, RunUnit):
        _, problem = record_problem(source.done, ("status",))
        if problem is not None:
            return f"{source.done.name} is damaged ({problem})"
    fractions = [f for f, _ in unit.plan.checkpoints] if isinstance(unit, RunUnit) else [0.0]
    for fraction in fractions:
        if (problem := kept_problem(source.kept(fraction))) is not None:
            what = "missing" if problem == "missing" else f"corrupt ({problem})"
            return f"its kept encoder {source.kept(fraction)} is {what}"
    return None


def finetune(study: Study, unit: Unit, job: EvaluationJob) -> dict[str, Any]:
    """Evaluate one checkpoint on one task with one seed (or read back its record)."""
    path = study.layout.finetune_record(job.job_id)
    if not path.exists() and study.reuse:
        for other in sorted(study.layout.root.parent.glob(f"*/finetune/{job.job_id}.json")):
            record, _ = record_problem(other, FINETUNE_KEYS)  # a damaged one is not reused
            if record and record["status"] == "done":  # same id: same checkpoint, task, seed
                atomic_write_text(path, json.dumps(record, indent=1))
                break
    if (record := read_record(path, FINETUNE_KEYS)) is not None:  # a damaged one: redone
        return record
    kept = None if job.reference is not None else load_study_kept(study, unit, job.fraction)
    record = run_job(job, study.device, kept=kept)
    atomic_write_text(path, json.dumps(record, indent=1))
    return record


def finetune_unit(study: Study, unit: Unit, log: Log = print) -> list[dict[str, Any]]:
    """Every fine-tune of one unit's checkpoints (finished ones are read back, not redone);
    then the spec's trackers get what of the unit they lack (``tracked.track_unit``): one
    tracker run opened per unit and batch of evaluations, not one per job."""
    jobs = study.jobs(unit)
    todo = len(unfinished_jobs(study, jobs))
    if todo:
        log(f"  fine-tune {unit.label}: {todo} of {len(jobs)} (checkpoint, task, seed) jobs")
    records = []
    for job in jobs:
        record = finetune(study, unit, job)
        if record["status"] == "failed":
            log(
                f"  fine-tune {job.task} seed {job.seed} at {job.fraction:g} FAILED: "
                f"{record['message']}"
            )
        records.append(record)
    track_unit(study, unit, records)
    return records


def all_finetuned(study: Study, unit: Unit) -> bool:
    return not unfinished_jobs(study, study.jobs(unit))
