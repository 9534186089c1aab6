"""``ablate run``: a study spec becomes pre-training runs, fine-tuning jobs and one tidy table.

Every unit of work is named by a hash of its fully resolved config, so re-running a study skips
what is finished, resumes what was interrupted, and re-runs only what a spec edit changed.
Layout of the output directory::

    study.json                     what ran, where, when, with which spec
    pretrain/<label>-s<seed>-<id>/ one pre-training run (engine.Trainer), done.json when finished
    finetune/<id>.json             one (checkpoint, task, seed) fine-tune: metrics or failure
    results.parquet                one row per (run, checkpoint, task, seed, metric)
    pretrain_metrics.parquet       the runs' logged metrics
    runs.parquet                   one row per pre-training run with its status
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from electra_ablate.config import BackboneConfig
from electra_ablate.data.batches import PackedBatches, column_matrix
from electra_ablate.data.glue import GLUE_TASKS, encode_glue, load_glue_task
from electra_ablate.data.pretraining import PretrainingData, prepare_pretraining
from electra_ablate.engine import Distributed, RunPlan, Trainer, kept_dir, plan_run
from electra_ablate.errors import AblateError
from electra_ablate.finetune import FinetuneRecipe, as_examples, finetune_task, supported_max_len
from electra_ablate.flops import training_flops
from electra_ablate.kept import load_kept
from electra_ablate.metrics import headline_metric
from electra_ablate.objective import Objective, build_objective, init_output_biases
from electra_ablate.results import write_table
from electra_ablate.spec import ObjectiveEntry, StudySpec
from electra_ablate.storage import atomic_write_text
from electra_ablate.tokens import Vocab

NON_METRIC_KEYS = {"train_examples", "epochs", "train_seconds", "wall_seconds"}


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]


def data_fingerprint(data: PretrainingData) -> str:
    """Identity of tokenizer and packed corpus; timings excluded (a rebuild is the same data)."""
    summary = {k: v for k, v in data.summary.items() if k != "seconds"}
    return config_hash({"tokenizer": data.tokenizer_dir.name, "packed": summary})


def data_vocab(data: PretrainingData) -> Vocab:
    """Token frequencies of the packed training set: the unigram distribution objectives use."""
    ids = column_matrix(data.train, "input_ids").ravel()
    counts = torch.from_numpy(np.bincount(ids, minlength=data.vocab_size)[: data.vocab_size])
    return Vocab(counts, data.special)


def resolve_device(requested: str) -> torch.device:
    if requested == "cuda" and not torch.cuda.is_available():
        raise AblateError("device 'cuda' requested but CUDA is not available")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def finetune_recipe(spec: StudySpec) -> FinetuneRecipe:
    caps = {**spec.finetune.recipe.get("train_caps", {}), **spec.finetune.caps}
    return FinetuneRecipe.model_validate({**spec.finetune.recipe, "train_caps": caps})


@dataclass
class RunUnit:
    """One pre-training run: an objective entry at one seed, with its resolved identity."""

    entry: ObjectiveEntry
    seed: int
    objective: Objective
    plan: RunPlan
    config: dict[str, Any]
    run_id: str
    run_dir: Path

    @property
    def done(self) -> bool:
        return (self.run_dir / "done.json").exists()


class Study:
    def __init__(self, spec: StudySpec, spec_path: Path, out_dir: Path, device: str | None = None):
        self.spec, self.spec_path, self.out_dir = spec, Path(spec_path), Path(out_dir)
        self.device = resolve_device(device or spec.device)
        self.recipe = finetune_recipe(spec)
        self.dist = Distributed.from_env(self.device)
        self.data: PretrainingData | None = None
        self.glue: dict[str, Any] = {}
        self.backbone: BackboneConfig | None = None
        self.vocab: Vocab | None = None

    # ---------------------------------------------------------------- plan
    def prepare(self, progress: bool = False) -> list[RunUnit]:
        spec = self.spec
        seq_len = spec.backbone_config().max_seq_len
        self.data = prepare_pretraining(
            spec.data, seq_len, spec_dir=spec.spec_dir, progress=progress
        )
        self.backbone = spec.backbone_config(vocab_size=self.data.vocab_size)
        self.vocab = data_vocab(self.data)
        for task in spec.finetune.tasks:  # a missing task fails now, before any compute is spent
            self.encoded_task(task)
        budget = self.budget_flops()
        units = []
        for entry in spec.objectives:
            for seed in spec.pretrain.seeds:
                units.append(self.unit(entry, seed, budget))
        return units

    def build(self, entry: ObjectiveEntry, seed: int) -> Objective:
        torch.manual_seed(seed)
        objective = build_objective(entry.name, self.backbone, entry.params, self.vocab)
        init_output_biases(objective, self.spec.pretrain.prior_bias)
        return objective

    def budget_flops(self) -> float:
        budget = self.spec.budget
        if budget.flops is not None:
            return budget.flops
        label = budget.steps_of or self.spec.objectives[0].display
        entry = next(o for o in self.spec.objectives if o.display == label)
        return training_flops(
            self.build(entry, 0),
            self.backbone.max_seq_len,
            self.spec.pretrain.batch_size,
            budget.steps,
            budget.convention,
        )

    def unit(self, entry: ObjectiveEntry, seed: int, budget: float) -> RunUnit:
        spec = self.spec
        objective = self.build(entry, seed)
        plan = plan_run(
            objective,
            budget,
            spec.budget.convention,
            spec.pretrain.batch_size,
            self.backbone.max_seq_len,
            spec.budget.checkpoints,
        )
        pretrain = spec.pretrain.model_dump(exclude={"seeds", "num_threads"})
        config = {
            "objective": entry.name,
            "params": objective.params.model_dump(),
            "backbone": self.backbone.model_dump(),
            "pretrain": pretrain,
            "budget_flops": budget,
            "convention": spec.budget.convention,
            "checkpoints": sorted(spec.budget.checkpoints),
            "data": data_fingerprint(self.data),
            "seed": seed,
        }
        run_id = config_hash(config)
        run_dir = self.out_dir / "pretrain" / f"{entry.display}-s{seed}-{run_id}"
        return RunUnit(entry, seed, objective, plan, config, run_id, run_dir)

    # ----------------------------------------------------------------- run
    def pretrain(self, unit: RunUnit, progress: bool, retry_failed: bool = True) -> dict[str, Any]:
        """Train (or resume) one run; a failure is recorded and returned, never raised.

        ``retry_failed=False`` returns a recorded failure as it is: the collecting pass after
        parallel workers must not train again what a worker just saw fail.
        """
        if unit.done:
            return json.loads((unit.run_dir / "done.json").read_text())
        failed = unit.run_dir / "failed.json"
        if not retry_failed and failed.exists():
            return json.loads(failed.read_text())
        unit.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(unit.run_dir / "run.json", json.dumps(unit.config, indent=2, default=str))
        (unit.run_dir / "failed.json").unlink(missing_ok=True)
        dist_ctx = self.dist
        per_rank = self.spec.pretrain.batch_size // dist_ctx.world_size
        train = PackedBatches(
            self.data.train, per_rank, unit.seed, dist_ctx.rank, dist_ctx.world_size
        )
        heldout = PackedBatches(self.data.heldout, per_rank, 0, dist_ctx.rank, dist_ctx.world_size)
        meta = {
            "objective": unit.entry.name,
            "label": unit.entry.display,
            "params": unit.objective.params.model_dump(),
            "run_id": unit.run_id,
            "seed": unit.seed,
        }
        trainer = Trainer(
            unit.objective,
            train,
            heldout,
            self.spec.pretrain,
            unit.plan,
            unit.run_dir,
            unit.seed,
            self.device,
            self.data.tokenizer_dir,
            meta,
            dist_ctx,
            progress,
        )
        try:
            summary = {"status": "done", "message": "", **trainer.train()}
        except (AblateError, RuntimeError, ValueError) as exc:
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if not isinstance(exc, AblateError):
                (unit.run_dir / "error.log").write_text(traceback.format_exc())
            summary = {"status": "failed", "message": message, "steps": trainer.step}
            atomic_write_text(unit.run_dir / "failed.json", json.dumps(summary))
            return summary
        atomic_write_text(unit.run_dir / "done.json", json.dumps(summary))
        return summary

    def finetune_jobs(self, unit: RunUnit) -> list[tuple[str, float, str, int]]:
        wanted = self.spec.finetune.checkpoints or [f for f, _ in unit.plan.checkpoints]
        jobs = []
        for fraction in sorted(wanted):
            if not (kept_dir(unit.run_dir, fraction) / "kept.json").exists():
                continue  # never reached (a failed run): nothing to fine-tune
            for task in self.spec.finetune.tasks:
                for seed in self.spec.finetune.seeds:
                    job = {
                        "run_id": unit.run_id,
                        "fraction": fraction,
                        "task": task,
                        "seed": seed,
                        "recipe": self.recipe.model_dump(),
                        "eval_cap": self.spec.finetune.eval_caps.get(task),
                        "glue": self.spec.data.glue,
                    }
                    jobs.append((config_hash(job), fraction, task, seed))
        return jobs

    def encoded_task(self, task: str) -> Any:
        cache = self.glue
        if task not in cache:
            if task not in GLUE_TASKS:
                raise AblateError(f"unknown GLUE task {task!r}; known: {', '.join(GLUE_TASKS)}")
            splits = load_glue_task(self.spec.data.glue, task, spec_dir=self.spec.spec_dir)
            max_len = supported_max_len(self.recipe, self.backbone)
            cache[task] = encode_glue(task, splits, self.data.tokenizer_dir, max_len=max_len)
        return cache[task]

    def finetune(self, unit: RunUnit, job: tuple[str, float, str, int]) -> dict:
        job_id, fraction, task, seed = job
        path = self.out_dir / "finetune" / f"{job_id}.json"
        if path.exists():
            return json.loads(path.read_text())
        encoded = self.encoded_task(task)
        evaluation = as_examples(encoded.validation)
        eval_cap = self.spec.finetune.eval_caps.get(task)
        if eval_cap is not None:
            evaluation = evaluation.capped(eval_cap)
        kept = load_kept(kept_dir(unit.run_dir, fraction))
        record = {
            "job_id": job_id,
            "run_id": unit.run_id,
            "fraction": fraction,
            "task": task,
            "seed": seed,
            "step": kept.meta["step"],
            "flops_paper": kept.meta["flops_paper"],
            "flops_standard": kept.meta["flops_standard"],
        }
        try:
            metrics = finetune_task(
                kept, GLUE_TASKS[task], encoded.train, evaluation, self.recipe, seed, self.device
            )
            record |= {"status": "done", "metrics": metrics}
        except AblateError as exc:
            record |= {"status": "failed", "message": str(exc)}
        atomic_write_text(path, json.dumps(record, indent=1))
        return record


def run_study(
    spec: StudySpec,
    spec_path: Path,
    out_dir: Path,
    device: str | None = None,
    progress: bool | None = None,
    log=print,
    workers: int = 1,
) -> bool:
    """Run (or finish) the whole study; True if every unit of work succeeded.

    With ``workers > 1`` the pre-training runs (each followed by its fine-tunes) are shared out
    to that many processes with ``threads // workers`` threads each: a small model does not
    keep two cores busy from one process, so on 2 cores two workers finish a study ~1.6x
    sooner. The sequential pass below then only collects what they wrote.
    """
    started = time.time()
    progress = sys.stderr.isatty() if progress is None else progress
    log = log if int(os.environ.get("RANK", "0")) == 0 else (lambda *a: None)
    if spec.pretrain.num_threads:
        torch.set_num_threads(spec.pretrain.num_threads)
    study = Study(spec, spec_path, out_dir, device)
    units = study.prepare(progress)
    parallel = workers > 1 and study.dist.world_size == 1 and len(units) > 1
    if parallel:
        run_in_workers(study, units, workers, log)
    runs, records = [], []
    for unit in units:
        what = f"{unit.entry.display} (seed {unit.seed}, {unit.plan.total_steps} steps)"
        if not parallel:
            log(f"pre-train {what}: {'finished earlier' if unit.done else 'running'}")
        summary = study.pretrain(unit, progress, retry_failed=not parallel)
        if summary["status"] == "failed" and not parallel:
            log(f"  FAILED: {summary['message']}")
        runs.append((unit, summary))
        if not study.dist.is_main:
            continue  # under torchrun, rank 0 alone fine-tunes and writes results
        records += [(unit, r) for r in finetune_unit(study, unit, log)]
    if not study.dist.is_main:
        return all(s["status"] == "done" for _, s in runs)
    write_tables(study, runs, records)
    finished = time.time()
    write_study_json(study, started, finished)
    ok = all(s["status"] == "done" for _, s in runs) and all(
        r["status"] == "done" for _, r in records
    )
    log(
        f"results in {out_dir / 'results.parquet'} ({finished - started:.0f} s)"
        + ("" if ok else "; some work FAILED (see runs.parquet)")
    )
    return ok


def finetune_unit(study: Study, unit: RunUnit, log=print) -> list[dict]:
    """Every fine-tune of one run's checkpoints (finished ones are read back, not redone)."""
    jobs = study.finetune_jobs(unit)
    todo = sum(not (study.out_dir / "finetune" / f"{j[0]}.json").exists() for j in jobs)
    if todo:
        log(
            f"  fine-tune {unit.entry.display}: {todo} of {len(jobs)} (checkpoint, task, seed) jobs"
        )
    records = []
    for job in jobs:
        record = study.finetune(unit, job)
        if record["status"] == "failed":
            log(f"  fine-tune {job[2]} seed {job[3]} at {job[1]:g} FAILED: {record['message']}")
        records.append(record)
    return records


