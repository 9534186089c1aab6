"""``ablate run --dry-run``: the plan of every unit and how long the study will take here.

Timing uses the real code: the ``Trainer``'s own ``train_step`` per objective and each task's own
estimate on a fresh encoder (for a fined-tuned task, a short real fine-tune), then the work is
packed onto the workers as ``--workers`` runs it, in the order of the spec's ``schedule``
(``makespan``: every pre-training run first, longest first, then each fine-tune as its own item;
on one shared card, one run at a time, then the fine-tunes longest first) to give the study's
wall time.

Timing with all threads is fragile: a process busy on one of two cores stalls every multi-thread
step at its barriers, and three timed steps once varied 23x on one machine within half an hour.
So every step is timed on ONE thread, in CPU time (on a CPU device): the seconds the step
computes, which other processes sharing the cores do not stretch the way they stretch its wall
time. The median of ``TIMED_WINDOWS`` one-step windows is kept, and the threads a worker will
have enter through a wall-time speed-up measured on the first objective and kept within
[1, threads]. A task's own estimate is converted the same way (by the CPU share its timing got).

CPU time says what a step costs, not what it will take now: on a machine other jobs share, the
run's steps wait for cores (issue 69: 15-64x under the wall time). So a short wall-clock probe
(``load_probe``: ``PROBE_WINDOWS`` real steps at the worker's thread count) gives the slowdown
the run will see now, against the CPU-time model, and the middle estimate is the probe's. What a
run pays besides its steps is measured where the dry run meets it (``FixedCosts``): the process
start and imports up to the plan, planning on cached data (a second ``plan_study``), a run's
build (objective, trainer, first step), an evaluation's start-up, first-use imports paid once,
and the tables written at the end (a probe). The range goes from perfect thread scaling on an
idle machine to the probe's slowest window (or the load average's slowdown, if worse), fixed
costs included in both.
"""

from __future__ import annotations

import heapq
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.data.batches import PackedBatches
from electra_ablate.evaluation.finetuned import TIMED_EXAMPLES
from electra_ablate.evaluation.run import EvaluationJob, fresh_kept
from electra_ablate.evaluation.task import get_task
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.progress import format_duration, progress_mode, status_line
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.infra.threads import torch_threads
from electra_ablate.pretraining.engine.trainer import PretrainRun, Trainer
from electra_ablate.study.code_change import (
    KEEP_OPTION,
    code_changes,
    job_code,
    unrecorded_line,
)
from electra_ablate.study.context import Study, refuse_cuda_graphs_off_cuda
from electra_ablate.study.plan import plan_study
from electra_ablate.study.preflight import warn_dry_run
from electra_ablate.study.reuse import finished_record, near_run, reusable_from
from electra_ablate.study.schedule import Schedule
from electra_ablate.study.units import RunUnit, Unit, prepared

TIMED_WINDOWS = 5  # one-step windows per objective; the median is kept
SPEEDUP_WINDOWS = 3  # windows at the workers' thread count, against as many on one thread
PROBE_WINDOWS = 5  # one-step wall-clock windows at the workers' thread count: the load's effect


@dataclass
class StepTiming:
    """Seconds per training step on one thread: the median and the extremes of its windows."""

    median: float
    fastest: float
    slowest: float
    setup_s: float = 0.0  # wall seconds to build the run and take its warm-up step


@dataclass
class JobTiming:
    """One evaluation: its seconds on one thread (``time_job``) and, in wall time, what it paid
    before and around its task's own estimate (the task, a fresh encoder, the task's data)."""

    seconds: float
    startup_s: float


@dataclass
class FixedCosts:
    """Wall seconds a run pays besides its steps and fine-tunes, each measured in the dry run
    where the run meets it (the module docstring)."""

    startup_s: float = 0.0  # the process started and imported, up to planning
    planning_s: float = 0.0  # ``plan_study`` on the cached data the dry run left
    once_s: float = 0.0  # first-use imports (the optimizer's, a task family's), paid once
    tables_s: float = 0.0  # the tables written at the end
    per_run_s: dict[str, float] = field(default_factory=dict)  # a run's build, by label
    per_job_s: float = 0.0  # an evaluation's start-up

    def once(self) -> float:
        """What the study pays once, whatever its units."""
        return self.startup_s + self.planning_s + self.once_s + self.tables_s

    def total(self, runs: list[str], jobs: int) -> float:
        """All of it, for the runs (their labels) and the number of evaluations still to do."""
        built = sum(self.per_run_s.get(label, 0.0) for label in runs)
        return self.once() + built + self.per_job_s * jobs


