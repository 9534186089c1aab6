"""A finished run's kept encoders carried off a GPU node in parts, and rebuilt beside a study.

A result pack carries no weights (``electra_ablate.scaleout.packs``): they stay on the machine
that trained them. A lent GPU keeps nothing, so when a session's deadline cuts the evaluations
of a run that finished pre-training, the run's kept encoders would be lost with the machine, and
finishing its evaluations would mean pre-training it again. The session returns them instead
(``electra_ablate.scaleout.node.session``): the run folder's records (``run.json``,
``done.json``, ``metrics.jsonl``),
every kept folder's ``kept.json``, and the whole kept folders chosen (weights fp32 as kept,
byte for byte: the run id names those weights, and a bf16 copy would silently change every
result computed from it), as one uncompressed tar split into at most ``MAX_PARTS`` files of at
most ``PART_BYTES`` each, the most a lent GPU node sends back per file.

Each part starts with a ``HEADER_BYTES`` JSON header naming the set, the part's index and the
sha256 of every part's payload and of the whole tar, so any one part says whether the set it
belongs to is whole. ``plan_return`` chooses what fits the files a node may still send back:
every unit's final kept encoder before any unit's others, the unit with the most cut work first.

Read back on the next stretch (``unpack_parts``), the parts are untrusted input: their sizes
are bounded, every checksum is checked, the tar holds nothing but the expected regular files
(streamed out by ``electra_ablate.infra.archives``, each checked before it is written), the
run folder's name must be the hash of its ``run.json`` and every returned kept folder must
pass its own manifest (``kept_files.kept_problem``). The
rebuilt run folder, in a study folder beside the study, is what ``ablate run``'s identical-run
reuse (``electra_ablate.study.reuse``) copies instead of training again. A kept folder that did
not fit travels as its ``kept.json`` alone, as in a pack.

Standard library only: a GPU session's controller imports it without torch.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from electra_ablate.checkpoints.kept_files import META_FILE, WEIGHTS_FILE, kept_problem
from electra_ablate.infra.archives import ArchiveRefused, ArchiveUnreadable, Limits, members
from electra_ablate.infra.errors import InputError, WriteFailed
from electra_ablate.infra.identity import config_hash
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.manifest import MANIFEST, read_manifest
from electra_ablate.infra.storage import atomic_dir, atomic_file, raise_write_failure

PART_BYTES = 16 * 2**20
"""The most one part may weigh, header included: what a lent GPU node sends back per file."""
MAX_PARTS = 4
"""The most parts one set is split into: ELECTRA-/BERT-Small's kept encoder (~54 MB) fits."""
HEADER_BYTES = 4096
"""Each part's JSON header, padded with spaces to this size and ended by a newline."""
PAYLOAD_BYTES = PART_BYTES - HEADER_BYTES
PART_FORMAT = "electra-ablate kept parts"
PART_VERSION = 1
PART_NAME = re.compile(r"^(?P<name>[A-Za-z0-9_=.+-]+)\.kept\.part(?P<part>\d+)of(?P<parts>\d+)$")
"""``<study>-<rung>.kept.part2of4``: the set's name, this part's index and the set's count."""

RUN_RECORDS = ("run.json", "done.json", "metrics.jsonl", "code.json")
"""The run folder's records that travel with its encoders: what makes it a finished run, and
the code that made it (``infra.code_identity``), so a rebuilt run is checked like any other."""
KEPT_FILES = (META_FILE, WEIGHTS_FILE, MANIFEST, "tokenizer.json", "vocab.txt")
"""The files a kept folder may hold (``electra_ablate.checkpoints.kept``)."""
RUN_FOLDER = re.compile(r"^[A-Za-z0-9_=-]+(\.[A-Za-z0-9_=-]+)*-s\d+-(?P<id>[0-9a-f]{12})$")
"""A run folder's name, ``<label>-s<seed>-<run id>`` (labels follow ``spec.names``' rule)."""
MEMBER_OVERHEAD = 3 * 512
"""The most a tar adds per member (its header, a long name's extended header, the padding)."""


def fraction_name(fraction: float) -> str:
    """A kept folder's name (``RunLayout.kept``): ``1``, ``0.5``."""
    return RunLayout(Path()).kept(fraction).name


# ------------------------------------------------------------------- what goes back


