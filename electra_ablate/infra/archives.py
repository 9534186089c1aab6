"""One bounded, checked, streaming reader for archives that come from elsewhere.

Result packs (``electra_ablate.scaleout.packs``, read by ``ablate merge`` and by the GPU time
model, ``electra_ablate.scaleout.replay``), a kit's compile cache
(``electra_ablate.infra.compile_cache``) and a GPU session's kept parts
(``electra_ablate.scaleout.kept_parts``) are all tar archives another machine wrote, so all
are untrusted: a crafted one may carry a file its format never holds (a training state that
the next ``ablate run`` would load), a name that lands outside its folder, a link, or a small
compressed member that inflates to gigabytes. Each of them is read here, member by member,
and nothing is kept or written before it passed:

- only regular files (and folders, which are skipped), never links, devices or sparse files;
- no absolute name, no ``..``, no backslash, no name twice;
- where the caller gives ``allowed`` (path patterns, ``*`` within one folder, ``**/`` any
  folders), a member that matches none is refused by name, before anything of it is read;
- ``Limits``: the archive's own size, the number of members, each member's bytes and all
  members' bytes together, checked from each header before its data is read and again while
  reading it (in chunks, stopping at the limit plus one byte), so neither a lying header nor a
  member of a gigabyte is ever held whole.

A member is read into memory (``Member.read``) or streamed into a file (``Member.save``). The
caller turns ``ArchiveRefused`` into its own one-line error. Standard library only: a GPU
node's controller imports it without torch.
"""

from __future__ import annotations

import lzma
import re
import stat
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath
from typing import BinaryIO

CHUNK = 1 << 20
"""Bytes read at a time while a member is read or written out."""


READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError)
"""What reading a truncated, damaged or missing archive raises."""


def why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(
        exc
    ).__name__


class ArchiveRefused(ValueError):
    """An archive, or one of its members, that this reader refuses (the message says why);
    ``limit``: the ``Limits`` field it passed, where that is why (a caller names its option)."""

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


class ArchiveUnreadable(ArchiveRefused):
    """An archive that does not read as a whole tar (truncated, another format, missing)."""


@dataclass(frozen=True)
class Limits:
    """What one archive may hold: ``archive_bytes`` on disk (None: not checked), ``members``,
    ``member_bytes`` per member unpacked and ``total_bytes`` for all members together (every
    member counts, read or skipped: skipping a member of a compressed stream inflates it)."""

    members: int
    member_bytes: int
    total_bytes: int
    archive_bytes: int | None = None


def mib(size: int) -> str:
    """A byte count as limits are stated to users: in MiB, or bytes below one."""
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size} bytes"


@cache
def _pattern(glob: str) -> re.Pattern[str]:
    """``glob`` as a regular expression: ``*`` any characters but ``/``, ``**/`` any folders."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether the relative POSIX path ``name`` matches one of ``patterns``."""
    return any(_pattern(p).match(name) for p in patterns)


def check_name(name: str) -> str:
    """``name`` as a clean relative POSIX path, or ``ArchiveRefused`` where it is absolute,
    climbs out (``..``), holds a backslash or is empty."""
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or "\\" in name or not pure.parts:
        raise ArchiveRefused(f"{name!r} points outside its folder")
    return pure.as_posix()


@dataclass
class _Counter:
    members: int = 0
    declared: int = 0
    read: int = 0
    names: set[str] = field(default_factory=set)


