"""Doing a unit of work: pre-train a run, make a baseline's fresh encoder, evaluate a job.

Each records its outcome in the study folder (``done.json`` / ``failed.json`` / a fine-tune
record) and returns it; a failure is recorded, never raised, so one bad run cannot lose the
rest of a study. Finished work is read back, not redone.

Work done here, not read back or copied, is also logged in the study's ``schedule.jsonl``
(``StudyLayout.schedule_log``): a ``start`` line when a pre-training or an evaluation begins, an
``end`` line with its status when it ends, by the process that does it, whether that is
``ablate run`` itself or one of its workers (``electra_ablate.scaleout.workers``). A start with
no end is work cut short. Each line is one ``write`` to a file opened for appending, so the
lines of processes writing at once never mix. A pre-training that trained through a device gate
(workers sharing one card) says on its ``end`` line when it held the gate (``GATE_KEYS``): its
line's start to ``trained_from`` is its compiling and waiting.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

from electra_ablate.evaluation.run import EvaluationJob, run_job
from electra_ablate.evaluation.task import get_task
from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.progress import ProgressMode
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.pretraining.engine.trainer import Trainer
from electra_ablate.study.building import (
    pretrain_run,
    unfinished_jobs,
    write_baseline_kept,
    write_run_json,
)
from electra_ablate.study.code_change import job_code, write_unit_code
from electra_ablate.study.context import Study
from electra_ablate.study.integrity import load_study_kept
from electra_ablate.study.records import FINETUNE_KEYS, read_record, warn
from electra_ablate.study.reuse import finished_record, reuse_identical
from electra_ablate.study.tracked import open_tracking, track_unit
from electra_ablate.study.units import (
    BaselineUnit,
    ReferenceUnit,
    RunUnit,
    Unit,
)

Log = Callable[[str], None]

GATE_KEYS = ("gate_wait_s", "trained_from", "trained_until")
"""What a run's summary says of the device gate it trained through (``trainer.gated``), carried
to its ``end`` line: [trained_from, trained_until] is its training on the card."""


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
    write_unit_code(unit)  # beside the id, which names no code (``study.code_change``)
    layout.failed.unlink(missing_ok=True)
    dist = study.dist
    event = unit_event(unit)
    if dist.is_main:  # every rank trains the run; one speaks for them
        log_event(study, "start", event)
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
            log_event(study, "end", event, status="failed", steps=trainer.step)
        return summary
    finally:
        if tracking is not None:
            tracking.close()
    if dist.is_main:
        atomic_write_text(layout.done, json.dumps(summary))
        ran = {"compile_s": summary.get("first_step_s"), "steps": summary.get("steps")}
        gate = {k: summary[k] for k in GATE_KEYS if k in summary}  # trained through the gate
        log_event(study, "end", event, status="done", **ran, **gate)
    return summary


def make_baseline(study: Study, unit: BaselineUnit) -> dict[str, Any]:
    """Save the variant's backbone, freshly initialised, as a checkpoint to fine-tune."""
    if not unit.done:
        write_unit_code(unit)
        write_baseline_kept(unit)
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


def evaluate(study: Study, unit: Unit, job: EvaluationJob) -> dict[str, Any]:
    """Evaluate one checkpoint on one task with one seed (or read back its record)."""
    path = study.layout.finetune_record(job.job_id)
    code = job_code(unit, job)  # beside the id: a record beside made by other code is not this
    if not path.exists() and study.reuse and (record := finished_record(study, job.job_id, code)):
        atomic_write_text(path, json.dumps(record, indent=1))  # same id: same evaluation
    if (record := read_record(path, FINETUNE_KEYS)) is not None:  # a damaged one: redone
        return record
    event = job_event(unit, job)
    log_event(study, "start", event)
    try:
        kept = None if job.reference is not None else load_study_kept(study, unit, job.fraction)
        record = run_job(job, study.device, kept=kept) | {"code": code}
        atomic_write_text(path, json.dumps(record, indent=1))
    except Exception:  # not an interruption: that leaves a start with no end, work cut short
        log_event(study, "end", event, status="failed")
        raise
    log_event(study, "end", event, status=record["status"])
    return record


def unit_event(unit: Unit) -> dict[str, Any]:
    """What a ``schedule.jsonl`` line says of a unit's pre-training."""
    return {
        "kind": "pretrain",
        "label": unit.label,
        "seed": unit.seed if isinstance(unit, RunUnit) else None,
        "run_id": unit.run_id,
        "job_id": None,
        "task": None,
        "fraction": None,
        "finetune_seed": None,
    }


def job_event(unit: Unit, job: EvaluationJob) -> dict[str, Any]:
    """What a ``schedule.jsonl`` line says of an evaluation: its kind is its task's
    (``Task.schedule_kind``)."""
    return unit_event(unit) | {
        "kind": get_task(job.task).schedule_kind,
        "run_id": job.run_id,
        "job_id": job.job_id,
        "task": job.task,
        "fraction": job.fraction,
        "finetune_seed": job.seed,
    }


def log_event(study: Study, event: str, what: dict[str, Any], **end: Any) -> None:
    """Append one line to the study's ``schedule.jsonl`` (the module docstring): the event, the
    time and this process, ``what`` (``unit_event``, ``job_event``) and, on an ``end``, its
    status and what else is known (``compile_s``, ``steps``, ``GATE_KEYS``). A log that cannot
    be written costs the timeline a line (said on stderr), never the work its result."""
    line = {"event": event, "t": time.time(), "pid": os.getpid(), **what, **end}
    data = (json.dumps(line) + "\n").encode()
    try:
        study.layout.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(study.layout.schedule_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        warn(f"{study.layout.schedule_log}: {event} of {what['label']} not logged ({exc})")


def evaluate_unit(study: Study, unit: Unit, log: Log = print) -> list[dict[str, Any]]:
    """Every evaluation of one unit's checkpoints (finished ones are read back, not redone);
    then the spec's trackers get what of the unit they lack (``tracked.track_unit``): one
    tracker run opened per unit and batch of evaluations, not one per job."""
    jobs = study.jobs(unit)
    todo = len(unfinished_jobs(study, jobs))
    if todo:
        log(f"  fine-tune {unit.label}: {todo} of {len(jobs)} (checkpoint, task, seed) jobs")
    records = []
    for job in jobs:
        record = evaluate(study, unit, job)
        if record["status"] == "failed":
            log(
                f"  fine-tune {job.task} seed {job.seed} at {job.fraction:g} FAILED: "
                f"{record['message']}"
            )
        records.append(record)
    track_unit(study, unit, records)
    return records


def all_evaluated(study: Study, unit: Unit) -> bool:
    return not unfinished_jobs(study, study.jobs(unit))
