"""``ablate run``: a study spec becomes pre-training runs, fine-tuning jobs and tidy tables.

Read top to bottom: plan the units; optionally share them out to worker processes; then one
sequential pass trains (or reads back) every unit and fine-tunes its checkpoints, which after
workers only collects what they wrote; finally the tables and ``study.json`` are rewritten.
With ``collect`` nothing is trained: the tables are written from the work finished so far, and
unfinished runs are listed as pending (a look at a long study while it runs, or the report of
one that was cut short).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from electra_ablate.engine.progress import progress_mode
from electra_ablate.spec import StudySpec
from electra_ablate.study.context import Study
from electra_ablate.study.execute import finetune_unit, reuse_identical, run_unit
from electra_ablate.study.provenance import write_study_json
from electra_ablate.study.units import RunUnit
from electra_ablate.study.workers import run_in_workers
from electra_ablate.threads import torch_threads

PENDING_SUMMARY = {"status": "pending", "message": "not finished yet"}
"""What the runs table says of a unit with no outcome on disk yet."""


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
) -> bool:
    """Run (or finish) the whole study; True if every unit of work succeeded."""
    with torch_threads(spec.pretrain.num_threads):  # the caller's count comes back after
        started = time.time()
        mode = progress_mode(progress)
        study = Study(spec, spec_path, out_dir, device, overrides, reuse)
        if not study.dist.is_main:
            log = lambda *a: None  # noqa: E731 - under torchrun, rank 0 speaks for all
        units = study.prepare(progress=mode == "live")
        if collect:
            return collect_finished(study, units, started, log)
        parallel = workers > 1 and study.dist.world_size == 1 and len(units) > 1
        if parallel:
            run_in_workers(study, units, workers, mode, log)

        summaries, records = [], []
        for unit in units:
            if not parallel and isinstance(unit, RunUnit):
                steps = f"{unit.plan.total_steps} steps"
                state = "finished earlier" if unit.done else "running"
                if not unit.done and study.reuse and (source := reuse_identical(study, unit)):
                    state = f"identical run reused from {source}"
                log(f"pre-train {unit.label} (seed {unit.seed}, {steps}): {state}")
            summary = run_unit(study, unit, mode, **({"retry_failed": False} if parallel else {}))
            if summary["status"] == "failed" and not parallel:
                log(f"  FAILED: {summary['message']}")
            summaries.append((unit, summary))
            if study.dist.is_main and summary["status"] == "done":
                records += [(unit, r) for r in finetune_unit(study, unit, log)]
        ok = all(s["status"] == "done" for _, s in summaries)
        ok = ok and all(r["status"] == "done" for _, r in records)
        study.dist.barrier()  # every rank has finished training before rank 0 writes
        if study.dist.is_main:
            from electra_ablate.study.tables import write_tables  # polars: only for the tables

            write_tables(study, summaries, records)
            finished = time.time()
            write_study_json(study, started, finished)
            log(
                f"results in {study.layout.results} ({finished - started:.0f} s)"
                + ("" if ok else "; some work FAILED (see runs.parquet)")
            )
        study.dist.close()
        return ok


def collect_finished(study: Study, units: list, started: float, log: Callable[[str], None]) -> bool:
    """Tables from finished units and their finished fine-tunes only; True if nothing is pending."""
    from electra_ablate.study.tables import write_tables

    summaries, records = [], []
    for unit in units:
        if not unit.done:
            failed = isinstance(unit, RunUnit) and unit.layout.failed.exists()
            summary = dict(PENDING_SUMMARY)
            summaries.append(
                (unit, json.loads(unit.layout.failed.read_text()) if failed else summary)
            )
            continue
        summaries.append((unit, run_unit(study, unit, "off")))
        records += [
            (unit, json.loads(path.read_text()))
            for job in study.jobs(unit)
            if (path := study.layout.finetune_record(job.job_id)).exists()
        ]
    write_tables(study, summaries, records)
    write_study_json(study, started, time.time())
    pending = sum(s["status"] == "pending" for _, s in summaries)
    log(
        f"results of {len(summaries) - pending} finished unit(s) in {study.layout.results}"
        + (f"; {pending} pending" if pending else "")
    )
    return pending == 0