@dataclass(frozen=True)
class CutUnit:
    """A run that finished pre-training and has evaluations without a record.

    ``unfinished`` counts them (the work its return saves from a second pre-training);
    ``fractions`` are its kept fractions in the order to return them: the final one first,
    then those the cut evaluations started on, then the others."""

    run: Path
    unfinished: int
    fractions: tuple[float, ...]


@dataclass
class ReturnPlan:
    """Which kept encoders travel (run folder -> fractions) and which do not, with why."""

    chosen: dict[Path, list[float]] = field(default_factory=dict)
    left_out: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0  # the tar's size at most
    parts: int = 0

    def as_record(self) -> dict[str, Any]:
        return {
            "units": {run.name: [fraction_name(f) for f in fs] for run, fs in self.chosen.items()},
            "left_out": self.left_out,
            "parts": self.parts,
        }


def member_bytes(size: int) -> int:
    """What one file of ``size`` bytes takes in a tar, at most."""
    return MEMBER_OVERHEAD + math.ceil(size / 512) * 512


def records_bytes(run: Path) -> int:
    """The run's records and every kept folder's ``kept.json``: what travels with any unit."""
    return sum(member_bytes(p.stat().st_size) for p in travelling_files(run, []))


def kept_bytes(run: Path, fraction: float) -> int:
    """A whole kept folder's files beyond its ``kept.json``."""
    folder = RunLayout(run).kept(fraction)
    return sum(
        member_bytes(p.stat().st_size)
        for p in folder.iterdir()
        if p.is_file() and p.name in KEPT_FILES and p.name != META_FILE
    )


def plan_return(
    units: list[CutUnit],
    free_files: int,
    free_bytes: int | None = None,
    max_parts: int = MAX_PARTS,
) -> ReturnPlan:
    """What of ``units``' kept encoders fits ``min(max_parts, free_files)`` parts and, where
    given, ``free_bytes`` (what the files sent back may still weigh together).

    Units with the most cut work come first; every unit's first fraction (its final kept
    encoder) is placed before any unit's others, so as many units as fit can finish without
    pre-training again. A kept folder that is missing or damaged here cannot be returned; what
    does not fit is named with why."""
    plan = ReturnPlan()
    slots = max(0, min(max_parts, free_files))
    capacity = slots * PAYLOAD_BYTES
    if free_bytes is not None:
        capacity = min(capacity, free_bytes - slots * HEADER_BYTES)
    capacity -= 2 * tarfile.RECORDSIZE  # the tar's end and its padding
    ordered = sorted(units, key=lambda u: (-u.unfinished, u.run.name))
    usable: dict[Path, list[float]] = {}
    for unit in ordered:
        usable[unit.run] = []
        for fraction in unit.fractions:
            problem = kept_problem(RunLayout(unit.run).kept(fraction))
            if problem is None:
                usable[unit.run].append(fraction)
            else:
                plan.left_out.append(
                    left(unit.run, fraction, f"its kept encoder is not whole here ({problem})")
                )
    left_bytes = "" if free_bytes is None else f", {max(0, free_bytes) / 2**20:.1f} MiB"
    why_full = (
        f"the parts would need more than {slots} file(s) of {PART_BYTES // 2**20} MiB"
        f"{left_bytes} ({'no file is left' if slots == 0 else 'what is left'} to send back)"
    )
    total = 0
    for unit in ordered:  # first pass: each unit's final kept encoder with its records
        if not usable[unit.run]:
            continue
        first = usable[unit.run][0]
        cost = records_bytes(unit.run) + kept_bytes(unit.run, first)
        if total + cost <= capacity:
            plan.chosen[unit.run] = [first]
            total += cost
        else:
            plan.left_out += [left(unit.run, f, why_full) for f in usable[unit.run]]
    for unit in ordered:  # second pass: the chosen units' other kept encoders
        if unit.run not in plan.chosen:
            continue
        for fraction in usable[unit.run][1:]:
            cost = kept_bytes(unit.run, fraction)
            if total + cost <= capacity:
                plan.chosen[unit.run].append(fraction)
                total += cost
            else:
                plan.left_out.append(left(unit.run, fraction, why_full))
    plan.bytes = total + 2 * tarfile.RECORDSIZE if plan.chosen else 0
    plan.parts = math.ceil(plan.bytes / PAYLOAD_BYTES)
    return plan


def return_order(run: Path, started_on: set[float]) -> tuple[float, ...]:
    """A run's kept fractions on disk in the order to return them: the final one (what its
    fine-tunes read), then those in ``started_on`` (where its cut evaluations had started),
    then the others, largest first."""
    fractions = sorted(RunLayout(run).kept_on_disk(), reverse=True)
    first, rest = fractions[:1], fractions[1:]
    cut = [f for f in rest if f in started_on]
    return (*first, *cut, *[f for f in rest if f not in started_on])


