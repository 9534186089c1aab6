"""Finished work whose code changed since it finished: redone by default, never reused silently.

A unit's id names no code (``electra_ablate.infra.identity``), so each unit records the code that
computed it beside its id (``electra_ablate.infra.code_identity``): a run or a baseline in its
``code.json`` (``RunLayout.code``, written when it starts), an evaluation in its record's
``code`` (its task's code, and the code its encoder's unit recorded). Before ``ablate run``
builds on finished work it compares each record with the code importable now
(``settle_code_changes``): a unit or evaluation whose code differs is moved to the study's
``superseded/<UTC time>/`` folder (laid out as the study is) with one line saying why and where,
and is done again. With ``--keep-code-changes`` it is kept and used, and ``study.json`` names it
(``code_changes``), as the report then does. Work finished before code was recorded has nothing
to compare: it is kept and counted (``code_unrecorded``), said in one line.

Studies beside this one are held to the same rule: ``electra_ablate.study.reuse`` copies no run
or evaluation whose recorded code differs from the code now.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra_ablate.evaluation.run import EvaluationJob
from electra_ablate.evaluation.task import family_of, get_task
from electra_ablate.infra.code_identity import code_difference, code_fingerprint
from electra_ablate.infra.layout import RunLayout, StudyLayout
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.pretraining.registry import get_objective
from electra_ablate.study.context import Study
from electra_ablate.study.records import FINETUNE_KEYS, record_problem, warn
from electra_ablate.study.units import BaselineUnit, ReferenceUnit, RunUnit, Unit

KEEP_OPTION = "--keep-code-changes"


def unit_code(unit: Unit) -> dict[str, Any] | None:
    """The code that would compute ``unit`` now: a run's objective (its module, or its plugin
    package) and the project's version; a baseline's fresh encoder, the version alone; a
    reference trains nothing (its task's code is in its evaluations)."""
    if isinstance(unit, RunUnit):
        return code_fingerprint(get_objective(unit.entry.name))
    if isinstance(unit, BaselineUnit):
        return code_fingerprint()
    return None


def recorded_code(layout: RunLayout) -> dict[str, Any] | None:
    """The code a unit's folder records (``code.json``), or None where it records none (made
    before code was recorded) or the record does not read."""
    try:
        code = json.loads(layout.code.read_text())
    except (OSError, ValueError):
        return None
    return code if isinstance(code, dict) else None


def changed_since(unit: Unit, layout: RunLayout) -> str | None:
    """What changed between the code a unit folder ``layout`` records and the code that would
    compute ``unit`` now, in words; None where they agree, or where the folder records none
    (made before code was recorded: nothing to compare)."""
    recorded = recorded_code(layout)
    return None if recorded is None else code_difference(recorded, unit_code(unit) or {})


def write_unit_code(unit: Unit) -> None:
    """Record the code computing ``unit`` as it starts, unless it is recorded already: a run
    resumed under ``--keep-code-changes`` keeps naming the code it started with."""
    code = unit_code(unit)
    if code is None or unit.layout.code.exists():
        return
    unit.layout.root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(unit.layout.code, json.dumps(code, indent=1))


def task_code(name: str) -> dict[str, Any]:
    """The code of a task: its class's and its family's (modules, or plugin package)."""
    task = get_task(name)
    return code_fingerprint(type(task), type(family_of(task)))


def job_code(unit: Unit, job: EvaluationJob) -> dict[str, Any]:
    """What an evaluation of ``job`` records as its code: its task's code now, and the code its
    encoder was made with (``encoder_code``)."""
    return {"task": task_code(job.task), "encoder": encoder_code(unit)}


def encoder_code(unit: Unit) -> dict[str, Any] | None:
    """The code a unit's encoder was made with: what its folder records once it is done, what
    it will record while it is still to do; None for a reference scorer (no encoder), or a unit
    that records none."""
    if isinstance(unit, ReferenceUnit):
        return None
    return recorded_code(unit.layout) if unit.done else unit_code(unit)


def job_difference(recorded: Any, now: dict[str, Any]) -> str | None:
    """What differs between an evaluation's recorded ``code`` and ``now`` (``job_code``), in
    words, or None when they agree. A record with no ``code`` (made before it was recorded)
    is not compared: None."""
    if not isinstance(recorded, dict):
        return None
    parts = []
    for key, what in (("task", "task"), ("encoder", "encoder")):
        old, new = recorded.get(key), now.get(key)
        if old == new:
            continue
        if old is None or new is None:
            parts.append(f"{what}: code not recorded {'then' if old is None else 'now'}")
        elif (text := code_difference(old, new)) is not None:
            parts.append(f"{what}: {text}")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class CodeChange:
    """A finished unit (``job`` None) or evaluation whose recorded code differs from now."""

    unit: Unit
    job: EvaluationJob | None
    what: str

    @property
    def label(self) -> str:
        """``span_mlm (seed 0)``, or ``span_mlm (seed 0) on rte, seed 1, at 0.5``."""
        unit = f"{self.unit.label} (seed {self.unit.seed})"
        if self.job is None:
            return unit
        return f"{unit} on {self.job.task}, seed {self.job.seed}, at {self.job.fraction:g}"

    def line(self, where: Path) -> str:
        """``span_mlm (seed 0): code changed since runs/x finished (…)``."""
        return f"{self.label}: code changed since {where} finished ({self.what})"

    def as_record(self) -> dict[str, Any]:
        """What ``study.json`` keeps of it (``code_changes``)."""
        return {
            "label": self.unit.label,
            "seed": self.unit.seed,
            "run_id": self.unit.run_id,
            "job_id": self.job.job_id if self.job else None,
            "task": self.job.task if self.job else None,
            "what": self.what,
        }


def code_changes(study: Study, units: list[Unit]) -> tuple[list[CodeChange], int]:
    """Every finished unit and evaluation of ``units`` in this study whose recorded code differs
    from the code now (a changed unit stands for its evaluations too), and how many finished
    ones record no code. Reads only."""
    changes: list[CodeChange] = []
    unrecorded = 0
    tasks: dict[str, dict[str, Any]] = {}  # each task's code, read once
    for unit in units:
        if not isinstance(unit, ReferenceUnit) and started(unit.layout):
            recorded = recorded_code(unit.layout)
            if recorded is None:
                unrecorded += unit.done
            elif (what := code_difference(recorded, unit_code(unit) or {})) is not None:
                changes.append(CodeChange(unit, None, what))
                continue
        encoder = encoder_code(unit)
        for job in study.jobs(unit, ready_only=False):
            record, _ = record_problem(study.layout.finetune_record(job.job_id), FINETUNE_KEYS)
            if record is None:
                continue
            if not isinstance(record.get("code"), dict):
                unrecorded += 1
                continue
            now = {"task": tasks.get(job.task) or task_code(job.task), "encoder": encoder}
            tasks[job.task] = now["task"]
            if (what := job_difference(record["code"], now)) is not None:
                changes.append(CodeChange(unit, job, what))
    return changes, unrecorded


def started(layout: RunLayout) -> bool:
    """Whether a unit's folder holds work: finished, or states to resume from."""
    return layout.done.exists() or layout.states.exists() or layout.kept_root.exists()


def unrecorded_line(count: int) -> str:
    """The one line said of work that records no code."""
    return (
        f"{count} finished unit(s) or evaluation(s) here record no code (finished before "
        "electra-ablate recorded it): reused without a code check"
    )


def settle_code_changes(
    study: Study, units: list[Unit], move: bool = True, say: Callable[[str], None] = warn
) -> None:
    """Act on ``code_changes`` before a run builds on finished work: move each changed unit
    (with its evaluations) or evaluation to ``superseded/``, saying why and where, so that it
    is done again; or, with ``study.keep_code_changes`` or ``move`` False (a ``--collect``,
    which only reads), keep it and name it. What is kept is set on the study for
    ``study.json`` (``code_changes``, ``code_unrecorded``)."""
    changes, unrecorded = code_changes(study, units)
    keep = study.keep_code_changes or not move
    target: StudyLayout | None = None
    for change in changes:
        line = change.line(study.layout.root)
        if keep:
            kept = f"reported as it is (without {KEEP_OPTION}, `ablate run` re-runs it)"
            how = f"kept ({KEEP_OPTION})" if move else kept
            say(f"{line}: {how}")
            continue
        target = target or superseded_folder(study.layout)
        moved = supersede(study, change, target)
        say(f"{line}: re-run; the old one moved to {moved}")
    study.code_changes = [c.as_record() for c in changes] if keep else []
    study.code_unrecorded = unrecorded
    if unrecorded:
        say(unrecorded_line(unrecorded))


def superseded_folder(layout: StudyLayout) -> StudyLayout:
    """A new ``superseded/<UTC time>/`` folder of the study, laid out as the study is."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder, n = layout.superseded_dir / stamp, 1
    while folder.exists():
        n += 1
        folder = layout.superseded_dir / f"{stamp}-{n}"
    return StudyLayout(folder)


def supersede(study: Study, change: CodeChange, target: StudyLayout) -> Path:
    """Move a changed unit's folder and its evaluations' records (or one evaluation's record)
    to the same places under ``target``; return where the unit or record went."""
    jobs = study.jobs(change.unit, ready_only=False) if change.job is None else [change.job]
    moved = None
    if change.job is None:
        source = change.unit.layout.root
        moved = target.root / source.relative_to(study.layout.root)
        moved.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, moved)
    for job in jobs:
        record = study.layout.finetune_record(job.job_id)
        if record.exists():
            target.finetune_dir.mkdir(parents=True, exist_ok=True)
            os.replace(record, target.finetune_record(job.job_id))
    return moved or target.finetune_record(change.job.job_id)
