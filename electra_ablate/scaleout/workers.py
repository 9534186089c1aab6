"""Sharing a study's units out to worker processes, with one progress line for the whole study.

A small model does not keep two cores busy from one process, so on 2 cores two single-threaded
workers finish a study sooner than one process with two threads (``bench/study_workers.py``).
Each worker prepares the same study (cache hits) and takes work as processes free up. Every
pre-training run is an item, and so is every evaluation (checkpoint, task, seed), ready when
its run finishes: evaluations are separate items so that the last run's are shared by every
worker instead of making one wait for another. Which ready item starts next is the spec's
``schedule`` (``electra_ablate.study.schedule``, the rule the GPU session's replay follows
too): the ``pool`` takes runs first, most expensive first, then evaluations as they become
ready; ``one_card`` (workers sharing one GPU) trains one run at a time and starts evaluations
after the last, longest first (``Task.relative_cost``). On one card the next run starts while
one trains (``Schedule.compile_ahead``) and compiles, then waits at the study's device gate
(``StudyLayout.device_gate``, set for every worker: ``electra_ablate.infra.device_gate``) until
the card is free. The parent hands the pool at most one item per idle worker (``WorkQueue``),
so the executor's own queue never reorders anything. The parent otherwise only watches: it
reads the runs' logs to show runs, FLOPs and fine-tunes done, and an ETA; each item's start and
end go to the study's ``schedule.jsonl``, written by the worker that does it
(``electra_ablate.study.execute``).

A worker that dies (killed, out of memory, a crash in native code) breaks the pool; the parent
starts a new pool with as many workers and hands it the items that were in flight: a run resumes
from its newest state, a fine-tune starts again. Each worker notes which item it starts in a
file named by its PID (a file, not a queue: a worker killed while writing to a shared queue
would leave its lock held), so the item whose worker died is known; an item that kills its
worker ``MAX_DEATHS`` times is recorded as failed rather than tried forever. The parent ends
its workers whenever it stops (Ctrl-C, SIGTERM, an error): none is left behind writing into the
study, and every worker also asks Linux to end it when the parent ends.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from electra_ablate.evaluation.run import EvaluationJob
from electra_ablate.evaluation.task import get_task
from electra_ablate.infra import device_gate
from electra_ablate.infra.progress import ProgressMode, format_duration
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.spec import StudySpec
from electra_ablate.study.building import unfinished_jobs
from electra_ablate.study.context import Study
from electra_ablate.study.execute import all_evaluated, evaluate, run_unit
from electra_ablate.study.plan import plan_study
from electra_ablate.study.records import warnings_to
from electra_ablate.study.schedule import Job, Schedule
from electra_ablate.study.units import RunUnit, Unit

Log = Callable[[str], None]

MAX_DEATHS = 2  # an item whose worker died this many times is recorded as failed

# An item of work: ("run", unit index) or ("job", unit index, fine-tune job id).
Item = tuple

# One Study per worker process, prepared once and reused for every item it takes, and the
# folder where it notes which item it starts.
_worker: tuple[Study, list[Unit]] | None = None
_started: Path | None = None


def _init_worker(
    spec: StudySpec,
    spec_path: Path,
    out_dir: Path,
    device: str,
    threads: int,
    overrides: dict,
    reuse: bool,
    started: Path,
    gate: Path | None,
    slots: Any,
) -> None:
    global _worker, _started
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _no_process_shared_locks()
    _started = started
    if gate is not None:  # the schedule starts pre-trainings ahead: they train one at a time
        os.environ[device_gate.ENV] = str(gate)
    torch.set_num_threads(threads)
    study = Study(spec, spec_path, out_dir, claim_device(device, slots), overrides, reuse)
    _worker = (study, plan_study(study).units)  # the data is in the cache the parent filled


def claim_device(device: str, slots: Any) -> str:
    """The device of the next worker of a pool: it takes the pool's next number (``slots``, a
    counter the pool's workers share) and, on several GPUs, the GPU of that number."""
    with slots.get_lock():  # this worker's number in its pool: 0, 1, ...
        slot, slots.value = slots.value, slots.value + 1
    return worker_device(device, slot)


