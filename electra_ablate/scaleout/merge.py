"""``ablate merge``: packs and folders of one study combined into one study folder.

A study run on several machines (shards, an offline GPU node, a cluster) comes back as packs
(``electra_ablate.scaleout.packs``) or folders. Every unit of work (a pre-training run, a
baseline, a fine-tune) is named by a hash of what changes its result, so merging is a merge by
identity:

- a unit that several sources hold with the same content is kept once;
- a unit held twice with different finished content is a conflict: nothing is merged, and
  one line names the unit and both sources;
- a finished copy wins over an unfinished or failed one, and finished work already in the
  target folder is never replaced; a failed unit travels when no source finished it, an
  unfinished one never does (its training states stay behind, so it could not resume);
- a pack or folder of another spec (``packs.spec_fingerprint``) is refused.

What "the same content" means. A unit's id leaves out how it ran (``identity.IDENTITY_EXCLUDED``:
thread count, precision, compile mode), so its records are compared without the fields that say
so (``NOT_COMPARED``: those, as the records name them, and the timings). Those fields change
rounding: the micro preset's electra run, 20 to 40 steps on 1 thread and on 2, gave curves equal
to at most 2.6e-6 relative (AUC 0.64206 vs 0.64206) and fine-tunes of its checkpoint 0.06 to 1.1%
apart (STS-B Pearson -8.9993 vs -9.0045, Spearman 3.40 vs 3.44; RTE accuracy equal), while the
counts (steps, FLOPs, checkpoint steps, examples) were exact. No tolerance tells that rounding
from a changed result, so the rule is: two finished copies computed the same way (one machine,
as each source's ``study.json`` records it, and the same running fields in the run's
``done.json``) must agree exactly; two computed otherwise must agree on everything but what
training measured (the curves' values beside their axes, the fine-tunes' metrics), which
rounding moves. They are then one unit: the target's copy (or the first source's) is kept, and the
summary counts it as an equal copy. A conflict between copies computed otherwise shows in their
counts, not in their metrics.

The study folder is locked first (made if new), like ``ablate run`` locks it, so two merges into
one folder take turns (``--wait``) or the second is refused (exit 2); every check then runs
before the first write. ``study.json`` is written first, so that a merge stopped at any point
(a full disk, Ctrl-C) leaves a study folder that the same command completes: its units are then
held ones. The units follow, each atomically, and the tables are rebuilt from the records as
``ablate run --collect`` builds them, without the data: the spec in ``study.json`` says which
units and fine-tunes make the study, the runs tables name its units, and the records say the
rest. ``ablate report`` works on the result at once. ``study.json``'s ``merged_from`` names each
source once (a merged source by the sources it was merged from), with its own provenance, and
``schedule.jsonl`` holds every source's timeline lines, each line once (``merged_schedule``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

from electra_ablate.evaluation.task import RECORD_FIELDS, get_task
from electra_ablate.infra.archives import Limits
from electra_ablate.infra.errors import InputError, MixedData
from electra_ablate.infra.identity import IDENTITY_EXCLUDED
from electra_ablate.infra.layout import KEPT_META, REPORT_FILE, RunLayout, StudyLayout
from electra_ablate.infra.locks import lock_study
from electra_ablate.infra.storage import atomic_dir, atomic_write_bytes, atomic_write_text
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.scaleout.packs import (
    PACK_LIMITS,
    RUN_RECORD_KEYS,
    check_same_evaluation_data,
    data_fingerprints,
    first_difference,
    read_pack,
    read_study_json,
    select_files,
    spec_fingerprint,
    study_identity,
)
from electra_ablate.scaleout.runner import PENDING_SUMMARY
from electra_ablate.spec import parse_spec, recorded_spec
from electra_ablate.study.context import Study
from electra_ablate.study.execute import GATE_KEYS, run_unit
from electra_ablate.study.tables import write_tables
from electra_ablate.study.units import BASELINE_LABEL, BaselineUnit, RunUnit, Unit, variant_label

VOLATILE = frozenset(
    {
        "wall_s",
        "wall_seconds",
        "train_seconds",
        "tokens_per_s",
        "message",
        "first_step_s",
        "started_at",
        *GATE_KEYS,
    }
)
"""Record keys that say how long a unit took, or where it was copied from, not what it computed:
the same unit run on two machines differs only here, and is the same unit."""

RECORDED_AS = {
    "num_threads": ("threads",),
    "compile": ("compiled", "compile_mode", "compile_error"),
}
"""How ``done.json`` names the spec's fields that say how a run ran (the others keep theirs)."""

