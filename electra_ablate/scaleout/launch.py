"""``ablate run SPEC --launcher slurm|submitit-local``: a study's units as cluster jobs.

The scheduling is ``submitit``'s (an optional extra, ``electra-ablate[slurm]``); this module
only says what a job is. A job is one unit of the study doing exactly what the in-process run
does with it, through the same functions (``execute.run_unit``, ``execute.evaluate``), in the
same study folder, which every node must see (a shared file system):

- one job per pre-training run (or baseline), on ``gpus_per_job`` GPUs: more than one starts
  one task per GPU, which join one process group as under ``torchrun`` (the DDP path);
- one job per batch of a unit's fine-tunes (``finetunes_per_job``, default all of them), on
  one GPU at most. On SLURM it is submitted at once, to start when its run's job has ended
  (``--dependency=afterany``), so the parent may go away (``--no-wait``); with the local
  executor, which knows no dependencies, the waiting parent submits it when the run finishes.
  A fine-tune job of a run that did not finish does nothing, as in-process.

A job that is preempted or reaches its time limit is requeued by submitit (the job's
``checkpoint`` hook hands back the same call) and resumes from the run's newest checksummed
state; finished fine-tunes are read back. The parent holds the study lock while it submits and
waits, shows one progress line, reports each failed unit with its job's log and writes the
tables from what is on disk, as ``ablate run --collect`` does.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra_ablate.infra.errors import InputError
from electra_ablate.infra.progress import ProgressMode
from electra_ablate.infra.threads import torch_threads
from electra_ablate.spec import LauncherSpec, StudySpec
from electra_ablate.study.context import Study, refuse_cuda_graphs_off_cuda
from electra_ablate.study.execute import evaluate, run_unit
from electra_ablate.study.plan import plan_study
from electra_ablate.study.records import warnings_to
from electra_ablate.study.units import Unit

Log = Callable[[str], None]

LAUNCHERS = ("slurm", "submitit-local")
INSTALL_HINT = "pip install 'electra-ablate[slurm]'"
POLL_S = 5.0
"""How often the waiting parent looks at its jobs (submitit caches SLURM's answers)."""
MAX_TIMEOUTS = 10
"""Time-outs after which a job is not requeued again (preemptions always are)."""


def require_submitit(kind: str) -> None:
    """One line (exit 2) when the launcher's package is missing, before anything runs."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise InputError(
            f"--launcher {kind} needs submitit, which is not installed: {INSTALL_HINT}"
        ) from None


@dataclass(frozen=True)
class LaunchOptions:
    """How ``ablate run`` launches: the kind, the resolved resources, whether it waits."""

    kind: str
    resources: LauncherSpec
    wait: bool = True


def sbatch_parameters(lines: list[str]) -> dict[str, str]:
    """``["qos=high", "--constraint=a100", "#SBATCH --exclusive"]`` as sbatch options."""
    parameters: dict[str, str] = {}
    for line in lines:
        text = line.strip().removeprefix("#SBATCH").strip().lstrip("-")
        key, _, value = text.partition("=")
        if not key or " " in key:
            raise InputError(f"sbatch line {line!r}: expected key=value, e.g. qos=high")
        parameters[key.replace("-", "_")] = value
    return parameters


# ------------------------------------------------------------------------- in the job


@dataclass(frozen=True)
class StudySetup:
    """What a job needs to open the study as the parent planned it (picklable)."""

    spec: StudySpec
    spec_path: Path
    out_dir: Path
    device: str | None
    overrides: dict[str, Any]
    reuse: bool

    def open(self, index: int, run_id: str) -> tuple[Study, Unit]:
        study = Study(
            self.spec, self.spec_path, self.out_dir, self.device, self.overrides, self.reuse
        )
        refuse_cuda_graphs_off_cuda(self.spec, study.device)
        units = plan_study(study).units
        if index >= len(units) or units[index].run_id != run_id:
            raise RuntimeError(f"the study no longer plans unit {run_id} (was the spec edited?)")
        return study, units[index]


class UnitJob:
    """A callable submitit runs in the job. ``checkpoint`` is submitit's requeue hook: on
    preemption or time-out it hands back the same call, which resumes the unit's work from what
    is on disk (a run from its newest state; finished fine-tunes are read back)."""

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)


class PretrainJob(UnitJob):
    """Pre-train (or make the baseline of) one unit; returns its summary."""

    def __init__(self, setup: StudySetup, index: int, run_id: str, tasks: int) -> None:
        self.setup, self.index, self.run_id, self.tasks = setup, index, run_id, tasks

    def __call__(self) -> dict[str, Any]:
        if self.tasks > 1:  # one task per GPU: the process group torchrun would make
            from submitit.helpers import TorchDistributedEnvironment

            TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
        with torch_threads(self.setup.spec.pretrain.num_threads):
            study, unit = self.setup.open(self.index, self.run_id)
            with warnings_to(unit.layout.warnings_log, "pre-training"):
                summary = run_unit(study, unit, progress=False)
            study.dist.close()
        return summary


class EvaluationBatchJob(UnitJob):
    """Some evaluations of one unit (by job id); returns their records."""

    def __init__(self, setup: StudySetup, index: int, run_id: str, job_ids: list[str]) -> None:
        self.setup, self.index, self.run_id, self.job_ids = setup, index, run_id, job_ids

    def __call__(self) -> list[dict[str, Any]]:
        with torch_threads(self.setup.spec.pretrain.num_threads):
            study, unit = self.setup.open(self.index, self.run_id)
            if not unit.done:  # its run failed or did not finish: nothing to evaluate
                return []
            wanted = set(self.job_ids)
            with warnings_to(unit.layout.warnings_log, "fine-tuning"):
                return [evaluate(study, unit, j) for j in study.jobs(unit) if j.job_id in wanted]


# ----------------------------------------------------------------------- in the parent


@dataclass
class Tracked:
    """A submitted job and what it does."""

    kind: str  # "pre-train" | "fine-tune"
    unit: Unit
    job: Any  # submitit.Job
    then: list[list[str]] = field(default_factory=list)  # fine-tune batches it must precede
    outcome: str | None = None  # None while it runs, else "done" or "failed"
    failure: str = ""


class Launcher:
    """Submits units as jobs through one submitit executor."""

    def __init__(self, study: Study, options: LaunchOptions, setup: StudySetup) -> None:
        import submitit

        self.study, self.options, self.setup = study, options, setup
        self.chained = options.kind == "slurm"  # SLURM runs a dependent job when it may
        cluster = "slurm" if options.kind == "slurm" else "local"
        study.layout.jobs.mkdir(parents=True, exist_ok=True)
        self.executor = submitit.AutoExecutor(
            folder=study.layout.jobs, cluster=cluster, slurm_max_num_timeout=MAX_TIMEOUTS
        )
        self.sbatch = sbatch_parameters(options.resources.sbatch)
        self.submitted: list[Any] = []  # the local jobs started, for ``stop_local_jobs``

    def parameters(self, gpus: int, tasks: int, after: Any | None = None) -> dict[str, Any]:
        r = self.options.resources
        parameters: dict[str, Any] = {
            "name": f"ablate-{self.study.spec.name}",
            "timeout_min": r.time_min,
            "gpus_per_node": gpus,
            "tasks_per_node": tasks,
        }
        if r.cpus_per_job is not None:
            parameters["cpus_per_task"] = r.cpus_per_job
        if r.mem_gb is not None:
            parameters["mem_gb"] = r.mem_gb
        if self.options.kind == "slurm":
            extra = dict(self.sbatch)
            if after is not None:
                extra["dependency"] = f"afterany:{after.job_id}"
            parameters["slurm_additional_parameters"] = extra
            if r.partition is not None:
                parameters["slurm_partition"] = r.partition
            if r.account is not None:
                parameters["slurm_account"] = r.account
        return parameters

    def submit(self, call: UnitJob, gpus: int, tasks: int, after: Any | None = None) -> Any:
        self.executor.update_parameters(**self.parameters(gpus, tasks, after))
        if self.chained:
            return self.executor.submit(call)
        # A local job's controller and its tasks start with Ctrl-C blocked: the parent stops
        # them (``stop_local_jobs``), instead of every controller printing its own
        # KeyboardInterrupt traceback to the terminal.
        with sigint_blocked():
            job = self.executor.submit(call)
            self.submitted.append(job)  # before a Ctrl-C held back meanwhile arrives
        return job

    def pretrain(self, index: int, unit: Unit) -> Tracked:
        gpus = self.options.resources.gpus_per_job
        tasks = max(1, gpus)
        job = self.submit(PretrainJob(self.setup, index, unit.run_id, tasks), gpus, tasks)
        return Tracked("pre-train", unit, job)

    def evaluations(self, index: int, unit: Unit, batch: list[str], after: Any = None) -> Tracked:
        gpus = min(1, self.options.resources.gpus_per_job)
        job = self.submit(EvaluationBatchJob(self.setup, index, unit.run_id, batch), gpus, 1, after)
        return Tracked("fine-tune", unit, job)


def evaluation_batches(study: Study, unit: Unit, per_job: int | None) -> list[list[str]]:
    """The unit's fine-tunes with no record yet, by job id, in batches of ``per_job``."""
    todo = [
        j.job_id
        for j in study.jobs(unit, ready_only=False)
        if not study.layout.finetune_record(j.job_id).exists()
    ]
    size = per_job or max(1, len(todo))
    return [todo[i : i + size] for i in range(0, len(todo), size)]


def launch_units(
    study: Study,
    plan: list[tuple[int, Unit]],
    options: LaunchOptions,
    setup: StudySetup,
    mode: ProgressMode,
    log: Log,
) -> list[str]:
    """Submit the planned units' unfinished work as jobs; wait for them unless told not to.
    Returns one line per failed unit (with its job's log), empty if none failed. Stopped by
    anything (Ctrl-C, SIGTERM, an error), it first ends the local jobs it started: none goes on
    writing into the study once the parent has let go of its lock."""
    launcher = Launcher(study, options, setup)
    try:
        return submit_and_wait(study, plan, options, mode, log, launcher)
    except BaseException:
        if not launcher.chained:
            stop_local_jobs(launcher.submitted)
        raise


def submit_and_wait(
    study: Study,
    plan: list[tuple[int, Unit]],
    options: LaunchOptions,
    mode: ProgressMode,
    log: Log,
    launcher: Launcher,
) -> list[str]:
    per_job = options.resources.finetunes_per_job
    tracked: list[Tracked] = []
    for index, unit in plan:
        batches = evaluation_batches(study, unit, per_job)
        if unit.done:
            tracked += [launcher.evaluations(index, unit, batch) for batch in batches]
            continue
        run = launcher.pretrain(index, unit)
        tracked.append(run)
        if launcher.chained:
            tracked += [launcher.evaluations(index, unit, b, after=run.job) for b in batches]
        else:
            run.then = batches
    if not tracked:
        return []
    runs = sum(t.kind == "pre-train" for t in tracked)
    log(
        f"submitted {len(tracked)} {options.kind} job(s) ({runs} pre-training, "
        f"{len(tracked) - runs} fine-tuning); logs in {study.layout.jobs}"
    )
    if not options.wait:
        return []
    index_of = {id(unit): index for index, unit in plan}
    line = ProgressLine(mode)
    try:
        wait_for(tracked, launcher, index_of, line)
    finally:
        line.close()
    return [t.failure for t in tracked if t.outcome == "failed"]


def wait_for(
    tracked: list[Tracked], launcher: Launcher, index_of: dict[int, int], line: ProgressLine
) -> None:
    """Until every job has an outcome; a local pre-training job's fine-tunes are submitted
    when it ends (the local executor has no dependencies)."""
    while any(t.outcome is None for t in tracked):
        for t in [t for t in tracked if t.outcome is None and t.job.done()]:
            settle(t)
            if t.then and t.unit.done:  # the local executor: its fine-tunes may start now
                index = index_of[id(t.unit)]
                tracked += [launcher.evaluations(index, t.unit, batch) for batch in t.then]
        line.show(tracked)
        if any(t.outcome is None for t in tracked):
            time.sleep(POLL_S)


LOCAL_STOP_S = 60
"""How long a stopping parent waits for its local jobs to end before it gives up on them."""


def stop_local_jobs(jobs: list[Any]) -> None:
    """End the local jobs still running and wait for them, so none goes on writing into the
    study after its parent let go of the lock: SIGTERM to each job's controller, which passes
    it on to its tasks (submitit's ``LocalJob.cancel`` sends SIGINT, which they ignore)."""
    running = []
    for job in jobs:
        process = getattr(job, "_process", None)  # the controller's Popen (submitit.local)
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            running.append(process)
    deadline = time.monotonic() + LOCAL_STOP_S
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block, so the processes it starts inherit it
    blocked (a signal mask survives fork and exec) and never see Ctrl-C; one that arrives
    meanwhile is delivered here when the block ends, never lost."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def settle(t: Tracked) -> None:
    """Read a finished job's outcome: its unit's records, or why the job gave none."""
    log_file = t.job.paths.stderr
    try:
        result = t.job.result()
    except Exception as exc:  # the job died, was cancelled, or its code raised
        first = str(exc).strip().splitlines()
        why = first[-1] if first else type(exc).__name__
        t.outcome = "failed"
        t.failure = f"{t.kind} {t.unit.label} (seed {t.unit.seed}): job {t.job.job_id} ended "
        t.failure += f"without a result ({why[:120]}); log: {log_file}"
        return
    failed = [r for r in (result if isinstance(result, list) else [result]) if is_failed(r)]
    t.outcome = "failed" if failed else "done"
    if failed:
        what = failed[0].get("message", "")
        t.failure = f"{t.kind} {t.unit.label} (seed {t.unit.seed}): {len(failed)} failed "
        t.failure += f"({str(what)[:100]}); log: {log_file}"


def is_failed(record: Any) -> bool:
    return isinstance(record, dict) and record.get("status") == "failed"


class ProgressLine:
    """The waiting parent's one line: jobs done, running and failed, by kind."""

    def __init__(self, mode: ProgressMode) -> None:
        self.mode, self.last, self.started = mode, "", time.time()

    def show(self, tracked: list[Tracked]) -> None:
        if self.mode == "off":
            return
        parts = []
        for kind in ("pre-train", "fine-tune"):
            mine = [t for t in tracked if t.kind == kind]
            if mine:
                finished = sum(t.outcome is not None for t in mine)
                parts.append(f"{kind} jobs {finished}/{len(mine)}")
        failed = sum(t.outcome == "failed" for t in tracked)
        text = ", ".join(parts) + (f", {failed} failed" if failed else "")
        if text == self.last:
            return
        self.last = text
        elapsed = time.strftime("%H:%M:%S", time.gmtime(time.time() - self.started))
        if self.mode == "live":
            sys.stderr.write(f"\r{text} ({elapsed})\033[K")
        else:
            sys.stderr.write(f"{text} ({elapsed})\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.mode == "live" and self.last:
            sys.stderr.write("\n")
            sys.stderr.flush()


def check_options(kind: str, wait: bool, workers: int) -> None:
    """Launcher options that cannot work together, in one line (exit 2)."""
    if kind not in LAUNCHERS:
        raise InputError(f"--launcher {kind!r}: choose from {', '.join(LAUNCHERS)}")
    if not wait and kind != "slurm":
        raise InputError(
            "--no-wait needs --launcher slurm: local jobs end with the command that started them"
        )
    if workers > 1:
        raise InputError("--workers and --launcher do not go together: each job is one unit")
    require_submitit(kind)
    if kind == "slurm" and shutil.which("sbatch") is None:
        raise InputError(
            "--launcher slurm: no SLURM here (sbatch not found): submit from the cluster's login "
            "node, or use --launcher submitit-local on this machine"
        )
