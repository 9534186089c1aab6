"""A spec's YAML file read (``read_yaml``, every way it can be unreadable a ``SpecError``
naming the file), and the ``${VAR}`` environment variables in its strings expanded
(``expand_env``) or, where unset, found (``unset_env``)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from electra_ablate.infra.errors import SpecError

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: Any) -> Any:
    """Expand ``${VAR}`` in every string; an unset variable stays as written (``unset_env``
    finds it, so ``validate`` and ``run`` can name it)."""
    if isinstance(value, str):
        return _ENV.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [expand_env(v) for v in value]
    if isinstance(value, dict):
        return {k: expand_env(v) for k, v in value.items()}
    return value


def unset_env(value: Any, where: str = "") -> list[tuple[str, str]]:
    """``(variable, field path)`` of every ``${VAR}`` left unexpanded."""
    if isinstance(value, str):
        return [(m.group(1), where) for m in _ENV.finditer(value)]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in unset_env(v, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [
            hit for k, v in value.items() for hit in unset_env(v, f"{where}.{k}" if where else k)
        ]
    return []


def read_yaml(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"spec file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SpecError(f"{path}: YAML syntax error{where}: {problem}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None
    if raw is None:
        raise SpecError(f"{path}: the spec is empty")
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: a spec must be a YAML mapping, got {type(raw).__name__}")
    return raw
