"""``ablate merge``: packs and folders of one study combined into one study folder.

A study run on several machines (shards, an offline GPU node, a cluster) comes back as packs
(``electra_ablate.study.packs``) or folders. Every unit of work (a pre-training run, a baseline, a
fine-tune) is named by a hash of what changes its result, so merging is a merge by identity:

- a unit that several sources hold with the same content is kept once;
- a unit held twice with different finished content is a conflict: nothing is merged, and
  one line names the unit and both sources;
- a finished copy wins over an unfinished or failed one, and finished work already in the
  target folder is never replaced; a failed unit travels when no source finished it, an
  unfinished one never does (its training states stay behind, so it could not resume);
- a pack or folder of another spec (``packs.spec_fingerprint``) is refused.

Every check runs before the first write. The units are then written, each atomically, and the
tables are rebuilt from the records as ``ablate run --collect`` builds them, without the data:
the spec in ``study.json`` says which units and fine-tunes make the study, the runs tables name
its units, and the records say the rest. ``ablate report`` works on the result at once.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from electra_ablate.evaluation.task import RECORD_FIELDS, get_task
from electra_ablate.infra.errors import InputError, MixedData
from electra_ablate.infra.layout import KEPT_META, REPORT_FILE, RunLayout, StudyLayout
from electra_ablate.infra.locks import FolderLock, lock_study
from electra_ablate.infra.storage import atomic_dir, atomic_write_bytes, atomic_write_text
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.study.context import Study
from electra_ablate.study.execute import run_unit
from electra_ablate.study.packs import (
    data_fingerprints,
    first_difference,
    read_pack,
    read_study_json,
    select_files,
    spec_fingerprint,
    study_identity,
)
from electra_ablate.study.runner import PENDING_SUMMARY
from electra_ablate.study.spec import parse_spec
from electra_ablate.study.tables import write_tables
from electra_ablate.study.units import BASELINE_LABEL, BaselineUnit, RunUnit, Unit, variant_label

VOLATILE = frozenset({"wall_s", "wall_seconds", "train_seconds", "tokens_per_s", "message"})
"""Record keys that say how long a unit took, or where it was copied from, not what it computed:
the same unit run on two machines differs only here, and is the same unit."""

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
    left_behind: int = 0  # unfinished units, carried by no source as finished or failed
    skipped: list[str] = field(default_factory=list)  # sources that are the target itself


# ------------------------------------------------------------------------------ sources


def load_source(path: Path) -> Source:
    path = Path(path)
    if path.is_dir():
        if not StudyLayout(path).study_json.is_file():
            raise InputError(f"{path} is not a study folder: it has no study.json")
        return folder_source(path, str(path))
    if path.is_file():
        pack = read_pack(path)
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
    if into.exists() and not into.is_dir():
        raise InputError(f"--into {into} is a file; give a study folder (new or existing)")
    if not into.is_dir() or not any(into.iterdir()):
        return None
    if not StudyLayout(into).study_json.is_file():
        raise InputError(
            f"--into {into} holds files but no study.json: merge into a new folder or a study "
            "folder (`ablate run SPEC --out DIR --collect` writes a study folder's study.json)"
        )
    return folder_source(into, f"{into} (the target)")


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


def finished_content(copy: UnitCopy) -> dict[str, Any]:
    """What a finished unit computed: each of its records (by its name inside the unit) without
    timings or provenance."""
    content = {}
    for name, data in sorted(copy.files.items()):
        if name.endswith((".json", ".jsonl")):
            inside = PurePosixPath(name).relative_to(PurePosixPath(copy.key).parent)
            content[str(inside)] = without(parse_record(copy.source, name, data), VOLATILE)
    return content


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
    """Two study records (``study.json``) of one study were made with the same data, or one
    line naming both fingerprints. A record with none (older than fingerprints) passes."""
    a, b = data_fingerprints(first), data_fingerprints(other)
    if a and b and a != b:
        raise MixedData(
            f"{other_name} was made with data {' '.join(b)} but {first_name} with data "
            f"{' '.join(a)}: they cannot be one study (build both from one data bundle: "
            "ablate data prepare SPEC --bundle DIR); nothing was merged"
        )


def check_one_study(sources: list[Source]) -> None:
    """Every source is the same study, made with the same data: one spec fingerprint and one
    set of data fingerprints, or a line naming the stranger."""
    first = sources[0]
    for other in sources[1:]:
        if spec_fingerprint(other.study) != spec_fingerprint(first.study):
            where = first_difference(study_identity(first.study), study_identity(other.study))
            raise InputError(
                f"{other.name} is another study than {first.name}: their specs differ at "
                f"{where}; merge packs and folders of one spec only (nothing was merged)"
            )
        check_same_data(first.name, first.study, other.name, other.study)


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
            difference = first_difference(finished_content(finished[0]), finished_content(other))
            if difference:
                raise InputError(
                    f"conflicting {describe(other)}: {finished[0].source.name} and "
                    f"{other.source.name} hold different finished results (at {difference}); "
                    "nothing was merged"
                )
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
    """The spec's units in ``Study.prepare``'s order, named by the ids the runs tables give,
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
    sources: list[Path], into: Path, log: Callable[[str], None] = print
) -> MergeOutcome:
    """Merge ``sources`` into the study folder ``into``: check everything, then write, holding
    the study's lock like ``ablate run`` (one writer per study folder)."""
    into = Path(into)
    check_not_report(into)
    lock_file = StudyLayout(into).lock
    note = lock_file.read_bytes() if lock_file.is_file() else None  # who held it last
    held = [lock_study(lock_file, into)] if into.is_dir() else []
    try:
        return merge_locked(sources, into, held, log)
    except BaseException:
        if held:  # a refused merge leaves the folder as it found it, lock file included
            if note is None:
                lock_file.unlink(missing_ok=True)
            else:
                lock_file.write_bytes(note)
        raise
    finally:
        for lock in held:
            lock.release()