def _no_process_shared_locks() -> None:
    """tqdm (through ``datasets``) makes a cross-process semaphore for its bars in each process
    that shows one; a worker that is killed cannot release it, and the resource tracker then
    warns about it on the terminal. A worker shares no bar with another process: a thread lock
    does."""
    import threading

    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def worker_device(device: str, slot: int) -> str:
    """The device of a pool's worker number ``slot``: the visible GPUs in turn when the study
    runs on ``cuda`` (each worker on its own GPU while there are enough), else ``device``
    itself (the CPU, or a GPU named by its index)."""
    if device == "cuda" and torch.cuda.device_count() > 1:
        return f"cuda:{slot % torch.cuda.device_count()}"
    return device


def _die_with_parent() -> None:
    """Ask Linux to end this worker when the ``ablate run`` that started it ends, however it
    ends: an orphan would go on writing into runs that a restarted study is resuming."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _start() -> None:
    """Nothing, submitted once per worker as a pool starts. A pool starts a process only when
    an item finds none idle, and the schedule hands out one item per idle worker: on one card
    a single pre-training would start a single process, and the others would start (import
    torch, prepare the study) only when the evaluations come, each one late. These make every
    worker start at once, and be ready while the first pre-training trains."""


def _pretrain(index: int) -> tuple[int, dict[str, Any]]:
    study, units = _worker
    note_start(("run", index))
    with warnings_to(units[index].layout.warnings_log, "pre-training"):
        return index, run_unit(study, units[index], progress=False)


def note_start(item: Item) -> None:
    (_started / str(os.getpid())).write_text(json.dumps(item))


def _evaluate(index: int, job_id: str) -> dict[str, Any]:
    study, units = _worker
    note_start(("job", index, job_id))
    (job,) = [j for j in study.jobs(units[index]) if j.job_id == job_id]
    with warnings_to(units[index].layout.warnings_log, "fine-tuning"):
        return evaluate(study, units[index], job)


def run_in_workers(
    study: Study, units: list[Unit], workers: int, progress: ProgressMode, log: Log = print
) -> None:
    import multiprocessing
    import shutil
    import tempfile
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    total_threads = study.spec.pretrain.num_threads or torch.get_num_threads()
    threads = max(1, total_threads // workers)
    todo = [i for i, u in enumerate(units) if not (u.done and all_evaluated(study, u))]
    todo.sort(key=lambda i: -unit_cost(units[i]))
    if not todo:
        return
    schedule = study.schedule(workers)
    unused = study.spec.schedule.beside if schedule.shape == "pool" else 0
    log(
        f"{len(todo)} units of work on {workers} workers x {threads} threads; "
        f"schedule {schedule.describe()}"
        + (f" (schedule.beside: {unused} unused: not one card)" if unused else "")
    )
    context = multiprocessing.get_context("spawn")
    started_notes = Path(tempfile.mkdtemp(prefix="ablate-workers-"))
    args = (
        study.spec,
        study.spec_path,
        study.layout.root,
        str(study.device),
        threads,
        study.overrides,
        study.reuse,
        started_notes,
        study.layout.device_gate if schedule.compile_ahead else None,
    )
    watcher = StudyWatcher(study, units, progress)

    def new_pool() -> ProcessPoolExecutor:
        """``workers`` processes, numbered from 0 as they start (``worker_device``), all
        started now (``_start``)."""
        slots = context.Value("i", 0)
        pool = ProcessPoolExecutor(
            workers, mp_context=context, initializer=_init_worker, initargs=(*args, slots)
        )
        for _ in range(workers):
            pool.submit(_start)
        return pool

    pool = new_pool()
    futures: dict[Any, Item] = {}
    deaths: dict[Item, int] = {}
    breaks_before_any_start = 0
    queue = WorkQueue(schedule, workers)

    def submit(item: Item) -> None:
        if item[0] == "run":
            futures[pool.submit(_pretrain, item[1])] = item
        else:
            futures[pool.submit(_evaluate, item[1], item[2])] = item

    def evaluations(index: int) -> list[tuple[Item, Job]]:
        jobs = unfinished_jobs(study, study.jobs(units[index]))
        return [(("job", index, job.job_id), evaluation_job(units[index], job)) for job in jobs]

    finished_normally = False
    try:
        runs = [i for i in todo if not units[i].done]
        if schedule.shape == "one_card":  # a baseline or reference is made at once: first
            runs.sort(key=lambda i: isinstance(units[i], RunUnit))
        queue.ready([(("run", i), pretraining_job(units[i])) for i in runs])
        for i in todo:
            if units[i].done:
                queue.ready(evaluations(i))
        while queue.waiting or futures:
            for item in queue.start(list(futures.values())):
                submit(item)
            if not futures:  # nothing runs, nothing may start: the rule would wait forever
                raise RuntimeError(f"the schedule ({schedule.shape}) starts none of the work")
            done, _ = wait(list(futures), timeout=2.0, return_when=FIRST_COMPLETED)
            watcher.update()
            broken = False
            for future in done:
                item = futures.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool:
                    broken = True
                    futures[future] = item  # lost with the pool: handled below
                    continue
                except Exception as exc:  # a bug in one item must not lose the others' work
                    first = (str(exc).splitlines() or [""])[0]
                    watcher.say(f"a worker failed: {type(exc).__name__}: {first}", always=True)
                    continue
                if isinstance(result, tuple):  # a pre-training run
                    index, summary = result
                    unit = units[index]
                    ok = summary["status"] == "done"
                    outcome = "done" if ok else f"FAILED: {summary['message']}"
                    watcher.say(f"{unit.label} (seed {unit.seed}): {outcome}", always=not ok)
                    if ok:
                        queue.ready(evaluations(index))
                elif result["status"] == "failed":
                    job = f"{result['task']} seed {result['seed']} at {result['fraction']:g} FAILED"
                    message = f"fine-tune {job} of {result['run_id']}: {result['message']}"
                    watcher.say(message, always=True)
            if not broken:
                continue
            # A worker died: every item in flight is lost with the pool. Find whose worker
            # died, then go on with a new pool of as many workers.
            lost = list(futures.values())
            futures.clear()
            processes = dict(getattr(pool, "_processes", None) or {})
            pool.shutdown(wait=True)  # the old pool's processes are all ended and reaped now
            starts = {
                pid: item for pid, item in read_starts(started_notes).items() if pid in processes
            }
            culprits = dead_items(processes, starts, lost)
            if not any(item in starts.values() for item in lost):
                breaks_before_any_start += 1
                if breaks_before_any_start >= MAX_DEATHS:
                    watcher.close()
                    log("worker processes die as they start; finishing the work in this process")
                    return
            for item, code in culprits.items():
                deaths[item] = deaths.get(item, 0) + 1
                what = describe_item(study, units, item)
                if deaths[item] >= MAX_DEATHS:
                    message = f"its worker process died {deaths[item]} times (exit code {code})"
                    record_death(study, units, item, message)
                    watcher.say(f"{what} FAILED: {message}", always=True)
                else:
                    watcher.say(
                        f"a worker process died (exit code {code}) while running {what}; it "
                        f"resumes in a new pool of {workers} workers",
                        always=True,
                    )
            queue.requeue([item for item in lost if deaths.get(item, 0) < MAX_DEATHS])
            if queue.waiting:  # no new pool (its workers' start-up) for nothing left to do
                pool = new_pool()
        finished_normally = True
    finally:
        watcher.close()
        if not finished_normally:
            stop_workers(pool)
        pool.shutdown(wait=finished_normally, cancel_futures=True)
        shutil.rmtree(started_notes, ignore_errors=True)


class WorkQueue:
    """The items of a study's work that wait for a worker, as the schedule sees them.

    ``waiting`` holds the items that could start, in the order they became ready, each with
    its ``Job`` (kind and cost). ``start`` hands out at most one item per idle worker, in the
    schedule's order (``Schedule.pick``): an item submitted to the executor starts at once, so
    the executor's first-in-first-out queue never decides anything, and an item the schedule
    holds back (an evaluation while a pre-training trains, on one card) stays here.
    """

    def __init__(self, schedule: Schedule, workers: int) -> None:
        self.schedule, self.workers = schedule, workers
        self.waiting: list[Item] = []
        self.jobs: dict[Item, Job] = {}

    def ready(self, items: list[tuple[Item, Job]]) -> None:
        """Items that can start now (a run, or the evaluations of a run that finished)."""
        for item, job in items:
            self.jobs[item] = job
            self.waiting.append(item)

    def requeue(self, items: list[Item]) -> None:
        """Items lost in flight (their worker died): first in line again, in their order."""
        self.waiting[:0] = [item for item in items if item not in self.waiting]

    def start(self, running: list[Item]) -> list[Item]:
        """The items to submit now, given the items in flight; they leave ``waiting``."""
        waiting = [self.jobs[item] for item in self.waiting]
        free = self.workers - len(running)
        picked = self.schedule.pick(waiting, [self.jobs[item] for item in running], free)
        # by identity: two variants' baselines on one backbone and data share their keys
        chosen = {id(job) for job in picked}
        by_job = {id(self.jobs[item]): item for item in self.waiting}
        self.waiting = [item for item in self.waiting if id(self.jobs[item]) not in chosen]
        return [by_job[id(job)] for job in picked]


def pretraining_job(unit: Unit) -> Job:
    """A unit's pre-training as the schedule sees it: its FLOPs are its cost (a baseline's or
    a reference's is none: it is made at once)."""
    return Job(unit.run_id, "pretrain", unit_cost(unit))