# One Study per worker process, prepared once (cache hits) and reused for every unit it takes.
_worker_study: tuple[Study, list[RunUnit]] | None = None


def _init_worker(
    spec: StudySpec, spec_path: Path, out_dir: Path, device: str, threads: int
) -> None:
    global _worker_study
    _die_with_parent()
    torch.set_num_threads(threads)
    study = Study(spec, spec_path, out_dir, device)
    _worker_study = (study, study.prepare())


def _die_with_parent() -> None:
    """Ask Linux to end this worker when the ``ablate run`` that started it ends, however it
    ends: an orphan would go on writing into runs that a restarted study is resuming."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _work_on(index: int) -> tuple[int, dict[str, Any]]:
    study, units = _worker_study
    unit = units[index]
    what = f"{unit.entry.display} (seed {unit.seed}, {unit.plan.total_steps} steps)"
    print(f"pre-train {what}: {'finished earlier' if unit.done else 'running'}", flush=True)
    summary = study.pretrain(unit, progress=False)
    if summary["status"] == "done":
        finetune_unit(study, unit, lambda *a: print(*a, flush=True))
    return index, summary


def run_in_workers(study: Study, units: list[RunUnit], workers: int, log=print) -> None:
    """Pre-train and fine-tune the units in ``workers`` processes, most expensive first.

    Work is handed out as processes free up, so a slow objective does not hold the others.
    A worker that dies leaves resumable state; the caller's sequential pass finishes it.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    total_threads = study.spec.pretrain.num_threads or torch.get_num_threads()
    threads = max(1, total_threads // workers)
    todo = [i for i, u in enumerate(units) if not (u.done and all_finetuned(study, u))]
    todo.sort(key=lambda i: -units[i].plan.flops_at(units[i].plan.total_steps)["standard"])
    if not todo:
        return
    log(f"{len(todo)} pre-training runs on {workers} workers x {threads} threads")
    args = (study.spec, study.spec_path, study.out_dir, str(study.device), threads)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=args
    ) as pool:
        futures = [pool.submit(_work_on, i) for i in todo]
        for future in as_completed(futures):
            try:
                index, summary = future.result()
            except BrokenProcessPool:
                log("a worker process died; finishing its work in this process")
                return
            except Exception as exc:  # a bug in one unit must not lose the others' work
                log(f"a worker failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
                continue
            unit = units[index]
            if summary["status"] == "failed":
                log(f"pre-train {unit.entry.display} FAILED: {summary['message']}")
            else:
                log(f"pre-train {unit.entry.display} (seed {unit.seed}): done")


def all_finetuned(study: Study, unit: RunUnit) -> bool:
    return all(
        (study.out_dir / "finetune" / f"{job[0]}.json").exists()
        for job in study.finetune_jobs(unit)
    )


def write_tables(study: Study, runs: list, records: list) -> None:
    spec = study.spec
    rows = []
    for unit, record in records:
        if record["status"] != "done":
            continue
        metrics = record["metrics"]
        headline = headline_metric(record["task"])
        for metric, value in metrics.items():
            if metric in NON_METRIC_KEYS:
                continue
            rows.append(
                {
                    "study": spec.name,
                    "run_id": unit.run_id,
                    "objective": unit.entry.name,
                    "label": unit.entry.display,
                    "pretrain_seed": unit.seed,
                    "checkpoint_fraction": record["fraction"],
                    "pretrain_step": record["step"],
                    "flops_paper": record["flops_paper"],
                    "flops_standard": record["flops_standard"],
                    "task": record["task"],
                    "finetune_seed": record["seed"],
                    "metric": metric,
                    "headline": metric == headline,
                    "value": float(value),
                    "train_examples": int(metrics["train_examples"]),
                    "wall_s": float(metrics["wall_seconds"]),
                }
            )
    write_table(study.out_dir / "results.parquet", rows)

    run_rows, metric_frames = [], []
    for unit, summary in runs:
        run_rows.append(
            {
                "run_id": unit.run_id,
                "objective": unit.entry.name,
                "label": unit.entry.display,
                "pretrain_seed": unit.seed,
                "params_json": json.dumps(unit.entry.params, sort_keys=True),
                "status": summary["status"],
                "message": summary.get("message", ""),
                "steps": int(summary.get("steps", 0)),
                "flops_paper": float(summary.get("flops_paper", 0.0)),
                "flops_standard": float(summary.get("flops_standard", 0.0)),
                "wall_s": float(summary.get("wall_s", 0.0)),
            }
        )
        log_path = unit.run_dir / "metrics.jsonl"
        if log_path.exists() and log_path.stat().st_size:
            frame = pl.read_ndjson(log_path, infer_schema_length=None).with_columns(
                pl.lit(unit.run_id).alias("run_id"),
                pl.lit(unit.entry.name).alias("objective"),
                pl.lit(unit.entry.display).alias("label"),
                pl.lit(unit.seed).alias("pretrain_seed"),
            )
            metric_frames.append(frame)
    write_parquet(study.out_dir / "runs.parquet", pl.DataFrame(run_rows))
    if metric_frames:
        frame = pl.concat(metric_frames, how="diagonal_relaxed")
        write_parquet(study.out_dir / "pretrain_metrics.parquet", frame)


def write_parquet(path: Path, frame: pl.DataFrame) -> None:
    from electra_ablate.storage import atomic_file

    with atomic_file(path) as tmp:
        frame.write_parquet(tmp)


def write_study_json(study: Study, started: float, finished: float) -> None:
    spec = study.spec
    info = {
        "name": spec.name,
        "spec_path": str(study.spec_path),
        "spec": spec.model_dump(mode="json"),
        "backbone": study.backbone.model_dump(),
        "budget": spec.budget.model_dump(),
        "data": {**spec.data.model_dump(), **study.data.summary},
        "finetune": {**spec.finetune.model_dump(), "recipe": study.recipe.model_dump()},
        "git_commit": git_commit(),
        "machine": machine_description(study.device),
        "command": "ablate " + " ".join(sys.argv[1:]) if sys.argv else "",
        "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "finished": dt.datetime.fromtimestamp(finished, dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "wall_s": finished - started,
    }
    atomic_write_text(study.out_dir / "study.json", json.dumps(info, indent=2, default=str))


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine_description(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    return (
        f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}"
    )


def dry_run_rows(study: Study, units: list[RunUnit], time_steps: int = 2) -> list[dict[str, Any]]:
    """The plan of every run, with a time estimate from a few real steps of each objective."""
    rows = []
    for unit in units:
        seconds = time_a_step(study, unit, time_steps)
        flops = unit.plan.flops_at(unit.plan.total_steps)
        rows.append(
            {
                "label": unit.entry.display,
                "objective": unit.entry.name,
                "seed": unit.seed,
                "steps": "+".join(str(s) for s in unit.plan.stage_steps),
                "flops_paper": flops["paper"],
                "flops_standard": flops["standard"],
                "est_pretrain_min": seconds * unit.plan.total_steps / 60,
                "status": "done" if unit.done else "to do",
            }
        )
    return rows


def time_a_step(study: Study, unit: RunUnit, steps: int) -> float:
    batches = PackedBatches(study.data.train, study.spec.pretrain.batch_size, 0)
    objective = study.build(unit.entry, 0).to(study.device)
    optimizer = torch.optim.AdamW(objective.parameters(), lr=1e-5)
    times = []
    for i in range(steps + 1):
        batch = {k: v.to(study.device) for k, v in batches.batch(i).items()}
        t = time.perf_counter()
        loss = objective(batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t)
    return sorted(times[1:])[len(times[1:]) // 2]