def check_not_report(into: Path) -> None:
    """A folder ``ablate report`` wrote holds a study's tables beside its ``report.md``; merged
    into, its tables would no longer be those its report was written from."""
    if (into / REPORT_FILE).is_file():
        raise InputError(
            f"--into {into} is a report folder (made by `ablate report`), not a study folder: "
            "merge into the study folder, or a new one (nothing was merged)"
        )


def merge_locked(
    sources: list[Path], into: Path, held: list[FolderLock], log: Callable[[str], None]
) -> MergeOutcome:
    """The merge, with ``into`` locked (``held``), or locked as it is made."""
    target = load_target(into)
    skipped = [str(p) for p in sources if is_folder(p, into)]
    loaded = [load_source(p) for p in sources if not is_folder(p, into)]
    if not loaded:
        raise InputError(f"nothing to merge into {into}: every source given is the target itself")
    everyone = [target, *loaded] if target is not None else loaded
    check_one_study(everyone)
    final, outcome = plan_units(target, loaded)
    outcome.skipped = skipped
    study = recorded_study(everyone[0], into)
    units, unknown = study_units(study, run_ids(everyone), final)
    chosen = choose_records(study, units, final, listed_results(everyone))

    # Every check has passed: from here on the target is written.
    if not held:  # a new folder: locked as it is made
        into.mkdir(parents=True, exist_ok=True)
        held.append(lock_study(study.layout.lock, into))
    for copy in outcome.written:
        write_unit(into, copy)
    base = everyone[0].study
    merged_from = list(base.get("merged_from", []))
    merged_from += [
        {"source": s.name, **s.origin, "finished": s.study.get("finished")} for s in loaded
    ]
    study_json = {**base, "merged_from": merged_from}
    atomic_write_text(study.layout.study_json, json.dumps(study_json, indent=2, default=str))
    counts = rebuild_tables(study, units, chosen)
    log(summary_line(into, loaded, outcome, counts, unknown))
    return outcome


def is_folder(path: Path, folder: Path) -> bool:
    return Path(path).is_dir() and folder.is_dir() and Path(path).resolve() == folder.resolve()


def recorded_study(base: Source, into: Path) -> Study:
    """The study as ``base``'s study.json records it, writing into ``into``: its spec resolved
    again (so a unit's variant spec and fine-tune settings are exactly the run's), no data."""
    spec = parse_spec(base.study["spec"], source=f"{base.name}: study.json")
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