@dataclass
class StudyEstimate:
    rows: list[dict[str, Any]]
    serial_s: float  # the remaining work one after another
    wall_s: float  # the remaining work on ``workers`` processes
    how: str
    wall_range_s: tuple[float, float] = (0.0, 0.0)  # the fastest and slowest it could be
    load: str = ""  # the machine's load while it was measured
    device: str = ""  # where it was measured
    notes: list[str] = field(default_factory=list)  # finished work whose code changed, and why
    fixed_s: float = 0.0  # the measured fixed costs inside ``wall_s`` (``FixedCosts``)
    slowdown: float = 1.0  # the load probe's wall time against the CPU-time model
    gpus: int = 0  # GPUs the run uses (0 off an accelerator)

    @property
    def gpu_hours(self) -> float | None:
        """Wall time times the GPUs used, on an accelerator (None on a CPU)."""
        return self.wall_s * self.gpus / 3600 if self.gpus else None

    def as_dict(self) -> dict[str, Any]:
        """The plan and its time model as plain JSON (``ablate run --dry-run --plan-json``)."""
        return {
            "device": self.device,
            "rows": [
                dict(
                    r,
                    est_pretrain_s=r["est_pretrain_min"] * 60,
                    est_finetune_s=r["est_finetune_min"] * 60,
                )
                for r in self.rows
            ],
            "serial_s": self.serial_s,
            "wall_s": self.wall_s,
            "wall_range_s": list(self.wall_range_s),
            "load": self.load,
            "how": self.how,
            "notes": self.notes,
            "fixed_s": self.fixed_s,
            "slowdown": self.slowdown,
            "gpus": self.gpus,
            "gpu_hours": self.gpu_hours,
        }


def gpu_hours_line(estimate: StudyEstimate) -> str | None:
    """The dry run's GPU-hours line on an accelerator (wall time times GPUs, with its range);
    None on a CPU."""
    if estimate.gpu_hours is None:
        return None
    low, high = (x * estimate.gpus / 3600 for x in estimate.wall_range_s)
    return (
        f"GPU-hours: about {estimate.gpu_hours:.2f} ({estimate.gpus} GPU(s) x the wall time; "
        f"range {low:.2f} to {high:.2f})"
    )


