"""A study's finished work, checked before ``ablate run`` builds on it, and repaired.

Before anything trains, under the study's lock, every record is read back and every kept
encoder verified:

- a damaged record (``run.json``, ``done.json``, ``failed.json``, a fine-tune record) is named in
  one line and moved aside (``records.quarantine``), and its unit is redone: a run resumes from
  its newest state, a fine-tune runs again;
- a finished run whose ``metrics.jsonl`` cannot be trusted (a line that is not a row, steps that
  repeat as two writers leave them, emptied, cut short) is re-trained in a scratch folder from
  step 0, and the new curve replaces the damaged one; training is deterministic, so the kept
  weights come out the same and the run's fine-tunes stand (a difference would be named);
- a kept encoder that is missing or fails its checksum is rebuilt when something still needs it
  (a fine-tune not yet done, an export): from the run's training state at exactly its step, or
  by re-training the run to that step in a scratch folder. One whose fine-tunes are all on disk
  is named, not rebuilt (result packs leave weights out on purpose). A kept folder written
  before checksums existed is trusted on first use: if it loads cleanly, its manifest is
  written.

A rebuild never overwrites the run's finished files with different ones: only what is missing
or damaged is replaced, and re-training happens in ``<run>/rebuild/``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from electra_ablate.checkpoints.kept import LoadedKept, load_kept, require_kept_fraction, save_kept
from electra_ablate.checkpoints.kept_files import WEIGHTS_FILE, kept_problem
from electra_ablate.infra.errors import AblateError, InputError
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.locks import FolderLock
from electra_ablate.infra.manifest import MANIFEST, read_manifest
from electra_ablate.infra.storage import atomic_dir, atomic_write_bytes, atomic_write_text
from electra_ablate.infra.threads import torch_threads
from electra_ablate.pretraining.engine.distributed import Distributed
from electra_ablate.pretraining.engine.metrics_log import metrics_problem
from electra_ablate.pretraining.engine.state import verify_state
from electra_ablate.pretraining.engine.trainer import Trainer
from electra_ablate.spec import StudySpec, recorded_spec
from electra_ablate.study.building import (
    pretrain_run,
    run_meta,
    unfinished_jobs,
    write_baseline_kept,
    write_run_json,
)
from electra_ablate.study.context import Study
from electra_ablate.study.plan import plan_study
from electra_ablate.study.records import (
    FINETUNE_KEYS,
    quarantine,
    read_record,
    record_problem,
    warn,
)
from electra_ablate.study.units import (
    BASELINE_FRACTION,
    BaselineUnit,
    RunUnit,
    Unit,
    prepared,
)

Log = Callable[[str], None]


def check_study(study: Study, units: list[Unit], log: Log = print) -> None:
    """Read back every record and verify every kept encoder of ``units``; set aside and redo
    what is damaged (see the module's docstring). Call it holding the study's lock."""
    for unit in units:
        check_unit_records(unit)
        for job in study.jobs(unit, ready_only=False):
            read_record(study.layout.finetune_record(job.job_id), FINETUNE_KEYS)
    for unit in units:
        if isinstance(unit, RunUnit):
            check_curve(study, unit, log)
        if unit.done:
            check_kept(study, unit)


def check_unit_records(unit: Unit) -> None:
    layout = unit.layout
    read_record(layout.done)  # a damaged one is moved aside: the run resumes from its state
    read_record(layout.failed)
    if isinstance(unit, RunUnit):
        _, problem = record_problem(layout.run_json, ())
        if problem is not None:
            quarantine(layout.run_json, problem, redo="it is written again")
            write_run_json(unit)


# ------------------------------------------------------------------------- curves


def check_curve(study: Study, unit: RunUnit, log: Log) -> None:
    """Re-train a run whose training curve cannot be trusted, to rebuild it: a finished one in a
    scratch folder; an unfinished one from step 0 (its states go: they would resume a log that
    has lost its first rows)."""
    path = unit.layout.metrics
    problem = metrics_problem(path, finished=unit.done, last_step=unit.plan.total_steps)
    if problem is None:
        return
    if not unit.done:
        quarantine(path, problem, redo="the unfinished run starts again from step 0")
        shutil.rmtree(unit.layout.states, ignore_errors=True)
        return
    redo = "the run is re-trained to rebuild it"
    if path.exists():
        quarantine(path, problem, redo=redo)
    else:
        warn(f"{path}: {problem}; {redo}")
    rebuild_curve(study, unit, log)


def rebuild_curve(study: Study, unit: RunUnit, log: Log) -> None:
    layout = unit.layout
    scratch = layout.scratch_run("curve")
    log(f"  re-training {unit.label} (seed {unit.seed}) in {scratch.root} to rebuild its curve")
    summary = train_in_scratch(study, unit, scratch, stop_at=None)
    if summary["status"] != "done":
        warn(f"re-training {unit.label} to rebuild its curve failed: {summary['message']}")
        return
    atomic_write_bytes(layout.metrics, scratch.metrics.read_bytes())
    for fraction, _ in unit.plan.checkpoints:
        ours, rebuilt = layout.kept(fraction), scratch.kept(fraction)
        problem = kept_problem(ours)
        if problem is not None:
            install_kept(rebuilt, ours)
            warn(f"kept encoder {ours} was {described(problem)}: rebuilt by re-training")
        elif weights_digest(ours) not in (None, weights_digest(rebuilt)):
            warn(
                f"re-training {unit.label} gave other weights than {ours} (other threads or "
                "hardware?): the kept encoder and its fine-tunes stand; the rebuilt curve is "
                "of the re-trained weights"
            )
    done = read_record(layout.done) or {}
    done["curve_rebuilt"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    atomic_write_text(layout.done, json.dumps(done))
    remove_scratch(layout, scratch)


# -------------------------------------------------------------------- kept encoders


def check_kept(study: Study, unit: Unit) -> None:
    """Verify the unit's kept encoders: a legacy one is sealed, a damaged one rebuilt if a
    fine-tune still needs it, else named."""

    needed = {job.fraction for job in unfinished_jobs(study, study.jobs(unit))}
    for fraction in kept_fractions(unit):
        target = unit.kept_dir(fraction)
        problem = kept_problem(target)
        if problem is None and not (target / MANIFEST).exists():
            try:
                load_kept(target)  # loads cleanly: its manifest is written (trust on first use)
            except InputError as exc:
                problem = str(exc)
        if problem is None:
            continue
        if fraction in needed:
            rebuild_kept(study, unit, fraction, problem)
        else:
            warn(
                f"kept encoder {target} is {described(problem)}; its fine-tunes are all on "
                f"disk, so it is not rebuilt (`ablate export {target} --out DIR` rebuilds it)"
            )


def kept_fractions(unit: Unit) -> list[float]:
    """Every kept encoder the unit writes (not only those the spec fine-tunes); none for a
    reference scorer, which needs no encoder."""
    if isinstance(unit, RunUnit):
        return [fraction for fraction, _ in unit.plan.checkpoints]
    if isinstance(unit, BaselineUnit):
        return [BASELINE_FRACTION]
    return []


def load_study_kept(study: Study, unit: Unit, fraction: float) -> LoadedKept:
    """A study's kept encoder, verified; rebuilt first if it is missing or damaged."""
    target = unit.kept_dir(fraction)
    if (problem := kept_problem(target)) is not None:
        rebuild_kept(study, unit, fraction, problem)
    return load_kept(target)


def rebuild_kept(study: Study, unit: Unit, fraction: float, problem: str) -> None:
    """Write the unit's kept encoder at ``fraction`` again: the baseline's is seeded; a run's
    comes from its training state at exactly that step, or from re-training the run to that
    step in a scratch folder. One process at a time (the unit's lock)."""
    target = unit.kept_dir(fraction)
    lock = FolderLock(unit.layout.lock)
    lock.acquire(wait=True)
    try:
        if kept_problem(target) is None:
            return  # another process rebuilt it while this one waited
        before = weights_digest(target)
        if isinstance(unit, BaselineUnit):
            write_baseline_kept(unit)
            how = "written again (its initialisation is seeded)"
        else:
            step = dict(unit.plan.checkpoints)[fraction]
            state = unit.layout.state(step)
            if state.is_dir() and verify_state(state) is None:
                kept_from_state(study, unit, state, fraction)
                how = f"from its training state at step {step}"
            else:
                scratch = unit.layout.scratch_run(f"kept-{fraction:g}")
                warn(
                    f"kept encoder {target} is {described(problem)} and no training state is at "
                    f"its step {step}: re-training {unit.label} to that step in {scratch.root}"
                )
                seed_scratch(unit.layout, scratch, step)
                summary = train_in_scratch(study, unit, scratch, stop_at=step)
                if summary["status"] != "done":
                    raise AblateError(
                        f"cannot rebuild {target}: re-training failed: {summary['message']}"
                    )
                install_kept(scratch.kept(fraction), target)
                remove_scratch(unit.layout, scratch)
                how = f"by re-training the run to step {step}"
        warn(f"kept encoder {target} was {described(problem)}: rebuilt {how}")
        after = weights_digest(target)
        if before is not None and after != before:
            warn(
                f"the rebuilt {target / WEIGHTS_FILE} differs from the checksum of the original "
                "(other threads or hardware?); fine-tunes already on disk were made from the "
                "original"
            )
    finally:
        lock.release()


def kept_from_state(study: Study, unit: RunUnit, state: Path, fraction: float) -> None:
    """The kept encoder the run saved at ``state``'s step, from that state's weights."""
    from safetensors.torch import load_model

    objective = study.build(unit)
    counters = json.loads((state / "trainer.json").read_text())
    objective.enter_stage(counters["stage"])  # as resuming does: the stage sets what is kept
    load_model(objective, str(state / "model.safetensors"), device="cpu")
    step = counters["step"]
    flops = unit.plan.flops_at(step)
    meta = {
        **run_meta(unit, objective),
        "fraction": fraction,
        "step": step,
        "flops_paper": flops["paper"],
        "flops_standard": flops["standard"],
    }
    tokenizer_dir = prepared(unit).data.tokenizer_dir
    save_kept(unit.kept_dir(fraction), objective.kept_model(), tokenizer_dir, meta)


# ------------------------------------------------------------------------ scratch runs


def train_in_scratch(
    study: Study, unit: RunUnit, scratch: RunLayout, stop_at: int | None
) -> dict[str, Any]:
    """Train ``unit`` into ``scratch`` (to ``stop_at``) in this one process, with the thread
    count the run was trained with where it recorded one (the same arithmetic)."""
    done = read_record(unit.layout.done, set_aside=False) or {}
    threads = done.get("threads") if isinstance(done.get("threads"), int) else None
    with torch_threads(threads):
        objective = study.build(unit)
        run = pretrain_run(study, unit, objective, scratch, Distributed())
        trainer = Trainer(objective, run, study.device, Distributed(), "off")
        try:
            return {"status": "done", **trainer.train(stop_at)}
        except (AblateError, RuntimeError, ValueError) as exc:
            return {"status": "failed", "message": (str(exc).splitlines() or [""])[0]}


def seed_scratch(layout: RunLayout, scratch: RunLayout, step: int) -> None:
    """Start a scratch re-training from the run's newest verified state at or before ``step``
    (resuming is exact), unless the scratch folder has a state of its own already."""
    if list(scratch.states.glob("step-*")):
        return
    usable = [
        s
        for s in sorted(layout.states.glob("step-*"))
        if int(s.name.split("-")[1]) <= step and verify_state(s) is None
    ]
    if usable:
        scratch.states.mkdir(parents=True, exist_ok=True)
        shutil.copytree(usable[-1], scratch.states / usable[-1].name)


def install_kept(source: Path, target: Path) -> None:
    with atomic_dir(target) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)


