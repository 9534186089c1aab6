"""``ablate run``: a study spec becomes pre-training runs, fine-tuning jobs and tidy tables.

Read top to bottom: lock the study folder (one ``ablate run`` at a time); plan the study
(``study.plan.plan_study``: every variant's data prepared, every unit named); read back and
verify what is finished, repairing what is damaged (``integrity``); optionally share the units
out to worker processes; then one sequential pass trains (or reads back) every unit and
fine-tunes its checkpoints, which after workers only collects what they wrote; finally the
tables and ``study.json`` are rewritten, and a failed unit makes the study fail, by name.
With ``collect`` nothing is trained and nothing locked or moved: the tables are written from the
work finished so far, and unfinished runs are listed as pending (a look at a long study while it
runs, or the report of one that was cut short).

Two ways out of one machine change only which units this process does and where: ``shard``
keeps this machine's share of the units (``shards.py``) and writes the tables as ``collect``
does, so that shards sharing a folder each leave the tables of everything finished;
``launcher`` hands the units to ``submitit`` as cluster jobs (``launch.py``) that call the same
functions, then writes the tables from what the jobs left on disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.locks import FolderLock, lock_study
from electra_ablate.infra.progress import ProgressMode, progress_mode
from electra_ablate.infra.threads import torch_threads
from electra_ablate.pretraining.engine.compiling import use_compile_cache
from electra_ablate.pretraining.engine.state import resumable_step
from electra_ablate.scaleout.launch import LaunchOptions, StudySetup, launch_units
from electra_ablate.scaleout.shards import Shard, shard_units
from electra_ablate.scaleout.workers import run_in_workers
from electra_ablate.spec import StudySpec
from electra_ablate.study.code_change import settle_code_changes
from electra_ablate.study.context import Study, refuse_cuda_graphs_off_cuda
from electra_ablate.study.data_identity import check_study_data
from electra_ablate.study.execute import evaluate_unit, run_unit
from electra_ablate.study.integrity import check_study
from electra_ablate.study.plan import StudyPlan, plan_study
from electra_ablate.study.preflight import warn_before_run
from electra_ablate.study.provenance import write_plan, write_study_json
from electra_ablate.study.records import FINETUNE_KEYS, read_record, warn, warnings_to
from electra_ablate.study.reuse import reuse_identical
from electra_ablate.study.tables import write_tables  # polars: only for the tables
from electra_ablate.study.tracked import track_finished
from electra_ablate.study.units import RunUnit, Unit

PENDING_SUMMARY = {"status": "pending", "message": "not finished yet"}
"""What the runs table says of a unit with no outcome on disk yet."""


class UnitsFailed(AblateError):
    """Some units of a study failed (exit 1); the message names them."""


def run_study(
    spec: StudySpec,
    spec_path: Path,
    out_dir: Path,
    device: str | None = None,
    progress: bool | None = None,
    log: Callable[[str], None] = print,
    workers: int = 1,
    overrides: dict[str, Any] | None = None,
    reuse: bool = True,
    collect: bool = False,
    wait: bool = False,
    shard: Shard | None = None,
    launcher: LaunchOptions | None = None,
    keep_code_changes: bool = False,
) -> bool:
    """Run (or finish) the whole study; True if every unit of work succeeded. A failed unit
    raises ``UnitsFailed`` naming it, after the tables are written. ``wait``: if another
    ``ablate run`` holds the folder, wait for it instead of stopping. ``shard``: only this
    shard's units; ``launcher``: as cluster jobs instead of in this process;
    ``keep_code_changes``: finished work whose code changed since is kept and named, not redone
    (``electra_ablate.study.code_change``)."""
    with torch_threads(spec.pretrain.num_threads):  # the caller's count comes back after
        started = time.time()
        mode = progress_mode(progress)
        # a launching parent only plans (a login node may have no GPU): its jobs get `device`
        planning = "cpu" if launcher is not None and not collect else device
        study = Study(spec, spec_path, out_dir, planning, overrides, reuse, keep_code_changes)
        if not study.dist.is_main:
            log = lambda *a: None  # noqa: E731 - under torchrun, rank 0 speaks for all
        if collect:  # reads only: never blocked by, nor blocking, a study that runs
            plan = plan_study(study, progress=mode == "live")
            check_study_data(study, plan, record=False)
            settle_code_changes(study, plan.units, move=False)  # named, never moved: reads only
            return collect_finished(study, plan, started, log)
        if launcher is None:  # a launched job checks its own device (launch.StudySetup)
            refuse_cuda_graphs_off_cuda(spec, study.device)
            use_compile_cache()  # settled before the workers start (a collect compiles nothing)
        locks = hold_study(study, wait, shard)
        try:
            if launcher is not None:
                return run_launched(study, started, mode, log, launcher, shard, device)
            return run_locked(study, started, mode, log, workers, shard)
        finally:
            for lock in reversed(locks):
                lock.release()


def hold_study(study: Study, wait: bool, shard: Shard | None = None) -> list[FolderLock]:
    """The study folder's lock, for this process's whole run (rank 0 under torchrun; workers
    and cluster jobs never take it again). A shard holds it shared with the other shards and
    its own shard lock exclusively (``shards.py``)."""
    if not study.dist.is_main:
        return []
    root = study.layout.root
    if shard is None:
        return [lock_study(study.layout.lock, root, wait)]
    held = lock_study(study.layout.lock, root, wait, shared=True)
    try:
        mine = lock_study(study.layout.shard_lock(shard.index, shard.count), root, wait)
    except BaseException:
        held.release()
        raise
    return [held, mine]


def planned_units(
    study: Study, mode: ProgressMode, log: Callable[[str], None], shard: Shard | None
) -> tuple[StudyPlan, list[Unit]]:
    """The study planned (``plan_study``, before anything trains), its units checked and
    repaired (``integrity``), and those this process does: all of them, or its shard's."""
    plan = plan_study(study, progress=mode == "live")
    units = plan.units
    if shard is None:
        mine = units
    else:  # from the plan alone, so that every machine computes the same split
        mine = shard_units(units, shard, lambda u: len(study.jobs(u, ready_only=False)))
    if shard is not None:
        log(f"shard {shard}: {len(mine)} of the study's {len(units)} units")
    for note in plan.notes:  # a rounded budget, a warm-up beyond the run, task_epochs
        log(note)
    if study.dist.is_main:
        check_study_data(study, plan)
        write_plan(study, units)
        settle_code_changes(study, mine)  # before anything is repaired or built on
        check_study(study, mine, log)
        warn_before_run(study, mine)  # before compute: a task likely at its majority class
    return plan, mine


