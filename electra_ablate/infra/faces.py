"""Package faces that import on first use (PEP 562).

A face re-exports its wing's main names. Where some of them need torch and the wing also holds
light modules that commands read without training anything (``ablate status`` reads a study
folder; the spec reads a fine-tuning recipe), an eager face would make every one of those
commands import torch first, about a second each. A lazy face keeps the names importable from
the package and imports their module the first time one is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_face(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``exports`` maps each re-exported name to the
    module of the package that defines it."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
