"""Torch's compile caches in one folder that can travel from one stretch of GPU time to the next.

A GPU stretch starts on a fresh machine, so every process there used to compile from cold: 28 to
63 s before a study's first 100 steps, against 4.3 s (BERT) and 6.8 s (ELECTRA) with a warm cache
on the same machine. ``ABLATE_COMPILE_CACHE=FOLDER`` names a folder that holds inductor's cache
(``FOLDER/inductor``: FX graphs, AOTAutograd entries, generated code, autotuning results,
dynamo's shape profiles) and Triton's (``FOLDER/triton``: compiled kernels), and
``FOLDER/manifest.json``, what filled it: torch, Triton, CUDA, Python and the card
(``current_manifest``). Every process activates it at its first compile
(``electra_ablate.pretraining.engine.compiling.compiled``, the one door to ``torch.compile`` in
this project, calls ``activate_from_env`` once per process): it points ``TORCHINDUCTOR_CACHE_DIR``
and ``TRITON_CACHE_DIR`` into the folder (inductor and Triton read them at their first compile,
not at ``import torch``). The spawned workers of ``ablate run`` inherit ``ABLATE_COMPILE_CACHE``
and activate at their own first compile; ``ablate run`` settles the folder as it starts
(``electra_ablate.scaleout.runner.run_study``), so that a study leaves a cache whether or not it
compiled; a process that never compiles (``ablate pack``, a collect) never imports what the
check needs.

A folder filled by another torch, Triton or card is not an error: ``activate`` says so in one
line naming what differs, sets the foreign contents aside (``FOLDER/set-aside/STAMP-PID``) and
starts cold. Inductor's and Triton's own keys include their versions and the device, so a
foreign entry would only miss; the manifest makes the miss visible and keeps the folder one
machine's. Several processes may activate one folder at once (a study and ``ablate run
--collect`` beside it, a torchrun's ranks): the check and the setting aside happen under a lock
on ``FOLDER/.lock``. Each activation appends one line to ``FOLDER/activations.jsonl``:
``{"pid", "t", "status": "warm" | "cold" | "ignored", "why"}``.

The travelling form is ``compile-cache.tar.xz`` (``pack_cache``, ``unpack_cache``,
``check_archive``), its members under ``compile-cache/``, at most ``LIMIT_BYTES``: the manifest
and ``inductor/``, not ``triton/``. Triton's cache names the files of each kernel by absolute
path (its ``__grp__*.json``), so it does not survive a move to another folder, and an archive
could point those paths anywhere; inductor's FX-graph entries carry the Triton kernels they use
(``bundle_triton_into_fx_graph_cache``, on by default) and write them into ``TRITON_CACHE_DIR``
at the new place when they are hit, where that kernel's folder is not there yet. A compile
cache is code: inductor and Triton load the shared objects, kernels and pickles in it as they
are. So a cache is only taken from a file the user names (``ablate kit --compile-cache FILE``, a
file their own session returned), its sha256 recorded in the kit and checked on the node before
it is unpacked, and an archive is read as untrusted input all the same: regular files only,
names inside ``compile-cache/``, the number of members and their total size bounded, each
member streamed into a plain file (``electra_ablate.infra.archives``, the one reader of
archives from elsewhere).

This module is standard library only (torch is imported inside ``current_manifest``, nowhere
else), so that the GPU node's session (``electra_ablate.scaleout.node.session``), which runs
before anything heavy, packs and unpacks with it.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from electra_ablate.infra.archives import (
    ArchiveRefused,
    ArchiveUnreadable,
    Limits,
    Member,
    members,
)
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.locks import FolderLock
from electra_ablate.infra.storage import atomic_write_text

ENV = "ABLATE_COMPILE_CACHE"
"""The environment variable that names the cache folder."""
INDUCTOR = "inductor"
TRITON = "triton"
TORCH_ENV = {"TORCHINDUCTOR_CACHE_DIR": INDUCTOR, "TRITON_CACHE_DIR": TRITON}
"""The variables inductor and Triton read for their caches, each with its folder in the cache."""
MANIFEST = "manifest.json"
ACTIVATIONS = "activations.jsonl"
SET_ASIDE = "set-aside"
LOCK = ".lock"
FORMAT = "electra-ablate compile cache"
MANIFEST_KEYS = ("torch", "triton", "cuda", "python", "card")
"""What must match for a cache to be used here; a manifest also says when it was made."""

ARCHIVE = "compile-cache.tar.xz"
"""The travelling form's file name (in a kit, in what a GPU session returns)."""
ARCHIVE_ROOT = "compile-cache"
"""The folder every member of the archive sits in."""
PACKED = (MANIFEST, INDUCTOR)
"""What of a cache folder travels: not Triton's folder (see above), nor its activations, lock
or set-aside contents."""
LIMIT_BYTES = 16 * 2**20
"""The most a packed cache may weigh: what one file brought back from a GPU stretch may."""
MAX_FILES = 20_000
"""The most members an archive may have (a study's cache holds hundreds to a few thousand)."""
MAX_UNPACKED_BYTES = 512 * 2**20
"""The most an archive's members may weigh together, unpacked (compiled code compresses
about tenfold under xz; this bounds an archive made to expand without end)."""
MAX_MANIFEST_BYTES = 64 * 2**10
XZ_PRESET = 6
"""xz's default. On a CPU cache of 7.0 MiB (compiled C++ and graph entries): 0.43 MiB in 3.8 s;
preset 3 gave 0.49 MiB in 1.1 s, preset 1 0.67 MiB in 0.6 s (one busy core)."""
LEFT_OUT_SUFFIXES = (".lock", ".tmp")
"""Files a pack leaves out: locks (inductor's ``locks/``) and half-written temporaries."""