class Member:
    """One regular file of the archive, checked by name and declared size; its data is read
    only through ``read`` or ``save``, both bounded."""

    def __init__(
        self,
        tar: tarfile.TarFile,
        info: tarfile.TarInfo,
        name: str,
        limits: Limits,
        count: _Counter,
    ) -> None:
        self.name = name
        self.size = info.size
        self.executable = bool(info.mode & stat.S_IXUSR)
        self._tar, self._info, self._limits, self._count = tar, info, limits, count

    def chunks(self) -> Iterator[bytes]:
        """The member's bytes in chunks, counted against the member's and the archive's limit
        as they come (whatever its header said)."""
        try:
            handle = self._tar.extractfile(self._info)
            yield from self._bounded(handle) if handle is not None else ()
        except READ_ERRORS as exc:
            raise ArchiveUnreadable(f"not a whole, readable archive ({why(exc)})") from None

    def _bounded(self, handle: BinaryIO) -> Iterator[bytes]:
        seen = 0
        while chunk := handle.read(min(CHUNK, self._limits.member_bytes + 1 - seen)):
            seen += len(chunk)
            self._count.read += len(chunk)
            if seen > self._limits.member_bytes:
                raise ArchiveRefused(
                    f"{self.name} unpacks to more than {mib(self._limits.member_bytes)}, the "
                    "most one member may hold",
                    "member_bytes",
                )
            if self._count.read > self._limits.total_bytes:
                raise ArchiveRefused(
                    f"its members unpack to more than {mib(self._limits.total_bytes)} together",
                    "total_bytes",
                )
            yield chunk

    def read(self) -> bytes:
        """The member's bytes (at most ``Limits.member_bytes``)."""
        return b"".join(self.chunks())

    def head(self, size: int) -> bytes:
        """The member's first ``size`` bytes and at most a chunk more; the rest is not read."""
        got = bytearray()
        for chunk in self.chunks():
            got += chunk
            if len(got) >= size:
                break
        return bytes(got)

    def save(self, path: Path) -> None:
        """The member streamed into the new file ``path`` (mode 0o644, or 0o755 where the
        member is executable by its owner); never follows a link there."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "xb") as out:
            for chunk in self.chunks():
                out.write(chunk)
        path.chmod(0o755 if self.executable else 0o644)


def members(
    path: Path,
    limits: Limits,
    allowed: Sequence[str] | None = None,
    compression: str = "*",
    refuse: str = "a file this archive may carry",
) -> Iterator[Member]:
    """The regular files of the tar archive at ``path`` (``compression``: ``gz``, ``xz``,
    ``*`` for any, empty for none), in order, each checked as the module's docstring says
    before it is yielded. ``allowed``: patterns a member's full name must match (a member that
    matches none is refused as "not ``refuse``"). Folders are skipped; an unreadable archive is
    ``ArchiveRefused`` like any other."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if limits.archive_bytes is not None and size > limits.archive_bytes:
            raise ArchiveRefused(
                f"it is {mib(size)}, over the {mib(limits.archive_bytes)} allowed", "archive_bytes"
            )
        count = _Counter()
        with tarfile.open(path, f"r:{compression}") as tar:
            for info in tar:
                yield from _checked(tar, info, limits, (allowed, refuse), count)
    except READ_ERRORS as exc:
        raise ArchiveUnreadable(f"not a whole, readable archive ({why(exc)})") from None


def _checked(
    tar: tarfile.TarFile,
    info: tarfile.TarInfo,
    limits: Limits,
    allow: tuple[Sequence[str] | None, str],
    count: _Counter,
) -> Iterator[Member]:
    allowed, refuse = allow
    name = check_name(info.name)
    count.members += 1
    if count.members > limits.members:
        raise ArchiveRefused(f"it holds more than {limits.members} members", "members")
    if info.isdir():
        return
    if not info.isfile() or info.issparse():
        raise ArchiveRefused(f"{name} is not a regular file")
    if name in count.names:
        raise ArchiveRefused(f"{name} appears twice")
    count.names.add(name)
    if allowed is not None and not matches(name, allowed):
        raise ArchiveRefused(f"{name} is not {refuse}")
    if info.size > limits.member_bytes:
        raise ArchiveRefused(
            f"{name} unpacks to {mib(info.size)}, over the {mib(limits.member_bytes)} one member "
            "may hold",
            "member_bytes",
        )
    count.declared += info.size
    if count.declared > limits.total_bytes:
        raise ArchiveRefused(
            f"its members unpack to more than {mib(limits.total_bytes)} together", "total_bytes"
        )
    yield Member(tar, info, name, limits, count)


def read_all(
    path: Path,
    limits: Limits,
    allowed: Sequence[str] | None = None,
    compression: str = "*",
    refuse: str = "a file this archive may carry",
) -> dict[str, bytes]:
    """Every regular file of the archive by its name, read as ``members`` checks them."""
    return {m.name: m.read() for m in members(path, limits, allowed, compression, refuse)}