def evaluation_job(unit: Unit, job: EvaluationJob) -> Job:
    """An evaluation as the schedule sees it: its task's untimed cost
    (``Task.relative_cost``), after its unit's pre-training."""
    cost = get_task(job.task).relative_cost(job.settings)
    needs = unit.run_id if isinstance(unit, RunUnit) else None
    return Job(f"{unit.run_id}/{job.job_id}", "evaluate", cost, needs)


def read_starts(folder: Path) -> dict[int, Item]:
    """Worker PID -> the item it started last, from the workers' notes."""
    starts = {}
    for note in folder.iterdir():
        try:
            starts[int(note.name)] = tuple(json.loads(note.read_text()))
        except (OSError, ValueError):
            continue  # a note torn by its writer's death: that worker had not started the item
    return starts


def dead_items(processes: dict, started: dict[int, Item], lost: list[Item]) -> dict[Item, Any]:
    """The lost items whose worker died, with its exit code. A broken pool ends its other
    workers with SIGTERM, so a worker that ended otherwise is the one that died; if the dead
    one was itself ended by SIGTERM, every lost item that had started is counted."""
    dead = {
        pid: p.exitcode
        for pid, p in processes.items()
        if p.exitcode not in (None, 0, -signal.SIGTERM)
    }
    found = {started[pid]: code for pid, code in dead.items() if started.get(pid) in lost}
    if found:
        return found
    return {item: -signal.SIGTERM for pid, item in started.items() if item in lost}