def left(run: Path, fraction: float, why: str) -> dict[str, Any]:
    return {"run": run.name, "fraction": fraction_name(fraction), "why": why}


def part_name(name: str, part: int, parts: int) -> str:
    return f"{name}.kept.part{part}of{parts}"


def write_parts(plan: ReturnPlan, name: str, out: Path, scratch: Path) -> dict[str, Any]:
    """Write ``plan``'s run folders as parts ``<name>.kept.partIofN`` into ``out`` (the tar is
    built in ``scratch`` first); what was written: the parts with their sizes and checksums,
    the whole's, the units. All or none: a failure removes the parts already written and
    raises ``WriteFailed`` (the disk refused) or ``InputError`` naming what failed."""
    if not PART_NAME.match(part_name(name, 1, 1)):
        raise InputError(f"{name!r} cannot name kept parts (letters, digits, _ = . + - only)")
    written: list[Path] = []
    target = Path(out)
    try:
        Path(scratch).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch, prefix=".kept-") as tmp:
            whole = Path(tmp) / "kept.tar"
            header = write_whole(plan, name, whole)
            with whole.open("rb") as f:
                for index in range(1, header["parts"] + 1):
                    chunk = f.read(PAYLOAD_BYTES)
                    target = Path(out) / part_name(name, index, header["parts"])
                    with atomic_file(target) as part:
                        part.write_bytes(encode_header(header | {"part": index}) + chunk)
                    written.append(target)
    except (OSError, WriteFailed, InputError) as exc:
        for path in written:
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise_write_failure(target, exc)
            raise WriteFailed(f"cannot write {target}: {exc}") from exc
        raise
    return plan.as_record() | {
        "parts": [
            {"file": p.name, "bytes": p.stat().st_size, "sha256": d}
            for p, d in zip(written, header["sha256"], strict=True)
        ],
        "whole": header["whole"],
    }


def write_whole(plan: ReturnPlan, name: str, whole: Path) -> dict[str, Any]:
    """The plan's files as one tar at ``whole``; the header its parts will carry."""
    with tarfile.open(whole, "w", format=tarfile.PAX_FORMAT) as tar:
        for run, fractions in plan.chosen.items():
            for path in travelling_files(run, fractions):
                arcname = PurePosixPath("pretrain", run.name, path.relative_to(run).as_posix())
                tar.add(path, str(arcname), recursive=False, filter=plain_member)
    size = whole.stat().st_size
    parts = max(1, math.ceil(size / PAYLOAD_BYTES))
    if parts > MAX_PARTS:
        raise InputError(f"the kept encoders are {size} bytes: more than {MAX_PARTS} parts")
    digests, whole_digest = [], hashlib.sha256()
    with whole.open("rb") as f:
        for _ in range(parts):
            chunk = f.read(PAYLOAD_BYTES)
            digests.append(hashlib.sha256(chunk).hexdigest())
            whole_digest.update(chunk)
    return {
        "format": PART_FORMAT,
        "version": PART_VERSION,
        "name": name,
        "parts": parts,
        "sha256": digests,
        "whole": {"bytes": size, "sha256": whole_digest.hexdigest()},
        "units": plan.as_record()["units"],
    }


def travelling_files(run: Path, fractions: list[float]) -> list[Path]:
    """The run's records, every kept folder's ``kept.json``, the chosen kept folders whole."""
    layout = RunLayout(run)
    files = [run / name for name in RUN_RECORDS if (run / name).is_file()]
    for fraction in layout.kept_on_disk():
        folder = layout.kept(fraction)
        names = KEPT_FILES if fraction in fractions else (META_FILE,)
        files += [folder / n for n in names if (folder / n).is_file()]
    return files