def run_launched(
    study: Study,
    started: float,
    mode: ProgressMode,
    log: Callable[[str], None],
    options: LaunchOptions,
    shard: Shard | None,
    device: str | None,
) -> bool:
    """The units as cluster jobs; then (unless ``--no-wait``) the tables, and the failures by
    unit with their jobs' logs."""
    plan, mine = planned_units(study, mode, log, shard)
    units = plan.units
    setup = StudySetup(
        study.spec,
        study.spec_path,
        study.layout.root,
        device,
        study.overrides,
        study.reuse,
    )
    launched = [(i, u) for i, u in enumerate(units) if any(u is m for m in mine)]
    failed = launch_units(study, launched, options, setup, mode, log)
    if not options.wait:
        log(
            f"not waiting: `ablate run {study.spec_path} --out {study.layout.root} --collect` "
            "writes the tables from the jobs finished so far"
        )
        return True
    for _, unit in launched:  # the jobs each evaluated part of a unit: its trackers get all here
        track_finished(study, unit)
    write_collected(study, plan, started, log)
    if failed:
        for line in failed:
            log(f"  FAILED: {line}")
        raise UnitsFailed(
            f"{len(failed)} job(s) of {study.layout.root} FAILED: {'; '.join(failed)} "
            "(the same command resubmits what is not finished)"
        )
    return True


