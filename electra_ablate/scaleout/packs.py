"""Result packs: a study folder's results in one archive, without its weights.

A study trained on a GPU node or a cluster comes back to the researcher's machine as a pack
(``ablate pack``), and packs and folders of one study are combined by ``ablate merge``
(``electra_ablate.scaleout.merge``). A pack is a ``.tar.gz`` written with the standard library: one
file that any machine opens (``tar xzf`` shows it), compressed well for what it holds (JSON,
JSON lines, parquet), and read here member by member without unpacking anything to disk.

What travels: every file of the study folder except

- weights (``*.safetensors``) and the resumable training states: they are what make a study
  folder large, and results do not need them;
- a kept folder's other files (the tokenizer copy and its checksums): only its ``kept.json``
  travels, which says which checkpoint a fine-tune used;
- TensorBoard event files unless asked for (``--tensorboard``): the same numbers are in
  ``metrics.jsonl``;
- the report (``ablate report`` rebuilds it from the tables), locks, damaged records set aside
  (``*.corrupt-*``), scratch re-training folders (``rebuild/``) and temporary or hidden files.

Its ``pack.json`` names the study, the fingerprint of its spec, those of its data and
evaluation data, the toolkit version and every file with its sha256, so a truncated, altered or
foreign pack is refused before anything is merged.

What travels is also an allow-list, ``CARRIED`` (and ``CARRIED_TENSORBOARD``): the writer
carries no file outside it and the reader refuses a pack holding one. A pack is untrusted
input and its checksums are its maker's own, so they prove nothing about what it may carry: a
crafted pack listing a training state (which the next ``ablate run`` would resume) or weights
is refused by name before anything is written, and ``PACK_LIMITS`` bounds its members and
their unpacked bytes (``ablate merge --max-member-mib`` and ``--max-total-mib`` raise them),
checked while streaming (``electra_ablate.infra.archives``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import platform
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from electra_ablate import __version__
from electra_ablate.infra.archives import ArchiveRefused, Limits, matches, read_all
from electra_ablate.infra.errors import InputError, MixedData
from electra_ablate.infra.layout import KEPT_META, RunLayout, StudyLayout
from electra_ablate.infra.storage import atomic_file

PACK_FORMAT = "electra-ablate result pack"
PACK_VERSION = 1
PACK_SUFFIX = ".pack.tar.gz"

UNIT_DIRS = ("pretrain", "baseline", "reference")
"""The study folder's unit folders (``StudyLayout.pretrain_dir`` and its siblings)."""
_RUN = RunLayout(Path())
UNIT_RECORDS = tuple(
    p.name
    for p in (_RUN.run_json, _RUN.done, _RUN.failed, _RUN.error_log, _RUN.metrics)
    + (_RUN.warnings_log, _RUN.tracking, _RUN.code)
)
"""The records of a unit folder a pack carries (never its states, weights or scratch)."""
CARRIED = (
    *(f"*{suffix}" for suffix in (".json", ".jsonl", ".parquet", ".csv", ".md", ".txt", ".log")),
    "*.yaml",
    "*.yml",
    "finetune/*.json",
    *(f"{units}/*/{name}" for units in UNIT_DIRS for name in UNIT_RECORDS),
    *(f"{units}/*/kept/*/{KEPT_META}" for units in UNIT_DIRS),
)
"""Every file a pack may carry, by its path in the study folder (``*``: within one folder,
``**/``: any folders): the study's records and tables and what the user wrote beside them
(text, tables, no code, no pickles), each unit's records, each kept folder's ``kept.json``,
each fine-tune's record. ``ablate pack`` writes nothing else and ``ablate merge`` reads nothing
else: a state, weights, a tokenizer copy, a job's pickled call or any other file is refused."""
CARRIED_TENSORBOARD = tuple(
    f"{units}/*/tensorboard/**/events.out.tfevents.*" for units in UNIT_DIRS
)
"""What ``ablate pack --tensorboard`` adds to ``CARRIED``: TensorBoard's event files."""

PACK_LIMITS = Limits(members=200_000, member_bytes=64 << 20, total_bytes=512 << 20)
"""What ``ablate merge`` reads of one pack, unpacked: 64 MiB per member and 512 MiB in all (the
smoke study's pack unpacks to about 300 kB, a 1e16 run's ``metrics.jsonl`` to 61 kB); raised
with ``--max-member-mib`` and ``--max-total-mib``."""

