"""An exclusive lock on a folder that names its holder, for one writer per study (or per unit).

The lock is ``fcntl.flock`` on a small file in the folder. The kernel releases it when its holder
ends in any way (exit, Ctrl-C, ``kill -9``, a crashed node's NFS lease expiring), so a crash never
leaves a study locked: the file that stays behind is only a note. ``flock`` rather than
``lockf``/``fcntl`` record locks because a record lock is dropped when its process closes *any*
descriptor of the file, which reading the holder's note from the same process would do; and
because on Linux ``flock`` on NFS is carried by the server's byte-range locks, so a folder shared
between machines is covered too. A process that forks keeps its lock in the child's descriptor,
so worker processes are started with ``spawn`` (no descriptors inherited) and never take it again.

The holder writes its PID, host, start time and command into the file after it locks it, so
that a second process can say who holds the folder; readers test the lock itself, never the
note's presence, to decide whether a holder is alive.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from electra_ablate.infra.errors import AblateError, InputError


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as the holder wrote it."""

    pid: int | None
    host: str
    started: str
    command: str

    def describe(self) -> str:
        who = f"PID {self.pid} on {self.host}" if self.pid else "a process that has not said who"
        return who + (f" (since {self.started})" if self.started else "")


class LockHeld(AblateError):
    """The folder is held by another process (exit 2: nothing ran; wait, or use another one)."""

    exit_code = 2

    def __init__(self, message: str, holder: Holder) -> None:
        super().__init__(message)
        self.holder = holder


class FolderLock:
    """An exclusive ``flock`` on ``path`` (created if missing); release with ``release()`` or
    use as a context manager. ``shared``: a shared lock instead, which any number of holders
    take together (the shards of one study) and which keeps out an exclusive holder."""

    def __init__(self, path: Path, shared: bool = False) -> None:
        self.path = Path(path)
        self.shared = shared
        self._fd: int | None = None

    def acquire(self, wait: bool = False, on_wait: Callable[[Holder], None] | None = None) -> None:
        """Take the lock, or raise ``LockHeld`` naming its holder; ``wait`` blocks until it is
        free instead (``on_wait`` is told who it waits for, once)."""
        while True:
            fd = _open_lock_file(self.path)
            try:
                if not _try_lock(fd, self.shared):
                    holder = read_holder(self.path)
                    if not wait:
                        message = f"{self.path} is locked by {holder.describe()}"
                        raise LockHeld(message, holder) from None
                    if on_wait is not None:
                        on_wait(holder)
                    fcntl.flock(fd, fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX)
                if _is_current(fd, self.path):
                    _write_note(fd)
                    self._fd = fd
                    return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # its holder removed the file (see ``_is_current``): lock the new one

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None

    def __enter__(self) -> FolderLock:
        if self._fd is None:  # ``lock_study`` hands over a lock already held
            self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(fd: int, shared: bool = False, attempts: int = 10) -> bool:
    """Take the lock without blocking; a few tries, because ``current_holder`` (``ablate
    status``) holds it shared for an instant when it looks."""
    for attempt in range(attempts):
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt + 1 < attempts:
                time.sleep(0.1)
    return False


def _is_current(fd: int, path: Path) -> bool:
    """Whether the file locked through ``fd`` is still the one at ``path``. A merge that made a
    new study folder and was refused removes it, lock file included, while it holds the lock;
    a process that waited on the removed file must not count it as the study's lock."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _open_lock_file(path: Path) -> int:
    """The lock file's descriptor; a folder that cannot be written is one line naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.ENOTDIR):
            where = exc.filename or path
            raise InputError(f"cannot write to {where}: {exc.strerror}") from None
        raise


def _write_note(fd: int) -> None:
    note = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["ablate", *sys.argv[1:]]),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(note).encode(), 0)


def read_holder(path: Path) -> Holder:
    """What the holder wrote (fields empty if it has not written yet, or wrote garbage)."""
    try:
        note = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(note, dict):
            note = {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        note = {}
    pid = note.get("pid")
    return Holder(
        pid if isinstance(pid, int) else None,
        str(note.get("host", "")),
        str(note.get("started", "")),
        str(note.get("command", "")),
    )


def current_holder(path: Path) -> Holder | None:
    """The live holder of the lock at ``path``, or None if nobody holds it. Never creates the
    file and never blocks (it takes the lock for an instant if it is free)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_holder(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def wait_message(folder: Path) -> Callable[[Holder], None]:
    """The one line a waiting process prints about whom it waits for."""

    def say(holder: Holder) -> None:
        print(f"waiting for {holder.describe()} to finish with {folder}", file=sys.stderr)
        sys.stderr.flush()

    return say


def lock_study(
    lock_file: Path, folder: Path, wait: bool = False, shared: bool = False
) -> FolderLock:
    """The one place a study folder is locked for writing (``ablate run``, ``merge``, ``clean``):
    held until released, or ``LockHeld`` naming the holder (exit 2); ``wait`` waits instead.
    The message names no option, as the commands that lock differ in theirs (one that can
    wait adds it: ``offering_wait``).
    ``shared``: held together with other shards of the study (``scaleout.shards``)."""
    lock = FolderLock(lock_file, shared)
    try:
        lock.acquire(wait=wait, on_wait=wait_message(folder))
    except LockHeld as exc:
        holder = exc.holder
        what = f"`{holder.command}`" if holder.command else "another process"
        raise LockHeld(  # no option named: each command that can wait offers its own
            f"{folder} is in use by {what} ({holder.describe()}): wait for it to finish, then "
            "run the same command again",
            holder,
        ) from None
    return lock


@contextmanager
def offering_wait(option: str = "--wait") -> Iterator[None]:
    """For a command that has a wait option: a ``LockHeld`` raised inside also offers it."""
    try:
        yield
    except LockHeld as held:
        raise LockHeld(f"{held}, or pass {option} to start when it has", held.holder) from None