def write_collected(
    study: Study, plan: StudyPlan, started: float, log: Callable[[str], None]
) -> bool:
    """The tables from everything finished in the folder, by one writer at a time (shards that
    share a folder finish at any moment; the last to write has seen every other's work)."""
    lock = FolderLock(study.layout.tables_lock)
    lock.acquire(wait=True)
    try:
        return collect_finished(study, plan, started, log)
    finally:
        lock.release()


def run_locked(
    study: Study,
    started: float,
    mode: ProgressMode,
    log: Callable[[str], None],
    workers: int,
    shard: Shard | None = None,
) -> bool:
    """Train every unit, fine-tune its checkpoints, write the tables.

    Under ``torchrun`` every rank pre-trains every unit together (DDP), but a fine-tune is one
    process's work: were rank 0 to fine-tune a run before the next one, the other ranks would
    wait for it in the next run's DDP constructor, past the process group's timeout (10 minutes
    under nccl) on any real task. So the ranks pre-train all units first, leave the process
    group together, and rank 0 alone fine-tunes afterwards, with nobody waiting on it. In one
    process each run is fine-tuned as soon as it is trained (its results come early).
    """
    plan, units = planned_units(study, mode, log, shard)
    study.dist.barrier()  # nothing trains before damaged records are set aside
    parallel = workers > 1 and study.dist.world_size == 1 and len(units) > 1
    if parallel:
        run_in_workers(study, units, workers, mode, log)
    elif study.dist.is_main:
        say_schedule_unused(study, log)
    ranks = study.dist.world_size > 1

    summaries, records = [], []
    for unit in units:
        if not parallel and isinstance(unit, RunUnit):
            steps = f"{unit.plan.total_steps} steps"
            state = "finished earlier" if unit.done else "running"
            unfinished = study.dist.is_main and not unit.done  # rank 0 speaks for all
            if unfinished and (resumed := resumable_step(unit.layout.states)) is not None:
                state = f"resuming from step {resumed}"
            reusing = study.reuse and unfinished
            if reusing and (source := reuse_identical(study, unit)):
                state = f"identical run reused from {source}"
            log(f"pre-train {unit.label} (seed {unit.seed}, {steps}): {state}")
        with warnings_to(unit.layout.warnings_log, "pre-training"):
            summary = run_unit(study, unit, mode, **({"retry_failed": False} if parallel else {}))
        if summary["status"] == "failed" and not parallel:
            log(f"  FAILED: {summary['message']}")
        if summary.get("diverged") and study.dist.is_main:
            warn(divergence_line(unit, summary["diverged"]))
        summaries.append((unit, summary))
        if not ranks and summary["status"] == "done":
            records += evaluate_done(study, unit, log)
    study.dist.close()  # every rank has finished pre-training; the rest is rank 0's alone
    if not study.dist.is_main:
        return raise_failed(study, failed_units(summaries, []))
    if ranks:
        for unit, summary in summaries:
            if summary["status"] == "done":
                records += evaluate_done(study, unit, log)
    failed = failed_units(summaries, records)
    if shard is not None:
        write_collected(study, plan, started, log)
    else:
        say_dropped(study, write_tables(study, summaries, records), log)
        finished = time.time()
        write_study_json(study, plan, started, finished)
        log(
            f"results in {study.layout.results} ({finished - started:.0f} s)"
            + ("" if not failed else "; some work FAILED (see runs.parquet)")
        )
    return raise_failed(study, failed)


def say_schedule_unused(study: Study, log: Callable[[str], None]) -> None:
    """One line where the spec sets a ``schedule`` that one process cannot follow: it orders
    work between worker processes, and alone (one worker, or ``torchrun``'s ranks together)
    each run is trained and then evaluated in turn."""
    block = study.spec.schedule
    if block.shape == "one_card" or block.beside:
        log(
            f"note: schedule (shape: {block.shape}, beside: {block.beside}) orders the work "
            "of several worker processes; this run has one, which trains each run and then "
            "evaluates it in turn (--workers N to share the work out)"
        )


