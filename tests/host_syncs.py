"""Counting host-device synchronisations on the CPU, where there is no device to wait for.

On a GPU the host queues kernels and runs ahead; anything that needs a device value on the host
(``.item()``, ``bool(t)``, ``float(t)``, ``.tolist()``), an op whose output size depends on the
data (boolean indexing, ``nonzero``, ``unique``, ``masked_select``), or a tensor built from host
data inside the step (``torch.tensor([...], device=...)``: a blocking copy) makes the host wait.
On the CPU nothing waits, but the same calls still pass through the dispatcher, so counting them
here says how many times a GPU step would stall.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

SYNC_OPS = {
    aten._local_scalar_dense.default,  # .item(), bool(t), float(t), int(t)
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
    aten.equal.default,
    aten.is_nonzero.default,
    aten.repeat_interleave.Tensor,
    aten.lift_fresh.default,  # torch.tensor(host data): a blocking host-to-device copy
}
BOOL_INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default}


def _where() -> str:
    """The innermost frame of the project (or its objectives) that asked for the sync."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if ("electra_ablate" in frame.filename or "objectives" in frame.filename) and (
            "host_syncs" not in frame.filename
        ):
            return f"{frame.filename.rsplit('/', 2)[-2:]}:{frame.lineno} {frame.line}"
    return "(outside the project)"


class HostSyncCounter(TorchDispatchMode):
    """Records every host sync inside the ``with`` block, with where it came from.

    ``exempt`` tensors are host-resident by design on a GPU too (torch keeps a non-fused AdamW's
    ``step`` counters on the CPU), so reading them is no device sync.
    """

    def __init__(self, exempt: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.exempt = {id(t) for t in exempt}
        self.syncs: list[str] = []
        self._patched: dict[str, Any] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self._is_sync(func, args):
            self.syncs.append(f"{func} at {_where()}")
        return func(*args, **(kwargs or {}))

    def _is_sync(self, func, args) -> bool:
        if func in SYNC_OPS:
            return not (args and isinstance(args[0], torch.Tensor) and id(args[0]) in self.exempt)
        if func in BOOL_INDEXING and len(args) > 1:
            return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] or ())
        return False

    def __enter__(self):
        # .tolist() and .numpy() read the data without going through the dispatcher
        for name in ("tolist", "numpy"):
            original = getattr(torch.Tensor, name)
            self._patched[name] = original

            def counted(tensor, *a, _original=original, _name=name, **k):
                self.syncs.append(f"Tensor.{_name} at {_where()}")
                return _original(tensor, *a, **k)

            setattr(torch.Tensor, name, counted)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._patched.items():
            setattr(torch.Tensor, name, original)
        self._patched.clear()
        return super().__exit__(*exc)
