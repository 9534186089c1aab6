"""Finished runs shared between studies in one parent folder, and why a near one is not.

A unit's id is a hash of everything that changes its result (``run.json`` holds what it is a
hash of), so a finished run with the same id in a study beside this one *is* this run:
``reuse_identical`` copies it instead of training again. That is how an ablation shares its
baseline: a second study that adds one arm next to an earlier study's BERT trains only the arm.

The hash is all or nothing, so a run that differs by one field is trained again without a
word, however small the difference (two budgets given in steps of different objectives can
land 0.1% apart in FLOPs). ``near_run`` finds, for a unit about to be trained, the finished
run of the same objective and seed beside it that differs least, and names the first field
that differs with both values: what ``ablate run --dry-run`` prints so that a researcher can
make the two specs agree (for the budget: the same ``budget.flops`` in both).

An id names no code, so a run or evaluation beside with this id whose recorded code differs from
the code now (``electra_ablate.study.code_change``) is not this one: it is never copied, and the
dry run says so. One that records no code (made before code was recorded) is copied.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra_ablate.checkpoints.kept_files import kept_problem, weights_elsewhere
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.storage import atomic_dir, atomic_write_text
from electra_ablate.study.code_change import changed_since, job_code, job_difference
from electra_ablate.study.context import Study
from electra_ablate.study.records import FINETUNE_KEYS, record_problem, warn
from electra_ablate.study.units import BASELINE_FRACTION, RunUnit, Unit

REUSED_MESSAGE = "identical run reused from"
"""The start of a reused run's message in its ``done.json`` (and ``runs.parquet``): a report
counts reused runs by it."""

NOT_REUSED = shutil.ignore_patterns(
    "states", "rebuild", "*.lock", "*.corrupt-*", "tracking.json"
)  # what the other study's trackers were sent is that study's

HOW_TO_SHARE = {
    "budget_flops": "set `budget.flops: {there!r}` in this spec (a budget in steps is "
    "converted by each study's own objectives, so two budgets in steps rarely agree)",
    "data": "give both specs the same `data` settings (corpus, tokenizer, packing)",
    "checkpoints": "give both specs the same `budget.checkpoints`",
    "convention": "give both specs the same `budget.convention`",
}
"""What to change so that two runs differing at an identity field share one run, where the
field's name alone does not say it (``run.json`` keys that are not spec keys); ``{there!r}``
is the other run's value."""


def sibling_studies(study: Study) -> list[Path]:
    """The other study folders in this study's parent folder, sorted by name."""
    own, parent = study.layout.root.resolve(), study.layout.root.parent
    if not parent.is_dir():  # the first study of a fresh `runs/`: nothing beside it
        return []
    return sorted(p for p in parent.iterdir() if p.is_dir() and p.resolve() != own)


def reuse_identical(study: Study, unit: Unit) -> str | None:
    """Copy a finished unit with the same identity from a study folder beside this one and
    return that folder's name (None if there is none).

    Copying it (without its resumable states) is a cache hit, not an approximation. Its
    ``done.json`` says where it came from. A source whose kept encoders do not verify (missing,
    or failing their checksums) is never copied: it is named and passed over, and the unit is
    trained here instead; only a kept folder that no evaluation still to do here reads may hold
    its ``kept.json`` alone (``reuse_problem``).
    """
    for study_dir, found in identical_finished(study, unit):
        elsewhere = any(weights_elsewhere(found.kept(f)) for f in kept_fractions(unit))
        needed = needed_fractions(study, unit) if elsewhere else None
        if (problem := reuse_problem(unit, found, needed)) is not None:
            warn(f"not reusing {found.root}: {problem}")
            continue
        with atomic_dir(unit.layout.root) as tmp:
            shutil.copytree(found.root, tmp, dirs_exist_ok=True, ignore=NOT_REUSED)
            if isinstance(unit, RunUnit):
                done = json.loads((tmp / "done.json").read_text())
                done |= {"message": f"{REUSED_MESSAGE} {study_dir.name}"}
                atomic_write_text(tmp / "done.json", json.dumps(done))
        return study_dir.name
    return None


def identical_finished(study: Study, unit: Unit) -> Iterator[tuple[Path, RunLayout]]:
    """Each finished unit with ``unit``'s id in a study beside this one, with its study folder,
    studies by name, that was made by the code now (or records none: ``code_change``); its
    encoders are not checked here (``reuse_problem``)."""
    for study_dir, found in same_id_finished(study, unit):
        if changed_since(unit, found) is None:
            yield study_dir, found


def same_id_finished(study: Study, unit: Unit) -> Iterator[tuple[Path, RunLayout]]:
    """Each finished unit with ``unit``'s id in a study beside this one, whatever its code."""
    pattern = ("pretrain/*-" if isinstance(unit, RunUnit) else "baseline/*-") + unit.run_id
    for study_dir in sibling_studies(study):
        for source in sorted(study_dir.glob(pattern)):
            found = RunLayout(source)
            finished = found.done if isinstance(unit, RunUnit) else found.kept(BASELINE_FRACTION)
            if finished.exists():
                yield study_dir, found


def reusable_from(study: Study, unit: Unit) -> str | None:
    """The study beside this one whose identical finished unit ``reuse_identical`` would copy,
    without copying it or checking its encoders (what the dry run shows)."""
    return next((d.name for d, _ in identical_finished(study, unit)), None)


