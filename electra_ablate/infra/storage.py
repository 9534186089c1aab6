"""Atomic writes: results and checkpoints appear whole or not at all.

Each write goes to a temporary name beside its target and is renamed into place. ``mkstemp`` and
``mkdtemp`` create their files 0600 and folders 0700 whatever the umask (they are meant for
secrets), so every temporary is given the mode a plain ``open`` or ``mkdir`` would have had:
colleagues on a shared file system can read a study exactly as the user's umask allows.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from electra_ablate.infra.errors import WriteFailed

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask (reading it means setting it, so briefly, under a lock)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _as_created(path: Path | str, directory: bool = False) -> None:
    """Give a ``mkstemp``/``mkdtemp`` temporary the mode ``open``/``mkdir`` would have given."""
    os.chmod(path, (0o777 if directory else 0o666) & ~current_umask())


def _tree_as_created(root: Path) -> None:
    """Every file and folder under ``root`` as ``open``/``mkdir`` would have created them: some
    writers (safetensors) create 0600 files, and copies keep their source's mode."""
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            _as_created(Path(folder) / name, directory=True)
        for name in files:
            _as_created(Path(folder) / name)


def atomic_write_bytes(path: Path, data: bytes, sync: bool = True) -> None:
    """``data`` at ``path``, whole or not at all (a temporary file renamed into place).
    ``sync=False`` skips the ``fsync``: a kill still never leaves half a file, only a power cut
    can cost the write (for bookkeeping rewritten often, such as a tracker ledger)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        _as_created(tmp)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        raise_write_failure(path, exc)
        raise


def atomic_write_text(path: Path, text: str, sync: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), sync=sync)


@contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        _as_created(tmp)
        yield Path(tmp)
        os.replace(tmp, path)
    except Exception as exc:
        raise_write_failure(path, exc)
        raise
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; swap it into place if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        _as_created(tmp, directory=True)
        yield tmp
        _tree_as_created(tmp)
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except Exception as exc:
        raise_write_failure(path, exc)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})
"""Write errors that the place written to causes (full, over quota, a file size limit,
read-only, failing), not the program."""


def raise_write_failure(path: Path, exc: BaseException) -> None:
    """Raise ``WriteFailed`` naming ``path`` where ``exc`` is a write the disk refused: an
    ``OSError`` of ``NO_ROOM``, or the same error as safetensors (``SafetensorError`` with the
    OS error's code in its text) or torch's writer (a ``RuntimeError``) report it. Anything
    else is left to the caller."""
    if isinstance(exc, OSError):
        code = exc.errno
    elif type(exc).__name__ == "SafetensorError" or (
        isinstance(exc, RuntimeError) and "write" in str(exc).lower()
    ):
        found = re.search(r"code: (\d+)", str(exc))
        code = int(found.group(1)) if found else None  # torch's writer names no code
    else:
        return
    if code is not None and code not in NO_ROOM:
        return
    reason = os.strerror(code) if code is not None else "the write failed (a full disk?)"
    raise WriteFailed(  # no option named: every command writes, each has its own (or none)
        f"cannot write {path}: {reason}: free space there, then run the same command again; "
        "finished work is kept"
    ) from exc
