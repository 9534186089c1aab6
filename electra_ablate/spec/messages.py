"""Validation errors as one line each: pydantic's errors written ``field.path: message``,
all of one validation on one ``; ``-separated line, with a "did you mean" for a misspelt key
and the name rule (``names``) for a name that breaks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from electra_ablate.infra.errors import did_you_mean
from electra_ablate.spec.names import NAME_MAX_LENGTH, NAME_PATTERN, NAME_RULE


def format_location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def format_validation_error(
    exc: ValidationError,
    prefix: tuple[Any, ...] = (),
    root: type[BaseModel] | None = None,
    retired: Mapping[str, str] | None = None,
) -> str:
    """All of pydantic's errors on one line, each as ``field.path: message``; an unknown key
    gets a "did you mean" when ``root`` (the model validated) has a close field name, or what
    to write instead when it is a retired one (``retired``, by dotted path: a ``StudySpec``'s
    validation passes ``schema.RETIRED_KEYS``)."""
    return "; ".join(validation_messages(exc.errors(), prefix, root, retired))


def validation_messages(
    errors: list[Any],
    prefix: tuple[Any, ...] = (),
    root: type[BaseModel] | None = None,
    retired: Mapping[str, str] | None = None,
) -> list[str]:
    """``format_validation_error``'s messages, one per error of ``errors`` (pydantic's)."""
    parts = []
    for err in errors:
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        where = format_location(prefix + loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == (
            NAME_PATTERN
        ):
            msg = f"{str(err.get('input'))[:40]!r} {NAME_RULE}"
        elif err["type"] == "string_too_long" and err.get("ctx", {}).get("max_length") == (
            NAME_MAX_LENGTH
        ):
            msg = f"{len(err.get('input', ''))} characters; a name {NAME_RULE}"
        if err["type"] == "extra_forbidden" and loc:
            parent = model_at(root, loc[:-1]) if root is not None else None
            hint = did_you_mean(loc[-1], parent.model_fields) if parent is not None else ""
            instead = (retired or {}).get(".".join(str(p) for p in loc if not isinstance(p, int)))
            msg = instead if instead is not None else f"unknown key{hint}"
        parts.append(f"{where}: {msg}" if where else msg)
    return parts


def model_at(model: Any, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class found at ``loc`` inside ``model`` (lists, dicts and optionals
    looked through), or None."""
    import typing

    for part in loc:
        if isinstance(part, int):
            continue  # an item of the list whose item type ``model`` already is
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(part)
        if field is None:
            return None
        model = field.annotation
        while typing.get_origin(model) is not None:  # list[X], X | None, dict[str, X]
            args = [a for a in typing.get_args(model) if a is not type(None)]
            model = args[-1] if args else None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None