NOT_THE_STUDY = (
    "description",
    "device",
    "launcher",
    "data.corpus.paths",
    "data.glue",
    "data.cache_dir",
    "data.tokenizer.vocab_file",
    "pretrain.num_threads",
    "pretrain.tensorboard",
    "pretrain.resume_every",
    "tracking",
    "schedule",
)
"""Spec fields that say where a study runs, not which study it is: prose, the device, the
places the data lives on this machine (its contents are part of every run's and fine-tune's
id, so other data shows up as other units) and how a machine runs it or whom it tells (the
trackers, the order its workers take the work in). Two shards, or two machines running the
same spec, differ in nothing else."""


# ------------------------------------------------------------------------------ the spec


def study_identity(study: dict[str, Any]) -> dict[str, Any]:
    """The part of ``study.json``'s resolved spec that makes it this study (and no other)."""
    spec = study.get("spec")
    if not isinstance(spec, dict):
        raise ValueError("study.json holds no resolved spec")
    identity = json.loads(json.dumps(spec))  # a deep copy
    for dotted in NOT_THE_STUDY:
        *parents, last = dotted.split(".")
        node = identity
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    for variant in identity.get("variants") or []:  # a variant may move data, or pick a device
        if isinstance(variant, dict) and isinstance(variant.get("set"), dict):
            variant["set"] = {k: v for k, v in variant["set"].items() if k not in NOT_THE_STUDY}
    return identity


