"""``study.json``: what ran, on what, where, when and with which resolved spec, so a report
can say all of it and a reader can re-run it; and which data (``data_fingerprints``) and
evaluation data (``evaluation_fingerprints``) its results were made with, so that a merge never
joins results made with other data (``electra_ablate.study.data_identity``); and finished work
kept although its code changed since (``code_changes``, ``--keep-code-changes``) or recording no
code (``code_unrecorded``: ``electra_ablate.study.code_change``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch

from electra_ablate.infra.layout import PLAN_FILE
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.study.context import Study
from electra_ablate.study.data_identity import current_evaluation_fingerprints
from electra_ablate.study.plan import StudyPlan
from electra_ablate.study.units import BaselineUnit, ReferenceUnit, RunUnit, Unit


def write_study_json(study: Study, plan: StudyPlan, started: float, finished: float) -> None:
    spec = study.spec
    variants = spec.variant_specs()
    base = variants[0][1]
    info = {
        "name": spec.name,
        "spec_path": str(study.spec_path),
        "spec": spec.model_dump(mode="json"),
        "overrides": study.overrides,
        "variants": {
            label: variant.model_dump(mode="json") for label, variant in variants if label
        },
        "backbone": plan.base.backbone.model_dump(),
        "pretrain": base.pretrain.model_dump(mode="json"),
        "budget": spec.budget.model_dump(),
        "data": {**spec.data.model_dump(), **plan.base.data.summary},
        "data_fingerprints": sorted({data.fingerprint for _, _, data in plan.variants}),
        "evaluation_fingerprints": current_evaluation_fingerprints(plan),
        **{
            key: (
                {
                    **block.model_dump(mode="json"),
                    "recipe": block.resolved_recipe().model_dump(mode="json"),
                }
                if block
                else None
            )
            for key, block in (("finetune", base.finetune), ("evaluation", base.evaluation))
        },
        "git_commit": git_commit(),
        "machine": machine_description(study.device),
        "command": "ablate " + " ".join(sys.argv[1:]) if sys.argv else "",
        "started": iso(started),
        "finished": iso(finished),
        "wall_s": finished - started,
    }
    if study.code_changes:  # kept under --keep-code-changes (``code_change``): the report says
        info["code_changes"] = study.code_changes
    if study.code_unrecorded:
        info["code_unrecorded"] = study.code_unrecorded
    atomic_write_text(study.layout.study_json, json.dumps(info, indent=2, default=str))


def write_plan(study: Study, units: list[Unit]) -> None:
    """``plan.json``: every unit the spec plans and its evaluations, written when a run plans
    them, so ``ablate status`` counts the work still to do before the first tables exist."""
    planned = [
        {
            "kind": "reference"
            if isinstance(unit, ReferenceUnit)
            else "baseline"
            if isinstance(unit, BaselineUnit)
            else "run",
            "label": unit.label,
            "seed": unit.seed if isinstance(unit, RunUnit) else None,
            "run_id": unit.run_id,
            "jobs": len(study.jobs(unit, ready_only=False)),
        }
        for unit in units
    ]
    plan = {"name": study.spec.name, "units": planned}
    atomic_write_text(study.layout.root / PLAN_FILE, json.dumps(plan, indent=2))


def iso(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.timezone.utc).isoformat(timespec="seconds")


def git_commit() -> str | None:
    """The commit of the code that ran (looked up where this package lives, not in the current
    folder), with ``+dirty`` when it had uncommitted changes."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty=+dirty", "--abbrev=7", "--match=NONE"],
            cwd=here,
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
