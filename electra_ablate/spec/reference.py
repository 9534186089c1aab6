"""The docs' table of spec keys: every key a study spec accepts, with its type, default and
meaning, read from the models (``reference_rows``). ``ablate schema --markdown``
(``electra_ablate/commands/spec.py``) prints it, and ``docs/spec-reference.md`` is that
output pasted (``tests/e2e/test_spec_cli.py`` holds the page to it).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.spec.messages import model_at
from electra_ablate.spec.schema import StudySpec


def reference_rows() -> list[tuple[str, str, str, str]]:
    """``(key path, type, default, description)`` for every key a study spec accepts, in the
    order of the models (``ablate schema --markdown``; ``docs/spec-reference.md`` is this table)."""
    from pydantic.fields import PydanticUndefined

    rows: list[tuple[str, str, str, str]] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            path = f"{prefix}{name}"
            nested = model_at(model, (name,))
            if field.default is PydanticUndefined and field.default_factory is None:
                default = "required"
            else:
                value = field.get_default(call_default_factory=True)
                default = "—" if isinstance(value, BaseModel) else _show(value)
            described = field.description or ""
            if nested is not None:
                is_list = "list" in str(field.annotation)
                rows.append(
                    (path, "list of mappings" if is_list else "mapping", default, described)
                )
                walk(nested, f"{path}[]." if is_list else f"{path}.")
            else:
                rows.append((path, _type_name(field.annotation), default, described))
            if path == "backbone.overrides":
                for key, item in BackboneConfig.model_fields.items():
                    if key in (
                        "hidden_size",
                        "num_layers",
                        "num_heads",
                        "intermediate_size",
                        "embedding_size",
                    ):
                        default = "preset's"
                    else:
                        default = _show(item.get_default(call_default_factory=True))
                    rows.append(
                        (
                            f"{path}.{key}",
                            _type_name(item.annotation),
                            default,
                            item.description or "",
                        )
                    )

    walk(StudySpec, "")
    return rows


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple, dict)) and not value:
        return "[]" if not isinstance(value, dict) else "{}"
    return json.dumps(value) if not isinstance(value, str) else value


def _type_name(annotation: Any) -> str:
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:  # PositiveInt and the like: the base type is what reads
        return _type_name(typing.get_args(annotation)[0])
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = len(args) < len(typing.get_args(annotation))
    if origin is Literal:
        text = " | ".join(str(a) for a in typing.get_args(annotation))
    elif origin in (list, tuple):
        text = f"{'list' if origin is list else 'pair'} of {_type_name(args[0])}"
    elif origin is dict:
        text = f"mapping to {_type_name(args[-1])}"
    elif args and origin is not None:  # a union such as X | None
        text = " or ".join(_type_name(a) for a in args)
    else:
        text = getattr(annotation, "__name__", str(annotation))
    text = {"int": "integer", "float": "number", "str": "text", "bool": "true/false"}.get(
        text, text
    )
    return f"{text} or null" if optional else text
