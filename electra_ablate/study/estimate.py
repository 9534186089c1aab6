"""``ablate run --dry-run``: the plan of every unit and how long the study will take here.

Timing uses the real code: a few steps of the ``Trainer``'s own ``train_step`` per objective
and each task's own estimate on a fresh encoder (for a fine-tuned task, a short real
fine-tune), measured with as many threads as each worker will get,
then the work is packed onto the workers as ``--workers`` runs it (every pre-training run first,
longest first, then each fine-tune as its own item) to give the study's wall time.
"""

from __future__ import annotations

import heapq
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from electra_ablate.data.batches import PackedBatches
from electra_ablate.engine.trainer import PretrainRun, Trainer
from electra_ablate.evaluation.finetuned import TIMED_EXAMPLES
from electra_ablate.evaluation.run import EvaluationJob, fresh_kept
from electra_ablate.evaluation.task import get_task
from electra_ablate.kept import LoadedKept
from electra_ablate.layout import RunLayout
from electra_ablate.study.context import Study
from electra_ablate.study.units import RunUnit, Unit
from electra_ablate.threads import torch_threads

TIMED_STEPS = 3


@dataclass
class StudyEstimate:
    rows: list[dict[str, Any]]
    serial_s: float  # the remaining work one after another
    wall_s: float  # the remaining work on ``workers`` processes
    how: str


def estimate_study(study: Study, units: list[Unit], workers: int = 1) -> StudyEstimate:
    threads = max(1, (study.spec.pretrain.num_threads or torch.get_num_threads()) // workers)
    with torch_threads(threads):
        step_s: dict[str, float] = {}
        job_s: dict[tuple[str, str, str | None], float] = {}
        rows, pretrain_costs, finetune_costs = [], [], []
        for unit in units:
            pretrain_s = 0.0
            if isinstance(unit, RunUnit):
                if unit.label not in step_s:  # seeds of one entry cost the same
                    step_s[unit.label] = time_steps(study, unit)
                pretrain_s = step_s[unit.label] * unit.plan.total_steps
            finetune_s = 0.0
            for job in study.jobs(unit, ready_only=False):
                if study.layout.finetune_record(job.job_id).exists():
                    continue
                task_key = (str(unit.variant), job.task, job.reference)
                if task_key not in job_s:
                    job_s[task_key] = time_job(study, unit, job)
                finetune_s += job_s[task_key]
                finetune_costs.append(job_s[task_key])
            if not unit.done:
                pretrain_costs.append(pretrain_s)
            rows.append(plan_row(unit, pretrain_s, finetune_s))
    how = (
        f"measured on this machine at {threads} thread(s) per process: the median of "
        f"{TIMED_STEPS} training steps per objective and each task's estimate (a "
        f"{TIMED_EXAMPLES}-example fine-tune for a fine-tuned task), scaled to the plan; wall "
        f"time packs the runs (longest first), then the evaluations onto {workers} worker(s)"
    )
    serial = sum(pretrain_costs) + sum(finetune_costs)
    return StudyEstimate(rows, serial, makespan(pretrain_costs, finetune_costs, workers), how)


def plan_row(unit: Unit, pretrain_s: float, finetune_s: float) -> dict[str, Any]:
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
        "status": "done" if unit.done else "to do",
    }


def time_steps(study: Study, unit: RunUnit) -> float:
    """Seconds per training step of the unit's objective: the real ``Trainer.advance``."""
    data = study.data(unit.spec).data
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
        times = []
        for _ in range(TIMED_STEPS + 1):  # the first step warms caches up and is dropped
            start = time.perf_counter()
            trainer.advance()
            trainer.means.fetch()  # waits for the step: it reads the step's metrics
            times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def time_job(study: Study, unit: Unit, job: EvaluationJob) -> float:
    """Seconds one evaluation of ``job``'s task takes: the task's own estimate, on a freshly
    initialised encoder of the unit's backbone (what the weights are does not change the cost);
    a reference scorer, timed once."""
    task = get_task(job.task)
    if job.reference is not None:
        start = time.perf_counter()
        task.evaluate_reference(job.reference, job.settings, job.seed, Path(job.tokenizer_dir))
        return time.perf_counter() - start
    kept = LoadedKept(
        fresh_kept(study.backbone(unit.spec)), {}, study.data(unit.spec).data.tokenizer_dir
    )
    return task.estimate_seconds(kept, job.settings, study.device)


def makespan(pretrain_costs: list[float], finetune_costs: list[float], workers: int) -> float:
    """Wall time on ``workers`` processes that each take the next item as they free up: the runs
    longest first, then the fine-tunes."""
    loads = [0.0] * max(1, workers)
    for cost in sorted(pretrain_costs, reverse=True) + finetune_costs:
        heapq.heapreplace(loads, loads[0] + cost)
    return max(loads)
