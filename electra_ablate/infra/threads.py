"""torch's intra-op thread count is process-wide state: a library call that changes it for
its own work puts the caller's count back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block at ``threads`` intra-op threads (``None``: as it is), then restore."""
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