def say_dropped(study: Study, tasks: list[str], log: Callable[[str], None]) -> None:
    """One line naming the tasks that ``results.parquet`` lists no more (``write_tables``)."""
    if not tasks:
        return
    names = ", ".join(tasks)
    log(
        f"note: {study.layout.results.name} no longer lists {names} (not among this spec's "
        f"tasks); their finished evaluations stay in {study.layout.finetune_dir} and come back "
        "into the tables when the spec lists them again with the same settings"
    )


def evaluate_done(study: Study, unit: Unit, log: Callable[[str], None]) -> list[tuple[Unit, dict]]:
    """The fine-tunes of a unit that finished pre-training, paired with it."""
    with warnings_to(unit.layout.warnings_log, "fine-tuning"):
        return [(unit, r) for r in evaluate_unit(study, unit, log)]


def raise_failed(study: Study, failed: list[str]) -> bool:
    """True, or ``UnitsFailed`` naming each failed unit."""
    if failed:
        raise UnitsFailed(
            f"{len(failed)} unit(s) of {study.layout.root} FAILED: {'; '.join(failed)} "
            "(the tables list them; the same command retries failed runs)"
        )
    return True


def failed_units(summaries: list[tuple[Unit, dict]], records: list[tuple[Unit, dict]]) -> list:
    """Each failed run and fine-tune, by name, with the first words of its message."""

    def short(message: str) -> str:
        return message if len(message) <= 80 else message[:77] + "..."

    names = [
        f"{unit.label} (seed {unit.seed}): {short(str(s.get('message', '')))}"
        for unit, s in summaries
        if s["status"] == "failed"
    ]
    names += [
        f"fine-tune {r.get('task')} seed {r.get('seed')} at {r.get('fraction')} of {unit.label}: "
        + short(str(r.get("message", "")))
        for unit, r in records
        if r["status"] == "failed"
    ]
    return names


def divergence_line(unit: Unit, diverged: dict) -> str:
    start = diverged.get("start_loss")
    versus = f", {diverged['loss'] / start:.0f}x its first step's {start:.3g}" if start else ""
    return (
        f"{unit.label} (seed {unit.seed}) diverged: training loss {diverged['loss']:.4g} at step "
        f"{diverged['step']}{versus}; it is kept, and marked diverged in runs.parquet and the "
        "report (a lower pretrain.learning_rate?)"
    )


def collect_finished(
    study: Study, plan: StudyPlan, started: float, log: Callable[[str], None]
) -> bool:
    """Tables from finished units and their finished evaluations only; True if nothing is
    pending."""
    summaries, records = [], []
    for unit in plan.units:  # damaged records are named and left in place: this only reads
        done = unit.done and (  # a baseline or a reference has no done.json: nothing trains
            not isinstance(unit, RunUnit)
            or read_record(unit.layout.done, set_aside=False) is not None
        )
        if not done:
            failed = isinstance(unit, RunUnit) and read_record(unit.layout.failed, set_aside=False)
            summaries.append((unit, failed or dict(PENDING_SUMMARY)))
            continue
        summaries.append((unit, run_unit(study, unit, "off")))
        for job in study.jobs(unit):
            path = study.layout.finetune_record(job.job_id)
            if (record := read_record(path, FINETUNE_KEYS, set_aside=False)) is not None:
                records.append((unit, record))
    say_dropped(study, write_tables(study, summaries, records), log)
    write_study_json(study, plan, started, time.time())
    pending = sum(s["status"] == "pending" for _, s in summaries)
    log(
        f"results of {len(summaries) - pending} finished unit(s) in {study.layout.results}"
        + (f"; {pending} pending" if pending else "")
    )
    return pending == 0