def plain_member(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A member as any machine reads it: no owner, no permissions beyond reading."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o644
    return info


def encode_header(header: dict[str, Any]) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    if len(text) >= HEADER_BYTES:
        raise InputError(f"a kept part's header is {len(text)} bytes, more than {HEADER_BYTES}")
    return text.ljust(HEADER_BYTES - 1) + b"\n"


# ------------------------------------------------------------------ reading them back


def found_parts(folder: Path) -> dict[str, list[Path]]:
    """The kept parts lying in ``folder`` (not below it), by set name."""
    sets: dict[str, list[Path]] = {}
    for path in sorted(Path(folder).glob("*.kept.part*")):
        if (match := PART_NAME.match(path.name)) and path.is_file() and not path.is_symlink():
            sets.setdefault(match["name"], []).append(path)
    return sets


def unpack_parts(paths: list[Path], study: Path, scratch: Path) -> list[str]:
    """Verify one set of kept parts and rebuild its run folders in ``study`` (each replaced
    whole); the run folders' names. Anything wrong is one ``InputError`` naming the part."""
    header = checked_headers(paths)
    Path(scratch).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix=".kept-") as tmp:
        whole = Path(tmp) / "kept.tar"
        join_parts(sorted(paths, key=part_index), header, whole)
        runs = extract_members(whole, Path(tmp) / "x", header["name"])
        for run in runs:
            check_run_folder(Path(tmp) / "x" / "pretrain" / run, header["name"])
        for run in runs:
            with atomic_dir(Path(study) / "pretrain" / run) as target:
                shutil.copytree(Path(tmp) / "x" / "pretrain" / run, target, dirs_exist_ok=True)
    return runs


def part_index(path: Path) -> int:
    match = PART_NAME.match(path.name)
    return int(match["part"]) if match else 0


def read_header(path: Path) -> dict[str, Any]:
    """A part's header, checked for shape; an ``InputError`` naming the part otherwise."""
    try:
        size = path.stat().st_size
        if not HEADER_BYTES < size <= PART_BYTES:
            raise ValueError(f"{size} bytes, not between {HEADER_BYTES} and {PART_BYTES}")
        with path.open("rb") as f:
            raw = f.read(HEADER_BYTES)
        if not raw.endswith(b"\n"):
            raise ValueError("no header")
        header = json.loads(raw.decode())
        if not isinstance(header, dict) or header.get("format") != PART_FORMAT:
            raise ValueError("not a kept part's header")
        if not isinstance(header.get("version"), int) or header["version"] > PART_VERSION:
            raise ValueError(f"written by a newer electra-ablate (version {header['version']})")
        parts, digests, whole = header.get("parts"), header.get("sha256"), header.get("whole")
        if not isinstance(parts, int) or not 1 <= parts <= MAX_PARTS:
            raise ValueError(f"{parts!r} parts")
        if not isinstance(digests, list) or len(digests) != parts:
            raise ValueError("its checksums do not match its count of parts")
        if not all(isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) for d in digests):
            raise ValueError("a checksum is not a sha256")
        if not isinstance(whole, dict) or not isinstance(whole.get("bytes"), int):
            raise ValueError("no size of the whole")
        if not isinstance(whole.get("sha256"), str):
            raise ValueError("no checksum of the whole")
        named = PART_NAME.match(path.name)
        if not named or header.get("part") != part_index(path) or parts != int(named["parts"]):
            raise ValueError("its header and its file name disagree")
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise InputError(f"{path} is not a kept part: {exc}") from None
    return header


def checked_headers(paths: list[Path]) -> dict[str, Any]:
    """The header a set of parts shares, after checking that every part of the set is there
    once and that all agree."""
    if not paths:
        raise InputError("no kept parts given")
    paths = sorted(paths, key=part_index)
    headers = [read_header(p) for p in paths]
    first = headers[0]
    for path, header in zip(paths, headers, strict=True):
        if any(header.get(k) != first.get(k) for k in ("name", "parts", "sha256", "whole")):
            raise InputError(f"{path} belongs to another set of kept parts than {paths[0]}")
    if [part_index(p) for p in paths] != list(range(1, first["parts"] + 1)):
        have = ", ".join(p.name for p in paths)
        raise InputError(f"kept parts {first['name']}: {first['parts']} expected, found {have}")
    if not PART_NAME.match(part_name(str(first["name"]), 1, 1)):
        raise InputError(f"{paths[0]}: {first['name']!r} is not a name of kept parts")
    return first


def join_parts(paths: list[Path], header: dict[str, Any], whole: Path) -> None:
    """The parts' payloads, in order, written to ``whole``, each matching its sha256 and the
    whole matching its own."""
    digest, total = hashlib.sha256(), 0
    with whole.open("wb") as out:
        for index, path in enumerate(paths):
            with path.open("rb") as f:
                f.seek(HEADER_BYTES)
                payload = f.read(PAYLOAD_BYTES + 1)
            if hashlib.sha256(payload).hexdigest() != header["sha256"][index]:
                raise InputError(f"{path} is damaged: it does not match its checksum")
            digest.update(payload)
            total += len(payload)
            out.write(payload)
    if total != header["whole"]["bytes"] or digest.hexdigest() != header["whole"]["sha256"]:
        raise InputError(f"kept parts {header['name']} do not add up to their whole")


