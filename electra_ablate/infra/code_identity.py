"""Which code computed a result: the fingerprint recorded beside a run's or a job's id.

Ids (``electra_ablate.infra.identity``) hash names and values, never code, so that moving code
never changes an id. But editing an objective changes what its runs compute, so each finished
unit also records the code that made it (``code_fingerprint``), and a study compares that record
with the code importable now before it reuses the unit (``electra_ablate.study.code_change``).

What a fingerprint covers:

- ``electra_ablate``: the installed project's version (``electra_ablate.__version__``). The
  engine, the backbone and the fine-tuning loop enter through it alone: an edit to them that
  does not bump the version is not seen.
- ``files``: the sha256 (12 hex digits) of source files, by path. For a class of the project
  (a built-in objective or task family), the file of the class's own module. For a class from
  anywhere else (a plugin), every ``.py`` file under the top-level package its module belongs
  to, since a plugin's objective is free to import its helpers from beside it; a module that
  is no package's is its own file.

It does not cover third-party libraries (torch, numpy), nor a plugin's code outside its own
top-level package, nor data (the data's fingerprint is in the ids).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from electra_ablate import __version__

PROJECT = "electra_ablate"
VERSION_KEY = "electra_ablate"
FILES_KEY = "files"


def file_hash(path: Path) -> str:
    """The sha256 of a file's bytes, 12 hex digits (as an id)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def source_files(cls: type) -> dict[str, Path]:
    """The source files whose edit can change what ``cls`` computes, by the path a record
    names them with (relative to the folder holding its top-level package); none where the
    class has no file (one defined in ``__main__`` or made at run time)."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if not file or not file.endswith(".py"):
        return {}
    path = Path(file).resolve()
    top = cls.__module__.split(".")[0]
    if top == PROJECT:  # a built-in: its own module (the rest is the version)
        return {f"{cls.__module__.replace('.', '/')}.py": path}
    depth = cls.__module__.count(".") + (path.name == "__init__.py")
    package = path.parents[depth - 1] if depth else path  # the top-level package (or module)
    if package.is_file():
        return {package.name: package}
    base = package.parent
    return {p.relative_to(base).as_posix(): p for p in sorted(package.rglob("*.py"))}


def code_fingerprint(*classes: type) -> dict[str, Any]:
    """What code computed a result made by ``classes`` (an objective; a task and its family):
    the project's version and each source file's hash (the module docstring says which)."""
    files: dict[str, str] = {}
    for cls in classes:
        for name, path in source_files(cls).items():
            try:
                files[name] = file_hash(path)
            except OSError:
                files[name] = "unreadable"
    return {VERSION_KEY: __version__, FILES_KEY: dict(sorted(files.items()))}


def code_difference(recorded: dict[str, Any], now: dict[str, Any]) -> str | None:
    """What changed between a recorded fingerprint and today's, in words (``electra_ablate
    0.4.0 -> 0.5.0; span_mlm.py changed``), or None when they agree."""
    parts = []
    if recorded.get(VERSION_KEY) != now.get(VERSION_KEY):
        parts.append(f"electra-ablate {recorded.get(VERSION_KEY)} → {now.get(VERSION_KEY)}")
    old, new = recorded.get(FILES_KEY) or {}, now.get(FILES_KEY) or {}
    for kind, names in (
        ("changed", [n for n in new if n in old and old[n] != new[n]]),
        ("added", [n for n in new if n not in old]),
        ("removed", [n for n in old if n not in new]),
    ):
        if names:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            parts.append(f"{shown} {kind}")
    return "; ".join(parts) or None
