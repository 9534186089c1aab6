"""A disk that refuses a command's writes, for a command run in this process
(``ablate_cli.ablate``): no file may grow past a given size, so the first write past it fails
with EFBIG, which the toolkit treats as a full disk's ENOSPC
(``electra_ablate.infra.storage.NO_ROOM``), at a file the test chooses by its size. A limit of
this process's own, set for the command and put back after it: a process started only to carry
the limit would add its ~3 s of start-up and check nothing more (the command's line and exit
status are the same in this process)."""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def files_limited_to(limit: int) -> Iterator[None]:
    """While inside: files written by this process may not grow past ``limit`` bytes. The soft
    limit only (the hard one stays, so the old soft limit can be put back), and SIGXFSZ
    ignored: a write past the limit fails, where by default the signal would end the test
    process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
