"""``--set`` overrides: dotted paths such as ``objectives[1].params.generator_size`` read
(``split_path``), applied to a spec's mapping (``apply_overrides``), and parsed from the
command line's ``--set PATH=VALUE`` options (``parse_set_options``); a variant's ``set`` is
applied the same way."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from electra_ablate.infra.errors import SpecError

_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def split_path(path: str) -> list[str | int]:
    """``objectives[1].params.generator_size`` -> ``["objectives", 1, "params", ...]``."""
    parts: list[str | int] = []
    for piece in path.split("."):
        matches = list(_PATH_PART.finditer(piece))
        whole = sum(len(m.group(0)) for m in matches) == len(piece)
        if not matches or matches[0].group(1) is None or not whole:
            raise ValueError(f"cannot read the path {path!r}")
        parts += [m.group(1) if m.group(1) else int(m.group(2)) for m in matches]
    return parts


def apply_overrides(tree: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``tree`` with each dotted path set to its value (missing mappings created)."""
    out = copy.deepcopy(dict(tree))
    for path, value in overrides.items():
        parts = split_path(path)
        node: Any = out
        for here, key in enumerate(parts):
            last = here == len(parts) - 1
            shown = ".".join(str(p) for p in parts[: here + 1])
            if isinstance(key, int):
                if not isinstance(node, list) or not -len(node) <= key < len(node):
                    raise ValueError(f"{path}: {shown} is not an item of a list")
            elif not isinstance(node, dict):
                raise ValueError(f"{path}: {shown} is inside something that is not a mapping")
            if last:
                node[key] = value
            else:
                if isinstance(key, str) and node.get(key) is None:
                    node[key] = {}
                node = node[key]
    return out


def parse_set_options(items: Iterable[str]) -> dict[str, Any]:
    """``--set path=value`` options as a mapping; values are read as YAML (``5e-4``, ``true``,
    ``[0, 1]``)."""
    overrides: dict[str, Any] = {}
    for item in items:
        path, sep, raw = item.partition("=")
        if not sep or not path.strip():
            raise SpecError(
                f"--set {item!r}: expected PATH=VALUE, e.g. pretrain.learning_rate=5e-4"
            )
        try:
            overrides[path.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise SpecError(f"--set {item!r}: the value is not valid YAML") from None
    return overrides
