"""Sharing a study's units out to worker processes, with one progress line for the whole study.

A small model does not keep two cores busy from one process, so on 2 cores two single-threaded
workers finish a study sooner than one process with two threads (``bench/study_workers.py``).
Each worker prepares the same study (cache hits) and takes work as processes free up: first
every pre-training run, most expensive first, then every fine-tune (checkpoint, task, seed) as
its own item, submitted when its run finishes. Fine-tunes are separate items so that the last
run's fine-tunes are shared by both workers instead of making one wait for the other. The
parent only watches: it reads the runs' logs to show runs, FLOPs and fine-tunes done, and an
ETA. A worker that dies leaves resumable state; the caller's sequential pass finishes it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from electra_ablate.engine.progress import ProgressMode, format_duration
from electra_ablate.spec import StudySpec
from electra_ablate.study.context import Study
from electra_ablate.study.execute import all_finetuned, finetune, run_unit, unfinished_jobs
from electra_ablate.study.units import RunUnit, Unit

Log = Callable[[str], None]

# One Study per worker process, prepared once and reused for every item it takes.
_worker: tuple[Study, list[Unit]] | None = None


def _init_worker(
    spec: StudySpec,
    spec_path: Path,
    out_dir: Path,
    device: str,
    threads: int,
    overrides: dict,
    reuse: bool,
) -> None:
    global _worker
    _die_with_parent()
    torch.set_num_threads(threads)
    study = Study(spec, spec_path, out_dir, device, overrides, reuse)
    _worker = (study, study.prepare())


def _die_with_parent() -> None:
    """Ask Linux to end this worker when the ``ablate run`` that started it ends, however it
    ends: an orphan would go on writing into runs that a restarted study is resuming."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _pretrain(index: int) -> tuple[int, dict[str, Any]]:
    study, units = _worker
    return index, run_unit(study, units[index], progress=False)


def _finetune(index: int, job_id: str) -> dict[str, Any]:
    study, units = _worker
    (job,) = [j for j in study.jobs(units[index]) if j.job_id == job_id]
    return finetune(study, units[index], job)


def run_in_workers(
    study: Study, units: list[Unit], workers: int, progress: ProgressMode, log: Log = print
) -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    total_threads = study.spec.pretrain.num_threads or torch.get_num_threads()
    threads = max(1, total_threads // workers)
    todo = [i for i, u in enumerate(units) if not (u.done and all_finetuned(study, u))]
    todo.sort(key=lambda i: -unit_cost(units[i]))
    if not todo:
        return
    log(f"{len(todo)} units of work on {workers} workers x {threads} threads")
    args = (
        study.spec,
        study.spec_path,
        study.layout.root,
        str(study.device),
        threads,
        study.overrides,
        study.reuse,
    )
    watcher = StudyWatcher(study, units, progress)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=args
    ) as pool:

        def submit_finetunes(index: int) -> set:
            unfinished = unfinished_jobs(study, study.jobs(units[index]))
            return {pool.submit(_finetune, index, j.job_id) for j in unfinished}

        pending = {pool.submit(_pretrain, i) for i in todo if not units[i].done}
        for i in todo:
            if units[i].done:
                pending |= submit_finetunes(i)
        while pending:
            finished, pending = wait(pending, timeout=2.0, return_when=FIRST_COMPLETED)
            watcher.update()
            for future in finished:
                try:
                    result = future.result()
                except BrokenProcessPool:
                    watcher.close()
                    log("a worker process died; finishing its work in this process")
                    return
                except Exception as exc:  # a bug in one item must not lose the others' work
                    first = (str(exc).splitlines() or [""])[0]
                    watcher.say(f"a worker failed: {type(exc).__name__}: {first}", always=True)
                    continue
                if isinstance(result, tuple):  # a pre-training run
                    index, summary = result
                    unit = units[index]
                    done = summary["status"] == "done"
                    outcome = "done" if done else f"FAILED: {summary['message']}"
                    watcher.say(f"{unit.label} (seed {unit.seed}): {outcome}", always=not done)
                    if done:
                        pending |= submit_finetunes(index)
                elif result["status"] == "failed":
                    job = f"{result['task']} seed {result['seed']} at {result['fraction']:g} FAILED"
                    message = f"fine-tune {job} of {result['run_id']}: {result['message']}"
                    watcher.say(message, always=True)
    watcher.close()


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