def reuse_problem(unit: Unit, source: RunLayout, needed: set[float] | None = None) -> str | None:
    """Why a finished unit in another study must not be copied, or None: a record that does not
    read, or a kept encoder that is missing or fails its checksum. Where ``needed`` names the
    fractions that evaluations still to do here read, a kept folder outside it may hold its
    ``kept.json`` alone, its weights elsewhere (as a pack leaves it, or as a GPU session sends
    back a cut run with its final encoder alone: ``electra_ablate.scaleout.kept_parts``)."""
    if isinstance(unit, RunUnit):
        _, problem = record_problem(source.done, ("status",))
        if problem is not None:
            return f"{source.done.name} is damaged ({problem})"
    for fraction in kept_fractions(unit):
        if (
            needed is not None
            and fraction not in needed
            and weights_elsewhere(source.kept(fraction))
        ):
            continue  # nothing here reads it: its fine-tunes are all on record
        if (problem := kept_problem(source.kept(fraction))) is not None:
            what = "missing" if problem == "missing" else f"corrupt ({problem})"
            return f"its kept encoder {source.kept(fraction)} is {what}"
    return None


def kept_fractions(unit: Unit) -> list[float]:
    """The fractions a finished unit keeps encoders at (a baseline's one at 0)."""
    return [f for f, _ in unit.plan.checkpoints] if isinstance(unit, RunUnit) else [0.0]


def needed_fractions(study: Study, unit: Unit) -> set[float]:
    """The fractions of ``unit`` whose evaluations have no record here and no finished one in a
    study beside: the kept encoders a copied run must bring."""
    return {
        job.fraction
        for job in study.jobs(unit, ready_only=False)
        if not study.layout.finetune_record(job.job_id).exists()
        and finished_record(study, job.job_id, job_code(unit, job)) is None
    }


def finished_record(
    study: Study, job_id: str, code: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """A finished evaluation with this id in a study beside this one (the first by name), or
    None; a damaged record is passed over, and so is one whose recorded code differs from
    ``code`` (``code_change.job_code``: the code it would be made with here). The same id is the
    same checkpoint, task and seed. Asked only where this study has no record of it, so its own
    folder never matches."""
    for other in sorted(study.layout.root.parent.glob(f"*/finetune/{job_id}.json")):
        record, _ = record_problem(other, FINETUNE_KEYS)
        if record and record["status"] == "done":
            if code is not None and job_difference(record.get("code"), code) is not None:
                continue
            return record
    return None


@dataclass(frozen=True)
class NearRun:
    """A finished run beside this study that differs from a unit at ``field`` (dotted, as in
    ``run.json``), first of ``differences`` fields."""

    study: str
    folder: str
    field: str
    here: Any
    there: Any
    differences: int

    def describe(self) -> str:
        """``not reused from <study>/<folder>: budget_flops is 7.871e+10 here, 7.88e+10
        there (1 field differs); to share it, …``; for the same id made by other code, what
        changed (``field`` is ``code``)."""
        if self.field == "code":
            return (
                f"not reused from {self.study}/{self.folder}: the same run, but made by other "
                f"code ({self.there}): trained here"
            )
        others = "" if self.differences == 1 else f", and {self.differences - 1} more field(s)"
        how = HOW_TO_SHARE.get(self.field.split(".")[0], f"make `{self.field}` agree")
        how = how.format(there=self.there)
        return (
            f"not reused from {self.study}/{self.folder}: {self.field} is "
            f"{shown(self.here, self.there)} here, {shown(self.there, self.here)} there{others}; "
            f"to share it, {how}"
        )


def near_run(study: Study, unit: RunUnit) -> NearRun | None:
    """The finished run of ``unit``'s objective and seed in a study beside this one that
    differs from it in the fewest identity fields (ties: the first study by name), or None
    when there is none or an identical one is there (that one is reused)."""
    best: NearRun | None = None
    for study_dir in sibling_studies(study):
        for folder in sorted(study_dir.glob("pretrain/*-*")):
            run = RunLayout(folder)
            config = read_config(run)
            if config is None or not run.done.exists():
                continue
            if config.get("objective") != unit.objective or config.get("seed") != unit.seed:
                continue
            diff = differing_fields(unit.config, config)
            if not diff:  # identical: reused, nothing to explain, unless its code differs
                if (what := changed_since(unit, run)) is None:
                    return None
                return NearRun(study_dir.name, folder.name, "code", None, what, 0)
            if best is None or len(diff) < best.differences:
                field, here, there = diff[0]
                best = NearRun(study_dir.name, folder.name, field, here, there, len(diff))
    return best


def read_config(layout: RunLayout) -> dict[str, Any] | None:
    """A finished run's ``run.json`` (what its id is a hash of), or None if it does not read."""
    try:
        config = json.loads(layout.run_json.read_text())
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def differing_fields(here: dict[str, Any], there: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Every leaf field where two identities differ, in ``here``'s order (then fields only
    ``there`` has), as (dotted name, value here, value there); a missing side is None. Both are
    compared as their JSON reads back, so a tuple here equals a list there."""
    here, there = json.loads(json.dumps(here, default=str)), json.loads(json.dumps(there))
    out: list[tuple[str, Any, Any]] = []
    for key in [*here, *(k for k in there if k not in here)]:
        a, b = here.get(key), there.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [(f"{key}.{f}", x, y) for f, x, y in differing_fields(a, b)]
        elif a != b:
            out.append((key, a, b))
    return out


def shown(value: Any, other: Any) -> str:
    """A value as the line prints it: a float with as many digits as it takes to tell it from
    ``other`` (7.871e+10 against 7.88e+10, never two equal-looking numbers)."""
    if isinstance(value, float) and isinstance(other, (int, float)):
        for digits in range(4, 18):
            if f"{value:.{digits}g}" != f"{other:.{digits}g}":
                return f"{value:.{digits}g}"
        return repr(value)
    return "absent" if value is None else json.dumps(value)