RUNNING = frozenset(name for f in IDENTITY_EXCLUDED for name in RECORDED_AS.get(f, (f,)))
"""Record keys that say how a unit ran (threads, precision, compile mode): not in its id."""

NOT_COMPARED = VOLATILE | RUNNING
"""Record keys two copies of one unit may differ in."""

CURVE_AXES = frozenset({"step", "stage", "split", "lr", "flops_paper", "flops_standard"})
"""What a curve's row is at (the schedule says it); its other values are measured."""

FINISHED, FAILED, UNFINISHED = "done", "failed", "unfinished"

FINETUNE_SLOT_KEYS = frozenset({"run_id", "fraction", "task", "seed"})
"""What a fine-tune record says it is: which run's checkpoint, on which task, with which seed."""

REL = StudyLayout(Path())  # the names inside a study folder, relative to its root

Slot = tuple[str, float, str, int]  # (run id, checkpoint fraction, task, fine-tuning seed)


@dataclass
class Source:
    """A pack or a study folder, as the files a pack of it carries."""

    name: str  # how messages name it
    files: dict[str, bytes]  # path inside the study folder -> content
    study: dict[str, Any]  # its study.json
    origin: dict[str, Any] = field(default_factory=dict)  # where it came from, for study.json

    @cached_property
    def done_by_run(self) -> dict[str, dict[str, Any]]:
        """Each finished pre-training run's ``done.json``, by run id (how it ran)."""
        done = RunLayout(Path()).done.name
        found = {}
        for name, data in self.files.items():
            parts = PurePosixPath(name).parts
            if len(parts) == 3 and parts[0] == REL.pretrain_dir.name and parts[2] == done:
                found[parts[1].rsplit("-", 1)[-1]] = parse_record(self, name, data)
        return found


@dataclass
class UnitCopy:
    """One unit of work as one source holds it: every file of it that a pack carries."""

    key: str  # its path in a study folder: pretrain/<run>, baseline/<run>, finetune/<job>.json
    source: Source
    files: dict[str, bytes]
    state: str  # FINISHED, FAILED or UNFINISHED

    @property
    def is_finetune(self) -> bool:
        return PurePosixPath(self.key).parts[0] == REL.finetune_dir.name

    @property
    def record(self) -> dict[str, Any]:
        """A fine-tune's record (parsed and checked when the copy was made)."""
        return json.loads(self.files[self.key])


@dataclass
class MergeOutcome:
    written: list[UnitCopy] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)  # finished here, not finished there
    identical: int = 0  # copies left out because an identical one is kept
    rounding: int = 0  # of those, equal but for what rounding moves (run another way)
    left_behind: int = 0  # unfinished units, carried by no source as finished or failed
    skipped: list[str] = field(default_factory=list)  # sources that are the target itself


# ------------------------------------------------------------------------------ sources


def load_source(path: Path, limits: Limits = PACK_LIMITS) -> Source:
    """A pack (read within ``limits``, ``packs.read_pack``) or a study folder, as a source."""
    path = Path(path)
    if path.is_dir():
        if not StudyLayout(path).study_json.is_file():
            raise InputError(f"{path} is not a study folder: it has no study.json")
        return folder_source(path, str(path))
    if path.is_file():
        pack = read_pack(path, limits)
        name = REL.study_json.name
        if name not in pack.files:
            raise InputError(f"{path} is damaged: it holds no {name}")
        packed = pack.manifest.get("packed_from", {})
        origin = {"packed_on": packed.get("host"), "packed_from": packed.get("folder")}
        return Source(str(path), pack.files, read_study_json(pack.files[name], str(path)), origin)
    raise InputError(f"no pack or study folder at {path}")


def folder_source(root: Path, name: str) -> Source:
    files = select_files(root).files
    study = read_study_json(files[REL.study_json.name], name)
    return Source(name, files, study, {"folder": str(root.resolve())})