def remove_scratch(layout: RunLayout, scratch: RunLayout) -> None:
    shutil.rmtree(scratch.root, ignore_errors=True)
    if layout.scratch.is_dir() and not any(layout.scratch.iterdir()):
        layout.scratch.rmdir()


def weights_digest(kept_dir: Path) -> str | None:
    """The kept weights' checksum as its manifest records it (None: no readable manifest)."""
    try:
        return (read_manifest(kept_dir) or {}).get(WEIGHTS_FILE)
    except ValueError:
        return None


def described(problem: str) -> str:
    return "missing" if problem == "missing" else f"corrupt ({problem})"


# ------------------------------------------------------------------ outside a study run


def repair_kept_folder(kept_dir: Path) -> bool:
    """Rebuild a missing or damaged kept encoder that belongs to a study folder (for ``ablate
    export`` and ``ablate finetune``): the study is read back from its ``study.json``. False
    when the folder is not a study's or is healthy; an error when it cannot be rebuilt, or when
    it names a fraction the run never kept (then the error lists those it keeps)."""
    kept_dir = Path(kept_dir)
    require_kept_fraction(kept_dir)  # a fraction the run never kept is not "corrupt"
    problem = kept_problem(kept_dir)
    run_root = kept_dir.parent.parent
    study_root = run_root.parent.parent
    info_path = study_root / "study.json"
    if problem is None or kept_dir.parent.name != "kept" or not info_path.is_file():
        return False
    try:
        info = json.loads(info_path.read_text())
        spec_dir = Path(info.get("spec_path") or ".").parent
        spec = StudySpec.model_validate({**recorded_spec(info["spec"]), "spec_dir": spec_dir})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"corrupt checkpoint {kept_dir}: {problem}, and it cannot be rebuilt: "
            f"{info_path} does not hold a study spec ({exc})"
        ) from None
    study = Study(spec, Path(info.get("spec_path") or "."), study_root, "cpu", reuse=False)
    planned = plan_study(study).units
    units = [u for u in planned if u.layout.root.resolve() == run_root.resolve()]
    fractions = [f for u in units for f in kept_fractions(u) if u.kept_dir(f) == kept_dir]
    if not units or not fractions:
        raise InputError(
            f"corrupt checkpoint {kept_dir}: {problem}, and it cannot be rebuilt: the spec in "
            f"{info_path} no longer has this run or checkpoint"
        )
    rebuild_kept(study, units[0], fractions[0], problem)
    return True