def expected_member(name: str) -> tuple[str, str | None] | None:
    """``(run folder, kept folder or None)`` of an expected member's name, else None."""
    parts = PurePosixPath(name).parts
    if len(parts) < 3 or parts[0] != "pretrain" or not RUN_FOLDER.match(parts[1]):
        return None
    if len(parts) == 3 and parts[2] in RUN_RECORDS:
        return parts[1], None
    if len(parts) == 5 and parts[2] == "kept" and parts[4] in KEPT_FILES:
        try:
            if fraction_name(float(parts[3])) == parts[3]:
                return parts[1], parts[3]
        except ValueError:
            return None
    return None


WHOLE_LIMITS = Limits(
    members=10_000, member_bytes=MAX_PARTS * PAYLOAD_BYTES, total_bytes=MAX_PARTS * PAYLOAD_BYTES
)
"""What the joined tar may hold: it is uncompressed, so its members weigh no more than the
parts themselves."""
EXPECTED = (
    *(f"pretrain/*/{name}" for name in RUN_RECORDS),
    *(f"pretrain/*/kept/*/{name}" for name in KEPT_FILES),
)
"""The tar's members by pattern (``expected_member`` checks the names' shapes further)."""


def extract_members(whole: Path, target: Path, name: str) -> list[str]:
    """Stream the tar's members into ``target`` (``electra_ablate.infra.archives``), each
    checked to be an expected regular file, once, before any of its bytes is written; the run
    folders it holds. ``target`` is scratch: a refusal leaves it to be discarded."""
    runs: list[str] = []
    try:
        for member in members(whole, WHOLE_LIMITS, EXPECTED, "", "an expected file"):
            where = expected_member(member.name)
            if where is None:
                raise ArchiveRefused(f"{member.name!r} is not an expected file")
            if where[0] not in runs:
                runs.append(where[0])
            member.save(target / member.name)
    except ArchiveUnreadable as exc:
        raise InputError(f"kept parts {name} do not hold a readable tar ({exc})") from None
    except ArchiveRefused as exc:
        what = "" if exc.limit else "unexpected member: "
        raise InputError(f"kept parts {name}: {what}{exc}") from None
    except OSError as exc:
        raise InputError(f"kept parts {name} cannot be unpacked ({exc})") from None
    if not runs:
        raise InputError(f"kept parts {name} hold no run")
    return runs


def check_run_folder(run: Path, name: str) -> None:
    """A rebuilt run folder is a finished run whose id is its ``run.json``'s hash, and each of
    its kept folders is whole (its manifest) or its ``kept.json`` alone (as a pack carries it)."""
    where = f"kept parts {name}: {run.name}"
    try:
        config = json.loads((run / "run.json").read_text())
        done = json.loads((run / "done.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{where} has no readable run.json and done.json ({exc})") from None
    if not isinstance(config, dict) or config_hash(config) != RUN_FOLDER.match(run.name)["id"]:
        raise InputError(f"{where}: its run.json is not what its id is the hash of")
    if not isinstance(done, dict) or done.get("status") != "done":
        raise InputError(f"{where} is not a finished run")
    whole = 0
    for fraction in RunLayout(run).kept_on_disk():
        folder = RunLayout(run).kept(fraction)
        names = sorted(p.name for p in folder.iterdir())
        if names == [META_FILE]:
            continue  # its weights stayed on the node, as a pack leaves them
        try:
            listed = read_manifest(folder)
        except ValueError as exc:
            raise InputError(f"{where}: kept {folder.name}: {exc}") from None
        if listed is None or sorted([*listed, MANIFEST]) != names:
            raise InputError(f"{where}: kept {folder.name} does not hold what its manifest lists")
        if (problem := kept_problem(folder)) is not None:
            raise InputError(f"{where}: kept {folder.name} is damaged ({problem})")
        meta = json.loads((folder / META_FILE).read_text())
        if meta.get("run_id") != RUN_FOLDER.match(run.name)["id"]:
            raise InputError(f"{where}: kept {folder.name} is another run's encoder")
        whole += 1
    if not whole:
        raise InputError(f"{where} holds no kept encoder")