def load_target(into: Path) -> Source | None:
    """The target folder as a source (None while it is empty or does not exist yet)."""
    check_not_file(into)
    if not into.is_dir() or holds_nothing(into):
        return None
    if not StudyLayout(into).study_json.is_file():
        raise InputError(
            f"--into {into} holds files but no study.json: merge into a new folder or a study "
            "folder (`ablate run SPEC --out DIR --collect` writes a study folder's study.json)"
        )
    return folder_source(into, f"{into} (the target)")


def check_not_file(into: Path) -> None:
    if into.exists() and not into.is_dir():
        raise InputError(f"--into {into} is a file; give a study folder (new or existing)")


def holds_nothing(into: Path) -> bool:
    """Whether a folder holds nothing of a study: at most its lock and hidden temporaries (what
    a merge stopped before its first write leaves)."""
    lock = StudyLayout(into).lock.name
    return all(p.name == lock or p.name.startswith(".") for p in into.iterdir())


def unit_copies(source: Source) -> dict[str, UnitCopy]:
    """The units of work a source holds, by their path in a study folder."""
    grouped: dict[str, dict[str, bytes]] = {}
    for name, data in source.files.items():
        key = unit_key(name)
        if key is not None:
            grouped.setdefault(key, {})[name] = data
    return {
        key: UnitCopy(key, source, files, unit_state(source, key, files))
        for key, files in grouped.items()
    }


def unit_key(name: str) -> str | None:
    parts = PurePosixPath(name).parts
    if parts[0] in (REL.pretrain_dir.name, REL.baseline_dir.name) and len(parts) >= 3:
        return "/".join(parts[:2])
    if parts[0] == REL.finetune_dir.name and len(parts) == 2 and name.endswith(".json"):
        return name
    return None


def unit_state(source: Source, key: str, files: dict[str, bytes]) -> str:
    """FINISHED, FAILED or UNFINISHED, read from the unit's records (each parsed here, so that
    no damaged record is found after the first write)."""
    parsed = {name: parse_record(source, name, data) for name, data in files.items()}
    if PurePosixPath(key).parts[0] == REL.finetune_dir.name:
        record = parsed[key]
        if not isinstance(record, dict) or not FINETUNE_SLOT_KEYS.issubset(record):
            raise InputError(f"{source.name}: {key} is not a fine-tune record")
        return FINISHED if record.get("status") == "done" else FAILED
    if PurePosixPath(key).parts[0] == REL.baseline_dir.name:  # finished once its encoder is kept
        return FINISHED if any(n.endswith("/" + KEPT_META) for n in files) else UNFINISHED
    run = RunLayout(Path(key))
    if run.done.as_posix() in files:
        return FINISHED
    return FAILED if run.failed.as_posix() in files else UNFINISHED