def spec_fingerprint(study: dict[str, Any]) -> str:
    """A short hash of :func:`study_identity`: equal for every shard and machine of one study."""
    text = json.dumps(study_identity(study), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def data_fingerprints(study_json: dict[str, Any]) -> list[str]:
    """The data fingerprints a ``study.json`` records (none for a study made before them)."""
    if isinstance(study_json.get("data_fingerprints"), list):
        return sorted(study_json["data_fingerprints"])
    data = study_json.get("data")
    if isinstance(data, dict) and isinstance(data.get("fingerprint"), str):
        return [data["fingerprint"]]
    return []


RUN_RECORD_KEYS = ("command", "machine", "started", "finished", "wall_s", "git_commit")
"""What ``study.json`` records of the command that wrote it; ``ablate merge`` copies the same
of each source into its ``merged_from`` entry, and the report header reads them there."""


def evaluation_fingerprints(study_json: dict[str, Any]) -> dict[str, str]:
    """Per evaluated task, the fingerprint of the evaluation data a ``study.json`` records
    (``data_identity.current_evaluation_fingerprints``); none for a study made before them."""
    recorded = study_json.get("evaluation_fingerprints")
    if not isinstance(recorded, dict):
        return {}
    return {str(task): value for task, value in recorded.items() if isinstance(value, str)}


def check_same_evaluation_data(
    first_name: str, first: dict[str, Any], other_name: str, other: dict[str, Any]
) -> None:
    """Two study records read every task they both evaluated from the same data, or one line
    naming the task and both fingerprints. The job ids differ on other data, so without this
    a merge would silently hold results of both. A record with none (older) passes."""
    mine, theirs = evaluation_fingerprints(first), evaluation_fingerprints(other)
    for task in sorted(mine.keys() & theirs.keys()):
        if mine[task] != theirs[task]:
            raise MixedData(
                f"{other_name} was evaluated on {task} data {theirs[task]} but {first_name} on "
                f"{task} data {mine[task]}: they cannot be one study (evaluate both on one copy "
                "of the evaluation data, e.g. one data bundle: ablate data prepare SPEC --bundle "
                "DIR); nothing was merged"
            )


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """The first dotted field where ``a`` and ``b`` differ, with both values (None if equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            here = f"{where}.{key}" if where else str(key)
            if key not in a or key not in b:
                return f"{here} (only in one)"
            found = first_difference(a[key], b[key], here)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{where or 'the value'} ({short(a)} vs {short(b)})"


def short(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------- what travels


def left_behind(layout: StudyLayout, path: Path, tensorboard: bool = False) -> str | None:
    """Why a pack leaves the file at ``path`` behind (None: it travels)."""
    rel = path.relative_to(layout.root)
    if any(part.startswith(".") for part in rel.parts):
        return "temporary files"
    if path == layout.pack_manifest:
        return "an earlier pack's manifest"
    if layout.report in path.parents:
        return "the report"
    if layout.jobs in path.parents:
        return "cluster job files"
    if path.suffix == ".lock":
        return "locks"
    if ".corrupt-" in path.name:
        return "damaged records set aside"
    unit = unit_folder(layout, path)
    if unit is not None and unit.states in path.parents:
        return "training states"
    if unit is not None and unit.scratch in path.parents:
        return "scratch re-training"
    if unit is not None and unit.tensorboard in path.parents and not tensorboard:
        return "TensorBoard logs"
    if path.suffix == ".safetensors":
        return "weights"
    if unit is not None and unit.kept_root in path.parents and path.name != KEPT_META:
        return "kept encoders' tokenizer copies"
    if not matches(rel.as_posix(), CARRIED + (CARRIED_TENSORBOARD if tensorboard else ())):
        return "files a pack does not carry"
    return None


def unit_folder(layout: StudyLayout, path: Path) -> RunLayout | None:
    """The pre-training run or baseline folder that ``path`` lies in, if any."""
    for parent in (layout.pretrain_dir, layout.baseline_dir, layout.reference_dir):
        if parent in path.parents and path.parent != parent:
            return RunLayout(parent / path.relative_to(parent).parts[0])
    return None


@dataclass
class Selection:
    files: dict[str, bytes]  # relative POSIX path -> content
    left: dict[str, list[int]]  # why -> [files, bytes]


def select_files(root: Path, tensorboard: bool = False, skip: Path | None = None) -> Selection:
    """The files a pack of ``root`` carries, read once (so a pack of a study that is still
    running holds each file as it was when read, never half of one)."""
    layout = StudyLayout(Path(root))
    files: dict[str, bytes] = {}
    left: dict[str, list[int]] = {}
    for path in sorted(layout.root.rglob("*")):
        if path.is_symlink() or not path.is_file() or (skip and path.resolve() == skip):
            continue
        why = left_behind(layout, path, tensorboard)
        if why is None:
            files[path.relative_to(layout.root).as_posix()] = path.read_bytes()
        else:
            count = left.setdefault(why, [0, 0])
            count[0] += 1
            count[1] += path.stat().st_size
    return Selection(files, left)


def read_study_json(data: bytes, where: str) -> dict[str, Any]:
    try:
        study = json.loads(data)
        study_identity(study)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise InputError(f"{where}: study.json is not a study record ({exc})") from None
    return study


# ------------------------------------------------------------------------------ writing


@dataclass
class PackSummary:
    path: Path
    files: int
    bytes: int
    left: dict[str, list[int]]
    contents: str = ""  # what it carries, in words: study, data, units, fine-tunes


def write_pack(study_dir: Path, out: Path | None = None, tensorboard: bool = False) -> PackSummary:
    """Write the pack of ``study_dir`` to ``out`` (default: ``<folder>.pack.tar.gz`` beside
    it), whole or not at all."""
    layout = StudyLayout(Path(study_dir))
    if not layout.root.is_dir():
        raise InputError(f"study folder not found: {layout.root}")
    units = (layout.pretrain_dir, layout.baseline_dir, layout.finetune_dir)
    if (layout.root / "report.md").is_file() and not any(p.is_dir() for p in units):
        raise InputError(
            f"{layout.root} is a report folder (written by `ablate report`), not a study: pack "
            "the study folder the report was made from"
        )
    for needed in (layout.study_json, layout.runs):
        if not needed.is_file():
            raise InputError(
                f"{layout.root} has no {needed.name}: pack a study folder whose tables are "
                f"written (`ablate run SPEC --out {layout.root} --collect` writes them)"
            )
    root = layout.root.resolve()  # a study given as `.` still has a name
    out = Path(out) if out is not None else root.parent / f"{root.name}{PACK_SUFFIX}"
    if out.is_dir():
        raise InputError(f"--out {out} is a folder; give the archive's file name")
    selection = select_files(layout.root, tensorboard, skip=out.resolve())
    study = read_study_json(selection.files[layout.study_json.name], str(layout.root))
    manifest = {
        "format": PACK_FORMAT,
        "version": PACK_VERSION,
        "study": study.get("name"),
        "spec_fingerprint": spec_fingerprint(study),
        "data_fingerprints": data_fingerprints(study),
        "evaluation_fingerprints": evaluation_fingerprints(study),
        "toolkit_version": __version__,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "packed_from": {"host": platform.node(), "folder": str(root)},
        "left_behind": {
            why: {"files": n, "bytes": size} for why, (n, size) in selection.left.items()
        },
        "files": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for name, data in selection.files.items()
        },
    }
    top = PurePosixPath(root.name)
    members = {layout.pack_manifest.name: json.dumps(manifest, indent=1).encode()}
    members |= selection.files
    with atomic_file(out) as tmp, tarfile.open(tmp, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(str(top / name))
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    contents = pack_contents(study, selection.files)
    return PackSummary(out, len(selection.files), out.stat().st_size, selection.left, contents)


def pack_contents(study: dict[str, Any], files: dict[str, bytes]) -> str:
    """``study NAME (data F): R pre-training runs (D finished), B baselines, J fine-tune
    records``: what a pack carries, so a user sees they packed the study they meant."""
    layout = StudyLayout(Path("."))
    units: dict[str, set[str]] = {}
    finished = set()
    for name in files:
        parts = PurePosixPath(name).parts
        if len(parts) >= 3 and parts[0] in (layout.pretrain_dir.name, layout.baseline_dir.name):
            units.setdefault(parts[0], set()).add(parts[1])
            if parts[0] == layout.pretrain_dir.name and parts[2] == "done.json":
                finished.add(parts[1])
    runs = len(units.get(layout.pretrain_dir.name, ()))
    baselines = len(units.get(layout.baseline_dir.name, ()))
    jobs = sum(1 for n in files if PurePosixPath(n).parts[0] == layout.finetune_dir.name)
    data = " ".join(data_fingerprints(study)) or "not recorded"
    return (
        f"study {study.get('name')} (data {data}): {runs} pre-training run(s) ({len(finished)} "
        f"finished), {baselines} baseline(s), {jobs} fine-tune record(s)"
    )


# ------------------------------------------------------------------------------ reading


@dataclass
class Pack:
    """A pack read back and verified: its manifest and every file it carries."""

    path: Path
    manifest: dict[str, Any]
    files: dict[str, bytes]


LIMIT_OPTIONS = {"member_bytes": "--max-member-mib", "total_bytes": "--max-total-mib"}
"""The ``ablate merge`` option that raises each of ``PACK_LIMITS``."""


def read_pack(path: Path, limits: Limits = PACK_LIMITS) -> Pack:
    """Read and verify a pack; anything wrong with it is one ``InputError`` naming it. Only
    files ``CARRIED`` may be in it, within ``limits``; each member is checked by name and
    size before it is read, and nothing is written to disk."""
    path = Path(path)
    try:
        members = read_all(
            path,
            limits,
            allowed=[f"*/{p}" for p in (*CARRIED, *CARRIED_TENSORBOARD)],
            compression="gz",
            refuse="a file `ablate pack` writes (training states, weights and other files never "
            "travel in a pack)",
        )
    except ArchiveRefused as exc:
        option = LIMIT_OPTIONS.get(exc.limit or "")
        raise InputError(
            f"{path} is refused: {exc}"
            + (f" (`ablate merge {option}` raises it)" if option else "")
            + "; nothing was merged"
        ) from None
    if not members:
        raise InputError(f"{path} is an empty archive, not a pack")
    tops = {PurePosixPath(name).parts[0] for name in members}
    if len(tops) != 1:
        raise InputError(f"{path} is not a pack: its files do not sit in one folder")
    top = tops.pop()
    files = {str(PurePosixPath(name).relative_to(top)): data for name, data in members.items()}
    manifest_name = StudyLayout(Path()).pack_manifest.name
    if manifest_name not in files:
        raise InputError(f"{path} is not a pack made by `ablate pack`: it has no {manifest_name}")
    try:
        manifest = json.loads(files.pop(manifest_name))
        listed = {name: entry["sha256"] for name, entry in manifest["files"].items()}
        if manifest["format"] != PACK_FORMAT:
            raise ValueError(f"format {manifest['format']!r}")
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: {manifest_name} is not a pack manifest ({exc})") from None
    if manifest.get("version", 0) > PACK_VERSION:
        raise InputError(
            f"{path} was written by a newer electra-ablate ({manifest.get('toolkit_version')}); "
            f"update this one (it is {__version__})"
        )
    for name in sorted(set(listed) ^ set(files)):
        where = "listed in its manifest but missing" if name in listed else "not in its manifest"
        raise InputError(f"{path} is damaged: {name} is {where}")
    for name, digest in listed.items():
        if hashlib.sha256(files[name]).hexdigest() != digest:
            raise InputError(f"{path} is damaged: {name} does not match its checksum")
    return Pack(path, manifest, files)