def process_age() -> float:
    """Wall seconds since this process started (its start and imports: what a run's process
    repeats); 0 where ``/proc`` does not say."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - started / ticks)


def tables_probe(rows: int) -> float:
    """Wall seconds to write a table of ``rows`` rows as parquet and JSON, atomically, into a
    throwaway folder: the order of the tables the run writes at its end. Written with pyarrow,
    which an offline GPU node has (polars it has not, and its session's dry run plans there)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        table = pa.table({"unit": list(range(rows)), "value": [0.0] * rows})
        for name in ("runs", "results", "pretrain_metrics"):
            pq.write_table(table, Path(tmp) / f"{name}.parquet")
        atomic_write_text(Path(tmp) / "study.json", json.dumps({"rows": rows}))
    return time.perf_counter() - started


def load_factor() -> float:
    """How many runnable processes each core has (at least 1): the slowdown a run started now
    would see if the load stayed."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        return 1.0


def machine_load() -> str:
    """``load 1.9 on 2 cores``: the 1-minute load average the timing ran under."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return f"{cores} cores, load unknown"
    return f"load {load:.1f} on {cores} cores"


def estimate_plan(
    spec: Any,
    spec_path: Path,
    out_dir: Path,
    device: str | None,
    overrides: dict[str, Any],
    workers: int,
    progress: bool | None = None,
    keep_code_changes: bool = False,
    reuse: bool = True,
) -> StudyEstimate:
    """What ``ablate run --dry-run`` shows: the study prepared (its data and units) and its plan
    timed on this machine (``estimate_study``), each step said on stderr as it starts. With
    ``reuse`` off (``--no-reuse``) nothing beside is copied: every unfinished unit is to do."""
    fixed = FixedCosts(startup_s=process_age())  # what the run's process repeats
    study = Study(
        spec, spec_path, out_dir, device, overrides, reuse, keep_code_changes=keep_code_changes
    )
    refuse_cuda_graphs_off_cuda(spec, study.device)  # the dry run times the real step
    mode = progress_mode(progress)
    with status_line("preparing the data (tokenizer, packed sequences, tasks)", mode) as say:
        planned = plan_study(study, progress=mode == "live")
        warn_dry_run(spec)  # a task whose caps make one class its likely outcome
        say("planning again on the cached data (what the run repeats)")
        started = time.perf_counter()
        plan_study(study)
        fixed.planning_s = time.perf_counter() - started
        say("timing the plan on this machine")
        estimate = estimate_study(study, planned.units, workers, say, fixed)
    estimate.notes[:0] = planned.notes  # what the plan does that the spec does not show
    return estimate


def estimate_study(
    study: Study,
    units: list[Unit],
    workers: int = 1,
    say: Callable[[str], None] | None = None,
    fixed: FixedCosts | None = None,
) -> StudyEstimate:
    """The plan's rows with their estimated minutes and the study's wall time; ``say`` is told
    what is being timed (the command shows it as progress). ``fixed`` brings what the caller
    measured (the process start, planning); the builds, the evaluations' start-up, first-use
    imports and the tables are measured here."""
    say = say or (lambda _: None)
    fixed = fixed or FixedCosts()
    threads = max(1, (study.spec.pretrain.num_threads or torch.get_num_threads()) // workers)
    schedule = study.schedule(workers)
    load_before = machine_load()
    speedup: float | None = None
    slowdown, worst = load_factor(), load_factor()  # the probes' (middle) and the range's top
    slowdowns: list[float] = []  # per objective: its probe's wall step against its CPU step
    with torch_threads(1):
        steps: dict[str, StepTiming] = {}
        jobs: dict[tuple[str, str, str | None], JobTiming] = {}
        rows, costs = [], {"mid": ([], []), "low": ([], []), "high": ([], [])}
        counted: list[int] = []
        changed, notes = code_notes(study, units)
        redone = {c.unit.run_id for c in changed if c.job is None}
        stale = {c.job.job_id for c in changed if c.job is not None}
        reused = {u.run_id: s for u in units if not done(u, redone) and (s := reusable(study, u))}
        runs = [u for u in units if isinstance(u, RunUnit) and to_train(u, reused, redone)]
        for unit in runs:  # first every objective's steps, so the load is known for all
            if unit.label not in steps:  # seeds of one entry cost the same
                say(f"timing {unit.label}'s steps ({len(steps) + 1} of {len(runs)} objectives)")
                steps[unit.label] = timing = time_steps(study, unit)
                if speedup is None:
                    say(f"measuring the speed-up of {threads} thread(s)")
                    speedup = thread_speedup(study, unit, threads)
                # the load, probed once per objective: samples spread over the dry run
                probe = load_probe(study, unit, threads)
                idle = timing.median / speedup
                slowdowns.append(probe.median / idle)
                worst = max(worst, probe.slowest / idle)
                # a build's cost once first-use imports are paid (the first build's extra is
                # paid once by the run too)
                fixed.per_run_s[unit.label] = min(timing.setup_s, probe.setup_s)
                fixed.once_s += timing.setup_s - fixed.per_run_s[unit.label]
        # the load: the probes' median, or the load average's if that is worse
        slowdown = max(statistics.median(slowdowns), load_factor()) if slowdowns else slowdown
        for unit in units:
            pretrain = {"mid": 0.0, "low": 0.0, "high": 0.0}
            if isinstance(unit, RunUnit) and to_train(unit, reused, redone):
                timing, n = steps[unit.label], unit.plan.total_steps
                build = fixed.per_run_s[unit.label]
                speedup = speedup or 1.0
                pretrain = {
                    "mid": timing.median / speedup * slowdown * n + build,
                    "low": timing.fastest / threads * n + build,
                    "high": timing.slowest / speedup * max(worst, slowdown) * n + build,
                }
            finetune = {"mid": 0.0, "low": 0.0, "high": 0.0}
            counted.append(0)  # the unit's evaluations still to do
            for job in study.jobs(unit, ready_only=False):
                if unit.run_id not in redone and evaluated(study, unit, job, stale):
                    continue
                task_key = (str(unit.variant), job.task, job.reference)
                if task_key not in jobs:
                    say(f"timing {job.task}" + (f" ({job.reference})" if job.reference else ""))
                    jobs[task_key] = time_job(study, unit, job)
                one = jobs[task_key].seconds  # on one thread
                scaled = {
                    "mid": one / (speedup or 1.0) * slowdown,
                    "low": one / threads,
                    "high": one * max(worst, slowdown),
                }
                for key, cost in scaled.items():
                    finetune[key] += cost
                    costs[key][1].append(cost)
                counted[-1] += 1
            if to_train(unit, reused, redone):
                for key in costs:
                    costs[key][0].append(pretrain[key])
            rows.append(plan_row(study, unit, pretrain["mid"], finetune["mid"], reused, redone))
    # the first evaluation of a process paid first-use imports; the others did not
    fixed.per_job_s = job_startup(jobs.values())
    fixed.once_s += max([j.startup_s for j in jobs.values()], default=0.0) - fixed.per_job_s
    for key in costs:
        costs[key] = (costs[key][0], [c + fixed.per_job_s for c in costs[key][1]])
    for row, n in zip(rows, counted, strict=True):
        row["est_finetune_min"] += fixed.per_job_s * n / 60
    fixed.tables_s = tables_probe(len(rows))
    load = f"{load_before} before timing, {machine_load()} after"
    how = (
        f"steps timed on 1 thread in CPU time (median of {TIMED_WINDOWS}), x{speedup or 1.0:.2f} "
        f"for {threads} thread(s), x{slowdown:.2f} for the load ({PROBE_WINDOWS}-step "
        "wall-clock probes, or the load average if worse); tasks by a "
        f"{TIMED_EXAMPLES}-example fine-tune, likewise; "
        f"{format_duration(fixed.once())} fixed (start, planning, tables) and per run/job "
        "start-ups measured here; "
        + (
            f"runs one at a time, evaluations longest first onto {workers} workers sharing one "
            f"card ({schedule.beside} beside the runs)"
            if schedule.shape == "one_card" and workers > 1
            else f"runs longest first, then evaluations, onto {workers} worker(s)"
        )
    )
    serial = sum(costs["mid"][0]) + sum(costs["mid"][1]) + fixed.once()
    walls = {key: makespan(*costs[key], workers, schedule) + fixed.once() for key in costs}
    todo = [u.label for u in runs]
    return StudyEstimate(
        rows,
        serial,
        walls["mid"],
        how,
        (walls["low"], walls["high"]),
        load,
        str(study.device),
        notes,
        fixed_s=fixed.total(todo, len(costs["mid"][1])),
        slowdown=slowdown,
        gpus=study.dist.world_size if torch.device(study.device).type == "cuda" else 0,
    )


def job_startup(jobs: Iterable[JobTiming]) -> float:
    """An evaluation's start-up: the least any timed task paid (the first paid first-use
    imports too, which ``estimate_study`` charges once); 0 with none timed."""
    return min((j.startup_s for j in jobs), default=0.0)


def code_notes(study: Study, units: list[Unit]) -> tuple[list[Any], list[str]]:
    """The finished work whose code changed since (``code_change.code_changes``) that the run
    will redo (none with ``--keep-code-changes``), and the dry run's lines about it: one per
    change, one for work that records no code."""
    changes, unrecorded = code_changes(study, units)
    how = f"kept ({KEEP_OPTION})" if study.keep_code_changes else "re-run"
    notes = [f"{c.line(study.layout.root)}: {how}" for c in changes]
    notes += [unrecorded_line(unrecorded)] if unrecorded else []
    return ([] if study.keep_code_changes else changes), notes


def done(unit: Unit, redone: set[str]) -> bool:
    """Whether ``unit`` is finished here and stays so: not one whose code changed since, which
    the run moves aside and redoes (``redone``: their run ids, from ``code_notes``)."""
    return unit.done and unit.run_id not in redone


def reusable(study: Study, unit: Unit) -> str | None:
    """The study beside this one whose identical finished unit the run will copy, if reuse is
    on (``--no-reuse`` trains anyway)."""
    return reusable_from(study, unit) if study.reuse else None


def to_train(unit: Unit, reused: dict[str, str], redone: set[str] = frozenset()) -> bool:
    """Whether the run will train ``unit`` (not finished here, or finished by code that has
    changed since: ``redone``; and none to copy from beside)."""
    return not done(unit, redone) and unit.run_id not in reused


def evaluated(study: Study, unit: Unit, job: EvaluationJob, stale: set[str] = frozenset()) -> bool:
    """Whether ``job`` is finished here (and its code has not changed since: ``stale``), or in a
    study beside, by the code now, that the run copies it from."""
    if job.job_id not in stale and study.layout.finetune_record(job.job_id).exists():
        return True
    return study.reuse and finished_record(study, job.job_id, job_code(unit, job)) is not None


def plan_row(
    study: Study,
    unit: Unit,
    pretrain_s: float,
    finetune_s: float,
    reused: dict[str, str],
    redone: set[str] = frozenset(),
) -> dict[str, Any]:
    """One unit's line of the plan; ``status`` says whether it is done, copied from a study
    beside, or to do, and ``not_reused`` why a near run beside is not copied (or None)."""
    status = "done" if done(unit, redone) else "to do"
    if unit.run_id in reused:
        status = f"reused from {reused[unit.run_id]}"
    near = None
    if isinstance(unit, RunUnit) and status == "to do" and study.reuse:
        near = near_run(study, unit)
    if isinstance(unit, RunUnit):
        flops = unit.plan.flops_at(unit.plan.total_steps)
        steps = "+".join(str(s) for s in unit.plan.stage_steps)
    else:
        flops, steps = {"paper": 0.0, "standard": 0.0}, "0"
    return {
        "label": unit.label,
        "objective": unit.objective,
        "seed": unit.seed,
        "steps": steps,
        "flops_paper": flops["paper"],
        "flops_standard": flops["standard"],
        "est_pretrain_min": pretrain_s / 60,
        "est_finetune_min": finetune_s / 60,
        "status": status,
        "not_reused": near.describe() if near is not None else None,
    }


def time_steps(study: Study, unit: RunUnit, windows: int = TIMED_WINDOWS) -> StepTiming:
    """Seconds per training step of the unit's objective on one thread: the real
    ``Trainer.train_step`` in ``windows`` one-step windows after a warm-up step, in CPU time
    on a CPU device (``compute_clock``)."""
    windows = max(1, min(windows, unit.plan.total_steps - 1))  # never past the plan's end
    started = time.perf_counter()
    with torch_threads(1), stepper(study, unit, compute_clock(study)) as step:
        setup = time.perf_counter() - started
        times = [step() for _ in range(windows)]
    return StepTiming(statistics.median(times), min(times), max(times), setup)


def load_probe(study: Study, unit: RunUnit, threads: int) -> StepTiming:
    """Seconds per step of ``unit`` at the worker's ``threads`` in WALL time, now: what the
    machine's load (other processes on its cores) makes of a step, which CPU time hides. Also
    the build's wall seconds once first-use imports are paid (``setup_s``)."""
    windows = max(1, min(PROBE_WINDOWS, unit.plan.total_steps - 1))  # never past the plan's end
    started = time.perf_counter()
    with torch_threads(threads), stepper(study, unit) as step:
        setup = time.perf_counter() - started
        times = [step() for _ in range(windows)]
    return StepTiming(statistics.median(times), min(times), max(times), setup)


def thread_speedup(study: Study, unit: RunUnit, threads: int) -> float:
    """How much faster a step runs on ``threads`` threads than on one, measured on ``unit``'s
    objective in alternating windows (so a burst of load hits both alike), kept in
    [1, threads]: a busy core makes more threads no faster, never the estimate 20x slower."""
    pairs = min(SPEEDUP_WINDOWS, (unit.plan.total_steps - 1) // 2)  # never past the plan's end
    if threads <= 1 or pairs < 1:
        return 1.0
    one, many = [], []
    with stepper(study, unit) as step:
        for _ in range(pairs):
            with torch_threads(1):
                one.append(step())
            with torch_threads(threads):
                many.append(step())
    return min(max(min(one) / min(many), 1.0), float(threads))


def compute_clock(study: Study) -> Callable[[], float]:
    """The clock a one-thread timing reads: the process's CPU time on a CPU device (what the
    work costs, however many other processes share the core), wall time on a GPU."""
    return time.process_time if torch.device(study.device).type == "cpu" else time.perf_counter


@contextmanager
def stepper(
    study: Study, unit: RunUnit, clock: Callable[[], float] = time.perf_counter
) -> Iterator[Callable[[], float]]:
    """A function that runs one real training step of ``unit`` and returns its seconds on
    ``clock``, on a throwaway run folder; one warm-up step (caches, allocations) is taken
    first."""
    data = prepared(unit).data
    spec = unit.spec.pretrain
    with tempfile.TemporaryDirectory() as tmp:
        run = PretrainRun(
            spec=spec,
            plan=unit.plan,
            layout=RunLayout(Path(tmp)),
            seed=0,
            train_batches=PackedBatches(data.train, spec.batch_size, 0),
            heldout_batches=None,
            tokenizer_dir=data.tokenizer_dir,
        )
        trainer = Trainer(study.build(unit), run, study.device, progress=False)
        trainer.start_or_resume()

        def step() -> float:
            start = clock()
            trainer.advance()
            trainer.means.fetch()  # waits for the step: it reads the step's metrics
            return clock() - start

        step()
        yield step


def time_job(study: Study, unit: Unit, job: EvaluationJob) -> JobTiming:
    """Seconds one evaluation of ``job``'s task takes: the task's own estimate, on a freshly
    initialised encoder of the unit's backbone (what the weights are does not change the cost);
    a reference scorer, timed once. Called on one thread: on a CPU device the wall-time answer
    is scaled by the share of a core the timing got (CPU over wall time), so other processes'
    load does not stretch it. Its start-up is the wall time beyond the task's own estimate (the
    task, the encoder, the task's data), which the run pays per evaluation."""
    clock = compute_clock(study)
    wall, cpu = time.perf_counter(), clock()
    task = get_task(job.task)
    if job.reference is not None:
        task.evaluate_reference(job.reference, job.settings, job.seed, Path(job.tokenizer_dir))
        return JobTiming(clock() - cpu, time.perf_counter() - wall - (clock() - cpu))
    kept = LoadedKept(fresh_kept(unit.backbone), {}, prepared(unit).data.tokenizer_dir)
    seconds = task.estimate_seconds(kept, job.settings, study.device)
    elapsed = max(time.perf_counter() - wall, 1e-9)
    share = min((clock() - cpu) / elapsed, 1.0)
    return JobTiming(seconds * share, max(elapsed - seconds, 0.0))


def makespan(
    pretrain_costs: list[float],
    finetune_costs: list[float],
    workers: int,
    schedule: Schedule = Schedule(),
) -> float:
    """Wall time on ``workers`` processes that each take the next item as they free up, in the
    order ``schedule`` starts them (``electra_ablate.study.schedule``). The pool: the runs
    longest first, then the fine-tunes. One card: the runs one after another on one worker,
    ``beside`` workers taking fine-tunes meanwhile and the others once the last run ends, the
    longest fine-tunes first. Each item costs its seconds alone (what sharing the device costs
    is not modelled), and a fine-tune is taken to be ready whenever a worker is free."""
    workers = max(1, workers)
    if schedule.shape == "pool" or workers == 1:
        loads = [0.0] * workers
        for cost in sorted(pretrain_costs, reverse=True) + finetune_costs:
            heapq.heapreplace(loads, loads[0] + cost)
        return max(loads)
    chain = sum(pretrain_costs)
    beside = min(schedule.beside, workers - 1) if chain else 0
    loads = [0.0] * beside + [chain] * (workers - beside)
    heapq.heapify(loads)
    for cost in sorted(finetune_costs, reverse=True):
        heapq.heapreplace(loads, loads[0] + cost)
    return max(loads)