def parse_record(source: Source, name: str, data: bytes) -> Any:
    """A JSON (or JSON-lines) record's content; None for other files (logs)."""
    try:
        if name.endswith(".json"):
            return json.loads(data)
        if name.endswith(".jsonl"):
            return [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{source.name}: {name} is damaged ({exc})") from None
    return None


def finished_content(copy: UnitCopy, exact: bool = True) -> dict[str, Any]:
    """What a finished unit computed: each of its records (by its name inside the unit) without
    timings, provenance or how it ran; without what training measured unless ``exact``."""
    content = {}
    for name, data in sorted(copy.files.items()):
        if name.endswith((".json", ".jsonl")):
            inside = str(PurePosixPath(name).relative_to(PurePosixPath(copy.key).parent))
            record = without(parse_record(copy.source, name, data), NOT_COMPARED)
            content[inside] = record if exact else unmeasured(copy, name, record)
    return content


def unmeasured(copy: UnitCopy, name: str, record: Any) -> Any:
    """A record less what training measured (the module docstring's rule): a curve's values
    beside its axes, a fine-tune's metrics beside its bookkeeping."""
    if name.endswith("/" + RunLayout(Path()).metrics.name) and isinstance(record, list):
        return [{k: v for k, v in row.items() if k in CURVE_AXES} for row in record]
    if copy.is_finetune and name == copy.key and isinstance(record.get("metrics"), dict):
        kept = {k: v for k, v in record["metrics"].items() if k in RECORD_FIELDS}
        return {**record, "metrics": kept}
    return record


def computed_alike(a: UnitCopy, b: UnitCopy) -> bool:
    """Whether two copies were computed the same way (so rounding cannot tell them apart): on
    one and the same machine, as their sources record it, with the same running fields in the
    ``done.json`` of the run they are or fine-tune."""
    return how_computed(a) is not None and how_computed(a) == how_computed(b)


def how_computed(copy: UnitCopy) -> tuple | None:
    """The machine and running fields a copy was computed with; None where its source ran on
    several machines (a merged folder does not say which unit ran where)."""
    study = copy.source.study
    machines = {study.get("machine")} | {e.get("machine") for e in study.get("merged_from", [])}
    if len(machines) != 1:
        return None
    run_id = copy.record["run_id"] if copy.is_finetune else copy.key.rsplit("-", 1)[-1]
    running = copy.source.done_by_run.get(run_id)
    running = running if isinstance(running, dict) else {}
    fields = {k: running.get(k) for k in sorted(RUNNING)}
    precision = copy.record.get("precision") if copy.is_finetune else None
    return machines.pop(), tuple(fields.items()), precision


def without(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [without(v, keys) for v in value]
    return value


def describe(copy: UnitCopy) -> str:
    if copy.is_finetune:
        r = copy.record
        return (
            f"fine-tune {PurePosixPath(copy.key).stem} ({r['task']}, seed {r['seed']}, "
            f"checkpoint {r['fraction']:g} of run {r['run_id']})"
        )
    kind = "pre-training run" if copy.key.startswith(REL.pretrain_dir.name) else "baseline"
    return f"{kind} {PurePosixPath(copy.key).name}"


# ------------------------------------------------------------------------------- checks


def check_same_data(first_name: str, first: dict, other_name: str, other: dict) -> None:
    """Two study records (``study.json``) of one study were made with the same data (corpus)
    and evaluated on the same data (each task both evaluated), or one line naming both
    fingerprints. A record with none (older than fingerprints) passes."""
    a, b = data_fingerprints(first), data_fingerprints(other)
    if a and b and a != b:
        raise MixedData(
            f"{other_name} was made with data {' '.join(b)} but {first_name} with data "
            f"{' '.join(a)}: they cannot be one study (build both from one data bundle: "
            "ablate data prepare SPEC --bundle DIR); nothing was merged"
        )
    check_same_evaluation_data(first_name, first, other_name, other)


def check_one_study(sources: list[Source]) -> None:
    """Every source is the same study, made with the same data: one spec fingerprint and one
    set of data fingerprints, or a line naming the stranger. The data are compared pair by
    pair: a source recorded before a fingerprint (which passes) must not let two others that
    differ through."""
    first = sources[0]
    for i, other in enumerate(sources[1:], start=1):
        if spec_fingerprint(other.study) != spec_fingerprint(first.study):
            where = first_difference(study_identity(first.study), study_identity(other.study))
            raise InputError(
                f"{other.name} is another study than {first.name}: their specs differ at "
                f"{where}; merge packs and folders of one spec only (nothing was merged)"
            )
        for earlier in sources[:i]:
            check_same_data(earlier.name, earlier.study, other.name, other.study)


def plan_units(target: Source | None, sources: list[Source]) -> tuple[dict, MergeOutcome]:
    """Which copy of each unit the target holds after the merge, and which to write there.
    Raises on a conflict before anything is written."""
    held = unit_copies(target) if target is not None else {}
    offered: dict[str, list[UnitCopy]] = {}
    for source in sources:
        for key, copy in unit_copies(source).items():
            offered.setdefault(key, []).append(copy)
    final, outcome = dict(held), MergeOutcome()
    for key in sorted(offered):
        mine = held.get(key)
        copies = ([mine] if mine is not None else []) + offered[key]
        finished = [c for c in copies if c.state == FINISHED]
        for other in finished[1:]:
            check_same_results(finished[0], other, outcome)
        outcome.identical += max(len(finished) - 1, 0)
        if finished and (other := next((c for c in copies if c.state != FINISHED), None)):
            outcome.superseded.append(
                f"{describe(finished[0])} (finished in {finished[0].source.name}, "
                f"{other.state} in {other.source.name})"
            )
        if mine is not None and (mine.state == FINISHED or not finished):
            continue  # finished work in the target stays; so does its own unfinished attempt
        if finished:
            chosen = finished[0]  # replaces the target's unfinished or failed attempt, if any
        else:
            failed = [c for c in copies if c.state == FAILED]
            if not failed:
                outcome.left_behind += 1
                continue
            chosen = failed[0]
        final[key] = chosen
        outcome.written.append(chosen)
    return final, outcome


def check_same_results(kept: UnitCopy, other: UnitCopy, outcome: MergeOutcome) -> None:
    """Two finished copies of one unit are one unit (the module docstring's rule), or one line
    naming it and both sources; agreeing copies computed another way are counted in
    ``outcome``."""
    exact = computed_alike(kept, other)
    mine, theirs = finished_content(kept, exact), finished_content(other, exact)
    if difference := first_difference(mine, theirs):
        raise InputError(
            f"conflicting {describe(other)}: {kept.source.name} and {other.source.name} hold "
            f"different finished results (at {difference}); nothing was merged"
        )
    if not exact and finished_content(kept) != finished_content(other):
        outcome.rounding += 1


def run_ids(sources: list[Source]) -> dict[tuple[str, int], str]:
    """Each unit's id by (label, seed), from the runs tables; two sources that ran one unit
    as different runs (the same spec on other data, or another toolkit) are refused."""
    import polars as pl

    seen: dict[tuple[str, int], tuple[str, Source]] = {}
    for source in sources:
        data = source.files.get(REL.runs.name)
        if data is None:
            continue
        try:
            rows = pl.read_parquet(io.BytesIO(data), columns=["label", "pretrain_seed", "run_id"])
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise InputError(f"{source.name}: {REL.runs.name} cannot be read ({exc})") from None
        for label, seed, run_id in rows.iter_rows():
            known = seen.setdefault((label, seed), (run_id, source))
            if known[0] != run_id:
                raise InputError(
                    f"{known[1].name} and {source.name} ran {label} (seed {seed}) as different "
                    f"runs ({known[0]} and {run_id}): the same spec on other data or another "
                    "toolkit version; nothing was merged"
                )
    return {key: run_id for key, (run_id, _) in seen.items()}


def listed_results(sources: list[Source]) -> dict[Slot, list[dict[str, float]]]:
    """The metrics each source's results table lists per fine-tune slot: what says which of two
    records of one slot is current (a folder may still hold records of an earlier spec)."""
    import polars as pl

    listed: dict[Slot, list[dict[str, float]]] = {}
    for source in sources:
        data = source.files.get(REL.results.name)
        if data is None:
            continue
        try:
            frame = pl.read_parquet(io.BytesIO(data))
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise InputError(f"{source.name}: {REL.results.name} cannot be read ({exc})") from None
        keys = ["run_id", "checkpoint_fraction", "task", "finetune_seed"]
        for slot, rows in frame.group_by(keys):
            listed.setdefault(slot, []).append(
                dict(zip(rows["metric"], rows["value"], strict=True))
            )
    return listed


# -------------------------------------------------------------------- the study's units


def study_units(study: Study, ids: dict, final: dict[str, UnitCopy]) -> tuple[list[Unit], int]:
    """The spec's units in ``plan.plan_study``'s order, named by the ids the runs tables give,
    with the checkpoints their kept folders record (no plan: nothing trains them). Returns
    them and how many units of the spec no runs table names."""
    units: list[Unit] = []
    unknown = 0
    for variant, spec in study.spec.variant_specs():
        for entry in spec.objectives:
            for seed in spec.pretrain.seeds:
                label = variant_label(entry.display, variant)
                if (run_id := ids.get((label, seed))) is None:
                    unknown += 1
                    continue
                layout = study.layout.run(label, seed, run_id)
                files = copy.files if (copy := final.get(relative(study, layout.root))) else {}
                run_json = relative(study, layout.run_json)
                config = json.loads(files[run_json]) if run_json in files else {}
                plan = recorded_plan(files, relative(study, layout.done))
                units.append(RunUnit(variant, spec, entry, seed, plan, config, run_id, layout))
        if spec.finetune is not None and spec.finetune.baseline:
            label = variant_label(BASELINE_LABEL, variant)
            if (run_id := ids.get((label, 0))) is None:
                unknown += 1
                continue
            units.append(
                BaselineUnit(variant, spec, {}, run_id, study.layout.baseline(label, run_id))
            )
    return units, unknown


def recorded_plan(files: dict[str, bytes], done: str) -> RunPlan:
    """What the tables need of a run's plan, as its files record it: its steps (``done.json``:
    its curve must reach them to be trusted) and its checkpoints (the kept folders)."""
    try:
        steps = int(json.loads(files[done])["steps"]) if done in files else 0
    except (ValueError, KeyError, TypeError):
        steps = 0
    return RunPlan((steps,), ({"paper": 0.0, "standard": 0.0},), recorded_checkpoints(files))


def recorded_checkpoints(files: dict[str, bytes]) -> tuple[tuple[float, int], ...]:
    kept = [json.loads(data) for name, data in files.items() if name.endswith("/" + KEPT_META)]
    return tuple(sorted((float(k["fraction"]), int(k["step"])) for k in kept))


def relative(study: Study, path: Path) -> str:
    return path.relative_to(study.layout.root).as_posix()


def choose_records(
    study: Study, units: list[Unit], final: dict[str, UnitCopy], listed: dict
) -> dict[str, list[dict[str, Any]]]:
    """Per finished unit, the record of each of its fine-tunes (checkpoint, task, seed) that
    the target will hold, in ``Study.jobs``' order, as ``--collect`` would read them."""
    by_slot: dict[Slot, list[UnitCopy]] = {}
    for copy in final.values():
        if copy.is_finetune:
            r = copy.record
            by_slot.setdefault(
                (r["run_id"], float(r["fraction"]), r["task"], r["seed"]), []
            ).append(copy)

    def current(slot: Slot, candidates: list[UnitCopy]) -> UnitCopy:
        if len(candidates) == 1:
            return candidates[0]
        tables = listed.get(slot, [])
        matching = [
            c
            for c in candidates
            if c.state == FINISHED
            and {k: float(v) for k, v in c.record["metrics"].items() if k not in RECORD_FIELDS}
            in tables
        ]
        if len(matching) == 1:
            return matching[0]
        a, b = candidates[:2]
        raise InputError(
            f"{describe(a)} in {a.source.name} and fine-tune {PurePosixPath(b.key).stem} in "
            f"{b.source.name} are the same fine-tune under two ids (other GLUE data, or records "
            "of an earlier spec) and no results table says which is current: run `ablate run "
            "SPEC --out FOLDER --collect` on the folder that holds both; nothing was merged"
        )

    chosen: dict[str, list[dict[str, Any]]] = {}
    for unit in units:
        copy = final.get(relative(study, unit.layout.root))
        if copy is None or copy.state != FINISHED:
            continue
        for block in unit.spec.evaluation_blocks():
            for fraction in unit.fractions(block):
                if relative(study, unit.kept_dir(fraction) / KEPT_META) not in copy.files:
                    continue
                for task in block.tasks:
                    seeded = get_task(task).seeded
                    for seed in block.seeds if seeded else block.seeds[:1]:
                        slot = (unit.run_id, fraction, task, seed)
                        if slot in by_slot:
                            pick = current(slot, by_slot[slot])
                            chosen.setdefault(unit.run_id, []).append(pick.record)
    return chosen


# -------------------------------------------------------------------------------- merge


def merge_study(
    sources: list[Path],
    into: Path,
    log: Callable[[str], None] = print,
    command: str | None = None,
    wait: bool = False,
    limits: Limits = PACK_LIMITS,
) -> MergeOutcome:
    """Merge ``sources`` into the study folder ``into``. The folder is made if new and locked
    before anything of it is read, like ``ablate run`` locks it (one writer per study folder):
    a second merge into it waits (``wait``) or is refused (``LockHeld``, exit 2). ``command``:
    how the merge was typed, for ``merged_from`` (default: this process's command line).
    ``limits``: what one pack may unpack to (``packs.PACK_LIMITS``)."""
    into = Path(into)
    check_not_report(into)
    check_not_file(into)
    created = make_folder(into)
    lock_file = StudyLayout(into).lock
    note = lock_file.read_bytes() if lock_file.is_file() else None  # who held it last
    lock = lock_study(lock_file, into, wait=wait)
    try:
        return merge_locked(sources, into, command or typed_command(), log, limits)
    except BaseException:
        leave_as_found(into, created, note)
        raise
    finally:
        lock.release()


def make_folder(into: Path) -> bool:
    """Make ``into`` if it is missing; whether this merge made it."""
    into.parent.mkdir(parents=True, exist_ok=True)
    try:
        into.mkdir()
    except FileExistsError:
        return False
    return True


def typed_command() -> str:
    return shlex.join(["ablate", *sys.argv[1:]])


def leave_as_found(into: Path, created: bool, note: bytes | None) -> None:
    """After a failed merge (still locked): a folder it made and wrote nothing of a study into
    is removed; a folder that was there gets its lock file back as it was. A folder holding
    ``study.json`` stays as it is: the same command completes it."""
    lock_file = StudyLayout(into).lock
    if created and holds_nothing(into):
        lock_file.unlink(missing_ok=True)  # a process waiting on it locks a new one (locks.py)
        with contextlib.suppress(OSError):  # a temporary left by a write cut short stays
            into.rmdir()
    elif note is None:
        lock_file.unlink(missing_ok=True)
    else:
        lock_file.write_bytes(note)


def check_not_report(into: Path) -> None:
    """A folder ``ablate report`` wrote holds a study's tables beside its ``report.md``; merged
    into, its tables would no longer be those its report was written from."""
    if (into / REPORT_FILE).is_file():
        raise InputError(
            f"--into {into} is a report folder (made by `ablate report`), not a study folder: "
            "merge into the study folder, or a new one (nothing was merged)"
        )


def merge_locked(
    sources: list[Path],
    into: Path,
    command: str,
    log: Callable[[str], None],
    limits: Limits = PACK_LIMITS,
) -> MergeOutcome:
    """The merge, with ``into`` locked: every check, then ``study.json``, the units, the tables
    (in this order, so that a merge stopped anywhere is completed by the same command)."""
    target = load_target(into)
    skipped = [str(p) for p in sources if is_folder(p, into)]
    loaded = [load_source(p, limits) for p in sources if not is_folder(p, into)]
    if not loaded:
        raise InputError(f"nothing to merge into {into}: every source given is the target itself")
    everyone = [target, *loaded] if target is not None else loaded
    check_one_study(everyone)
    final, outcome = plan_units(target, loaded)
    outcome.skipped = skipped
    study = recorded_study(everyone[0], into)
    units, unknown = study_units(study, run_ids(everyone), final)
    chosen = choose_records(study, units, final, listed_results(everyone))
    timeline = merged_schedule(everyone)

    # Every check has passed: from here on the target is written.
    base = everyone[0].study
    study_json = {**base, "merged_from": merge_history(base, loaded, command)}
    atomic_write_text(study.layout.study_json, json.dumps(study_json, indent=2, default=str))
    for copy in outcome.written:
        write_unit(into, copy)
    if timeline:
        atomic_write_bytes(study.layout.schedule_log, timeline)
    counts = rebuild_tables(study, units, chosen)
    log(summary_line(into, loaded, outcome, counts, unknown))
    return outcome


def merged_schedule(sources: list[Source]) -> bytes:
    """The target's ``schedule.jsonl`` after the merge: every source's lines (the target's
    first), each line once, in the order read. Each source's timeline is a record of how it ran,
    not a result, so the logs are simply concatenated (a line says which process and when); a
    line that is not a JSON object is a damaged log, refused like any damaged record."""
    name = REL.schedule_log.name
    lines: dict[bytes, None] = {}
    for source in sources:
        data = source.files.get(name)
        if data is None:
            continue
        if not all(isinstance(event, dict) for event in parse_record(source, name, data)):
            raise InputError(f"{source.name}: {name} is damaged (a line is not an event)")
        lines |= dict.fromkeys(line.strip() for line in data.splitlines() if line.strip())
    return b"".join(line + b"\n" for line in lines)


def merge_history(base: dict[str, Any], loaded: list[Source], command: str) -> list[dict]:
    """``merged_from`` after this merge: the target's entries, then each source's (a merged
    source's own entries first, then its own), one entry per run that made a source."""
    merged_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    entries = list(base.get("merged_from", []))
    for source in loaded:
        entries += source.study.get("merged_from", [])
        own = {key: source.study.get(key) for key in RUN_RECORD_KEYS}
        entries.append(
            {"source": source.name, **source.origin, **own}
            | {"merge_command": command, "merged_at": merged_at}
        )
    distinct: dict[tuple, dict] = {}
    for entry in entries:
        distinct.setdefault(made_by(entry), entry)
    return list(distinct.values())


def made_by(entry: dict[str, Any]) -> tuple:
    """Which run made a source: its command, machine and start (its name, where an entry
    written before these were recorded has none of them)."""
    key = (entry.get("command"), entry.get("machine"), entry.get("started"))
    return key if any(key) else ("source", entry.get("source"))


def is_folder(path: Path, folder: Path) -> bool:
    return Path(path).is_dir() and folder.is_dir() and Path(path).resolve() == folder.resolve()


def recorded_study(base: Source, into: Path) -> Study:
    """The study as ``base``'s study.json records it, writing into ``into``: its spec resolved
    again (so a unit's variant spec and fine-tune settings are exactly the run's), no data."""
    spec = parse_spec(recorded_spec(base.study["spec"]), source=f"{base.name}: study.json")
    spec_path = Path(base.study.get("spec_path") or ".")
    overrides = base.study.get("overrides") or {}
    return Study(spec, spec_path, into, "cpu", overrides, reuse=False)


def write_unit(into: Path, copy: UnitCopy) -> None:
    if copy.is_finetune:
        atomic_write_bytes(into / copy.key, copy.files[copy.key])
        return
    with atomic_dir(into / copy.key) as tmp:  # a unit appears whole, replacing any attempt
        for name, data in copy.files.items():
            path = tmp / PurePosixPath(name).relative_to(copy.key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def rebuild_tables(
    study: Study, units: list[Unit], chosen: dict[str, list[dict[str, Any]]]
) -> dict[str, int]:
    """The three tables, from the records now in the target, as ``--collect`` writes them."""
    summaries, records = [], []
    for unit in units:
        if unit.done:
            summaries.append((unit, run_unit(study, unit, "off")))
            records += [(unit, record) for record in chosen.get(unit.run_id, [])]
        elif isinstance(unit, RunUnit) and unit.layout.failed.exists():
            summaries.append((unit, json.loads(unit.layout.failed.read_text())))
        else:
            summaries.append((unit, dict(PENDING_SUMMARY)))
    write_tables(study, summaries, records)
    counts: dict[str, int] = {}
    for _, summary in summaries:
        counts[summary["status"]] = counts.get(summary["status"], 0) + 1
    counts["fine-tunes"] = sum(r["status"] == "done" for _, r in records)
    return counts


def summary_line(
    into: Path, sources: list[Source], outcome: MergeOutcome, counts: dict, unknown: int
) -> str:
    runs = sum(not c.is_finetune for c in outcome.written)
    finetunes = len(outcome.written) - runs
    lines = [
        f"merged {len(sources)} source(s) into {into}: {runs} run(s) or baseline(s) and "
        f"{finetunes} fine-tune(s) added, {outcome.identical} identical copies skipped"
        + (
            f" ({outcome.rounding} of them computed another way, on another machine or with "
            "other threads, precision or compile mode: the same counts, measured values moved "
            "by rounding; the first copy kept)"
            if outcome.rounding
            else ""
        )
    ]
    for line in outcome.superseded:
        lines.append(f"  took the finished copy of {line}")
    if outcome.left_behind:
        lines.append(
            f"  {outcome.left_behind} unfinished unit(s) left behind (their training states do "
            "not travel; they stay pending)"
        )
    if outcome.skipped:
        lines.append(f"  skipped (the target itself): {', '.join(outcome.skipped)}")
    if unknown:
        lines.append(f"  {unknown} unit(s) of the spec appear in no runs table (left out)")
    lines.append(
        f"tables rebuilt: {counts.get('done', 0)} unit(s) done, {counts.get('failed', 0)} "
        f"failed, {counts.get('pending', 0)} pending, {counts['fine-tunes']} fine-tune(s) "
        f"({StudyLayout(into).results})"
    )
    return "\n".join(lines)