class CacheArchiveError(InputError):
    """A compile-cache archive that cannot be used: not a tar.xz of the expected layout, too
    big, or unsafe. One line naming it (exit 2 where a command reports it)."""


# ---------------------------------------------------------------------------- manifest


def current_manifest() -> dict[str, str | None]:
    """What makes a cache usable here: torch, Triton (None where it is not installed), the CUDA
    torch was built for (None on a CPU build), Python's major.minor, and the card: the current
    device's name and compute capability where CUDA is available, else ``cpu``.

    Triton's version is read from its installed metadata rather than by importing it (a second
    or so that a process which never compiles on CUDA should not pay). On a CPU-only machine
    nothing touches CUDA beyond ``torch.cuda.is_available()``; on a GPU machine the card's
    properties add torch's lazy CUDA set-up, which creates no context and takes no card memory.
    """
    import torch  # heavy: only where the manifest is asked for

    card = "cpu"
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(torch.cuda.current_device())
        card = f"{properties.name} (compute {properties.major}.{properties.minor})"
    return {
        "torch": torch.__version__,
        "triton": _installed_version("triton") or _installed_version("pytorch-triton"),
        "cuda": torch.version.cuda,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "card": card,
    }


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def manifest_differences(found: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """Each of ``MANIFEST_KEYS`` on which a cache's manifest and this machine differ, as
    ``torch 2.12.0 (here 2.13.0)``; empty when the cache is usable here."""
    return [
        f"{key} {found.get(key) or 'none'} (here {here.get(key) or 'none'})"
        for key in MANIFEST_KEYS
        if found.get(key) != here.get(key)
    ]


def read_manifest(path: Path) -> dict[str, Any] | None:
    """A cache manifest, or None where there is none; ``ValueError`` saying why where it is not
    one (unreadable, not JSON, another format, a key missing)."""
    try:
        with Path(path).open("rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"its {MANIFEST} cannot be read ({exc.strerror})") from None
    return parse_manifest(raw)


def parse_manifest(raw: bytes) -> dict[str, Any]:
    """``raw`` as a cache manifest, or ``ValueError`` saying why it is not one."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ValueError(f"its {MANIFEST} is over {MAX_MANIFEST_BYTES // 1024} KiB")
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"its {MANIFEST} is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"its {MANIFEST} is not a compile-cache manifest")
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ValueError(f"its {MANIFEST} lacks {', '.join(missing)}")
    return manifest


def _manifest_text(here: Mapping[str, Any]) -> str:
    made = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    entries = {"format": FORMAT, **{key: here.get(key) for key in MANIFEST_KEYS}, "made": made}
    return json.dumps(entries, indent=1)


# ---------------------------------------------------------------------------- activation


@dataclass(frozen=True)
class Activation:
    """One process's activation of a cache folder. ``status``: ``warm`` (its manifest matches
    here), ``cold`` (it had none: one was written), ``ignored`` (it was made by another torch,
    Triton or card: set aside to ``set_aside``, the folder started cold) or ``unusable`` (the
    folder cannot be written: torch's default caches are used, nothing is recorded)."""

    folder: Path
    status: Literal["warm", "cold", "ignored", "unusable"]
    why: str
    set_aside: Path | None = None


def say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def activate_from_env(say: Callable[[str], None] = say_on_stderr) -> Activation | None:
    """``activate`` the folder ``ABLATE_COMPILE_CACHE`` names; None (nothing done) where it is
    unset or empty."""
    folder = os.environ.get(ENV, "").strip()
    return activate(folder, say) if folder else None


def activate(
    folder: Path | str,
    say: Callable[[str], None] = say_on_stderr,
    manifest: Mapping[str, Any] | None = None,
) -> Activation:
    """Use ``folder`` as this process's compile cache, before anything compiles: settle it
    (``open_cache``), then point inductor and Triton into it through ``TORCH_ENV`` (over any
    folder they were given: the variable names this one) and set ``ABLATE_COMPILE_CACHE`` to its
    absolute path, which child processes inherit. ``say`` gets one line where the cache was
    another machine's or cannot be used, nothing otherwise. ``manifest``: this machine's
    (``current_manifest()`` when None)."""
    folder = Path(os.path.abspath(Path(folder).expanduser()))
    try:
        here = dict(manifest) if manifest is not None else current_manifest()
        activation = open_cache(folder, here)
    except Exception as exc:  # a folder it cannot write, a CUDA that fails: never the command's end
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        say(f"compile cache {folder} cannot be used ({why}): compiling without it")
        return Activation(folder, "unusable", why)
    os.environ[ENV] = str(folder)
    for variable, name in TORCH_ENV.items():
        os.environ[variable] = str(folder / name)
    if activation.status == "ignored":
        say(
            f"compile cache {folder} ignored: {activation.why}; its contents are set aside in "
            f"{activation.set_aside} and this process compiles from cold"
        )
    return activation


def open_cache(folder: Path, here: Mapping[str, Any]) -> Activation:
    """Settle ``folder`` for a process whose machine is ``here``, under the folder's lock: a new
    folder gets ``here``'s manifest (cold); a matching one is used (warm); a foreign one (another
    torch, Triton or card, or a manifest that is not one) is set aside and started anew
    (ignored). Records the activation in ``activations.jsonl``. Touches no environment."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(folder / LOCK)
    lock.acquire(wait=True)
    try:
        try:
            found = read_manifest(folder / MANIFEST)
        except ValueError as exc:
            found, differences = None, [str(exc)]
        else:
            differences = [] if found is None else manifest_differences(found, here)
            if differences:
                differences[0] = f"made with {differences[0]}"
        if found is None and not differences:
            atomic_write_text(folder / MANIFEST, _manifest_text(here))
            activation = Activation(folder, "cold", f"no {MANIFEST}: a new cache")
        elif not differences:
            made = found.get("made") or "at an unknown time"
            activation = Activation(folder, "warm", f"its {MANIFEST} matches (made {made})")
        else:
            aside = _set_aside(folder)
            atomic_write_text(folder / MANIFEST, _manifest_text(here))
            activation = Activation(folder, "ignored", ", ".join(differences), aside)
        record_activation(folder, activation)
    finally:
        lock.release()
    return activation


def _set_aside(folder: Path) -> Path:
    """Move a foreign cache's contents into ``set-aside/STAMP-PID`` (each a rename, so never a
    half-moved file); the manifest goes last, so a process stopped half-way leaves a foreign
    manifest that the next activation sets aside with the rest."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = folder / SET_ASIDE / f"{stamp}-{os.getpid()}"
    aside.mkdir(parents=True)
    for name in (INDUCTOR, TRITON, MANIFEST):
        if os.path.lexists(folder / name):
            os.replace(folder / name, aside / name)
    return aside


def record_activation(folder: Path, activation: Activation) -> None:
    """One line appended to ``activations.jsonl`` in one write (``O_APPEND``: lines written by
    processes at once never interleave)."""
    line = {"pid": os.getpid(), "t": time.time(), "status": activation.status}
    line["why"] = activation.why
    fd = os.open(folder / ACTIVATIONS, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def read_activations(folder: Path) -> list[dict[str, Any]]:
    """``activations.jsonl``'s lines (none where there is no such file)."""
    path = Path(folder) / ACTIVATIONS
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


# ---------------------------------------------------------------------------- the archive


@dataclass(frozen=True)
class PackResult:
    """What ``pack_cache`` did: ``archive`` written (``files`` members, ``bytes`` on disk,
    ``unpacked_bytes`` before compression) or, with ``refused`` saying why, nothing written."""

    archive: Path | None
    files: int
    bytes: int
    unpacked_bytes: int
    refused: str | None = None

    @property
    def ok(self) -> bool:
        return self.refused is None


@dataclass(frozen=True)
class ArchiveInfo:
    """An archive that passed every check: its cache manifest, members and unpacked size."""

    manifest: dict[str, Any]
    files: int
    unpacked_bytes: int


def packable_files(folder: Path) -> list[tuple[Path, str]]:
    """The files of a cache folder that travel, each with its name in the archive: the
    manifest first (an unpack reads it without going back), then everything under
    ``inductor/`` that is a plain file, in name order; locks, temporaries, links and anything
    else are left out."""
    folder = Path(folder)
    found: list[tuple[Path, str]] = []
    for top in PACKED:
        start = folder / top
        if start.is_symlink():
            continue
        paths = [start] if top == MANIFEST else _walk(start)
        for path in paths:
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISREG(mode) and not path.name.endswith(LEFT_OUT_SUFFIXES):
                found.append((path, f"{ARCHIVE_ROOT}/{path.relative_to(folder).as_posix()}"))
    return found


def _walk(start: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(start):  # never follows a link to a folder
        dirs.sort()
        for name in sorted(files):
            yield Path(root) / name


def pack_cache(
    folder: Path, archive: Path, limit: int = LIMIT_BYTES, preset: int = XZ_PRESET
) -> PackResult:
    """``folder``'s cache as ``archive`` (a tar.xz, members under ``compile-cache/``), written
    whole or not at all. Refused, with the reason and nothing written (an earlier archive there
    is left as it was), where the folder has no usable manifest, holds more than an unpack
    takes (``MAX_FILES``, ``MAX_UNPACKED_BYTES``), or the archive would pass ``limit``.
    ``preset``: xz's, 0 to 9 (``XZ_PRESET``)."""
    folder, archive = Path(folder), Path(archive)
    try:
        read = read_manifest(folder / MANIFEST)
    except ValueError as exc:
        return PackResult(None, 0, 0, 0, f"{folder} is not a compile cache: {exc}")
    if read is None:
        return PackResult(None, 0, 0, 0, f"{folder} is not a compile cache: it has no {MANIFEST}")
    try:
        files = [(path, name, os.lstat(path)) for path, name in packable_files(folder)]
    except OSError as exc:
        return PackResult(None, 0, 0, 0, f"{folder} cannot be read ({exc})")
    unpacked = sum(st.st_size for _, _, st in files)
    if len(files) > MAX_FILES or unpacked > MAX_UNPACKED_BYTES:
        held = f"{len(files)} files, {unpacked / 2**20:.1f} MiB unpacked"
        limits = f"{MAX_FILES} files, {MAX_UNPACKED_BYTES / 2**20:.0f} MiB"
        return PackResult(
            None, len(files), 0, unpacked, f"{held}: over the {limits} an unpack takes"
        )
    tmp: Path | None = None
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            dir=archive.parent, prefix=f".{archive.name}.", suffix=".tmp"
        )
        os.close(fd)
        tmp = Path(tmp_name)
        with tarfile.open(tmp, "w:xz", preset=preset) as tar:
            for path, name, st in files:
                info = tarfile.TarInfo(name)
                info.size, info.mtime = st.st_size, int(st.st_mtime)
                info.mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
                with path.open("rb") as f:
                    tar.addfile(info, f)
        size = tmp.stat().st_size
        if size > limit:
            over = f"{size / 2**20:.1f} MiB, over the limit of {limit / 2**20:.1f} MiB"
            return PackResult(None, len(files), size, unpacked, f"the archive would be {over}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, archive)
    except OSError as exc:  # a file changed while packing, or the disk refused the write
        return PackResult(None, len(files), 0, unpacked, f"cannot pack {folder} ({exc})")
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    return PackResult(archive, len(files), size, unpacked)


def check_archive(archive: Path, limit: int = LIMIT_BYTES) -> ArchiveInfo:
    """Read ``archive`` through, checking everything ``unpack_cache`` checks, without writing;
    ``CacheArchiveError`` naming what is wrong."""
    return _read_archive(Path(archive), limit, into=None)


def unpack_cache(archive: Path, folder: Path, limit: int = LIMIT_BYTES) -> ArchiveInfo:
    """``archive`` (untrusted) unpacked as the cache folder ``folder``, which must be absent or
    empty: every member checked before it is written (regular files only, under
    ``compile-cache/``: its manifest and ``inductor/``; no name twice, at most
    ``MAX_FILES`` members and ``MAX_UNPACKED_BYTES`` together, the archive itself at most
    ``limit``), each streamed into a plain file in a temporary folder beside ``folder``, which
    is renamed into place only when all of it passed. ``CacheArchiveError`` otherwise, with
    nothing left behind."""
    archive, folder = Path(archive), Path(folder)
    if folder.is_symlink() or (folder.exists() and (not folder.is_dir() or any(folder.iterdir()))):
        raise CacheArchiveError(f"cannot unpack a compile cache into {folder}: it is not empty")
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        info = _read_archive(archive, limit, into=scratch)
        unpacked = scratch / ARCHIVE_ROOT
        if folder.exists():
            folder.rmdir()  # empty, checked above
        os.replace(unpacked, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return info


def _read_archive(archive: Path, limit: int, into: Path | None) -> ArchiveInfo:
    """Every member of ``archive`` checked (and, with ``into``, streamed into a file there) in
    one pass by ``electra_ablate.infra.archives``: a member's name and header are checked
    before its data is read, and its bytes counted as they are, so a bomb stops at its first
    oversized member."""
    try:
        size = archive.stat().st_size
    except OSError as exc:
        raise CacheArchiveError(f"{archive}: {exc.strerror or exc}") from None
    if not archive.is_file():
        raise CacheArchiveError(f"{archive} is not a file")
    if size > limit:
        raise CacheArchiveError(
            f"{archive} is {size / 2**20:.1f} MiB, over the {limit / 2**20:.1f} MiB a compile "
            "cache may weigh"
        )
    limits = Limits(MAX_FILES, MAX_UNPACKED_BYTES, MAX_UNPACKED_BYTES)
    layout = (f"{ARCHIVE_ROOT}/{MANIFEST}", f"{ARCHIVE_ROOT}/{INDUCTOR}/**/*")
    files, unpacked = 0, 0
    manifest_raw: bytes | None = None
    try:
        for member in members(archive, limits, layout, "xz", "inside its layout"):
            files, unpacked = files + 1, unpacked + member.size
            if into is not None:
                member.save(into / member.name)
            if member.name == layout[0]:  # read once: xz cannot seek back
                manifest_raw = _head(member, into)
    except ArchiveUnreadable as exc:
        raise CacheArchiveError(f"{archive} is not a readable tar.xz archive ({exc})") from None
    except ArchiveRefused as exc:
        if exc.limit is not None:
            raise CacheArchiveError(
                f"{archive} unpacks to more than {MAX_FILES} files or "
                f"{MAX_UNPACKED_BYTES / 2**20:.0f} MiB: not a compile cache this takes"
            ) from None
        raise CacheArchiveError(f"{archive} is not a compile cache: {exc}") from None
    except OSError as exc:
        raise CacheArchiveError(f"{archive} cannot be unpacked ({exc.strerror or exc})") from None
    if manifest_raw is None:
        raise CacheArchiveError(
            f"{archive} is not a compile cache: it has no {ARCHIVE_ROOT}/{MANIFEST}"
        )
    try:
        manifest = parse_manifest(manifest_raw)
    except ValueError as exc:
        raise CacheArchiveError(f"{archive} is not a compile cache: {exc}") from None
    return ArchiveInfo(manifest, files, unpacked)


def _head(member: Member, into: Path | None) -> bytes:
    """A member's first ``MAX_MANIFEST_BYTES`` and one more: from the file just written, or
    read from the archive where nothing is written."""
    if into is not None:
        with (into / member.name).open("rb") as f:
            return f.read(MAX_MANIFEST_BYTES + 1)
    return member.head(MAX_MANIFEST_BYTES + 1)[: MAX_MANIFEST_BYTES + 1]