def describe_item(study: Study, units: list[Unit], item: Item) -> str:
    unit = units[item[1]]
    if item[0] == "run":
        return f"{unit.label} (seed {unit.seed})"
    (job,) = [j for j in study.jobs(unit) if j.job_id == item[2]]
    return f"fine-tune {job.task} seed {job.seed} at {job.fraction:g} of {unit.label}"


def record_death(study: Study, units: list[Unit], item: Item, message: str) -> None:
    """Record an item that keeps killing its worker as failed: a run's ``failed.json`` (the
    next ``ablate run`` retries it), a fine-tune's failed record (as any failed fine-tune)."""
    unit = units[item[1]]
    if item[0] == "run":
        summary = {"status": "failed", "message": message, "steps": 0}
        atomic_write_text(unit.layout.failed, json.dumps(summary))
        return
    (job,) = [j for j in study.jobs(unit) if j.job_id == item[2]]
    record = {
        "job_id": job.job_id,
        "run_id": unit.run_id,
        "fraction": job.fraction,
        "task": job.task,
        "seed": job.seed,
        "status": "failed",
        "message": message,
    }
    atomic_write_text(study.layout.finetune_record(job.job_id), json.dumps(record, indent=1))


def stop_workers(pool: Any) -> None:
    """End the pool's worker processes now (SIGTERM): on Ctrl-C, SIGTERM or an error the parent
    must neither wait for their items to finish nor leave them running."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()


def unit_cost(unit: Unit) -> float:
    return unit.plan.flops_at(unit.plan.total_steps)["standard"] if isinstance(unit, RunUnit) else 0


class StudyWatcher:
    """The parent's one line for the whole study: runs and FLOPs done, fine-tunes done, ETA.

    It reads what the workers write (each run's ``metrics.jsonl`` and fine-tune records), so it
    needs no channel to them and shows the truth on disk.
    """

    def __init__(self, study: Study, units: list[Unit], mode: ProgressMode) -> None:
        self.study, self.units, self.mode = study, units, mode
        self.runs = [u for u in units if isinstance(u, RunUnit)]
        self.total_flops = sum(unit_cost(u) for u in self.runs) or 1.0
        self.jobs = [j for u in units for j in study.jobs(u, ready_only=False)]
        self.started = time.perf_counter()
        self.start_flops, self.start_jobs = self._flops_done(), self._jobs_done()
        self._last_plain = 0.0
        self._status = None
        if mode == "live":
            from rich.console import Console

            self._console = Console(stderr=True)
            self._status = self._console.status(self.line())
            self._status.start()

    def _flops_done(self) -> float:
        done = 0.0
        for unit in self.runs:
            if unit.done:
                done += unit_cost(unit)
            elif unit.layout.metrics.exists():
                done += last_logged(unit.layout.metrics, "flops_standard")
        return done

    def _jobs_done(self) -> int:
        return sum(self.study.layout.finetune_record(j.job_id).exists() for j in self.jobs)

    def share_done(self, flops: float, jobs: int) -> float:
        """How much of the study is done: pre-training and fine-tuning weighted equally (a rough
        measure whose ETA sharpens as the study goes)."""
        if not self.jobs:
            return flops / self.total_flops
        return 0.5 * flops / self.total_flops + 0.5 * jobs / len(self.jobs)

    def line(self) -> str:
        flops, jobs = self._flops_done(), self._jobs_done()
        runs_done = sum(u.done for u in self.runs)
        now = self.share_done(flops, jobs)
        gained = now - self.share_done(self.start_flops, self.start_jobs)
        elapsed = time.perf_counter() - self.started
        eta = format_duration(elapsed * (1.0 - now) / gained) if gained > 0 else "?"
        return (
            f"study {self.study.spec.name}: runs {runs_done}/{len(self.runs)}, "
            f"FLOPs {flops:.2e}/{self.total_flops:.2e}, fine-tunes {jobs}/{len(self.jobs)}, "
            f"ETA {eta}"
        )

    def update(self) -> None:
        if self._status is not None:
            self._status.update(self.line())
        elif self.mode == "plain" and time.perf_counter() - self._last_plain > 60:
            self._last_plain = time.perf_counter()
            print(self.line(), file=sys.stderr, flush=True)

    def say(self, message: str, always: bool = False) -> None:
        """A line above the live one; ``always`` for failures, shown even with no progress."""
        if self.mode == "off" and not always:
            return
        if self._status is not None:
            self._console.print(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def last_logged(path: Path, key: str) -> float:
    """``key`` in the last complete line of a metrics log (0 if none)."""
    try:
        lines = path.read_bytes()[-4096:].splitlines()
    except OSError:
        return 0.0
    for line in reversed(lines):
        try:
            return float(json.loads(line)[key])
        except (ValueError, KeyError, TypeError):
            continue
    return 0.0
