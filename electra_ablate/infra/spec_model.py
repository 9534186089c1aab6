"""The base of every model a study spec is read into: unknown keys refused, no infinity or NaN,
and a boolean never read as a number.

pydantic's lax mode reads ``true`` as ``1`` for an ``int`` field and as ``1.0`` for a ``float``
one, so ``pretrain.warmup_steps: true`` would quietly warm up over one step. Every spec model
(the study's sections, the pre-training and fine-tuning settings, the backbone, the data, an
objective's params) derives from ``SpecModel``, whose one validator refuses a boolean wherever a
field, or an item of it, takes a number and no boolean; a YAML number reads as before
(``--set pretrain.batch_size=100``), and fields that take a boolean take it."""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

BOOLEAN_AS_NUMBER = "a boolean (true/false) where a number goes: write the number"


class SpecModel(BaseModel):
    """A spec section: ``extra="forbid"``, finite floats (``budget.flops: .inf`` would plan
    no run) and no boolean read as a number (subclasses add
    their own config, which pydantic merges with this one)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and boolean_as_number(field.annotation, value):
            raise ValueError(BOOLEAN_AS_NUMBER)
        return value


def boolean_as_number(annotation: Any, value: Any) -> bool:
    """Whether ``value`` holds a boolean where ``annotation`` takes a number and no boolean
    (itself, or an item of a list, tuple or dict)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return boolean_as_number(get_args(annotation)[0], value)
    if isinstance(value, bool):
        kinds = flat(annotation)
        return bool(kinds & {int, float}) and not takes_bool(annotation)
    if origin in (Union, types.UnionType):
        return any(boolean_as_number(arg, value) for arg in get_args(annotation))
    args = get_args(annotation)
    if origin in (list, set, frozenset) and isinstance(value, list | tuple | set) and args:
        return any(boolean_as_number(args[0], item) for item in value)
    if origin is tuple and isinstance(value, list | tuple) and args:
        items = args[:1] * len(value) if args[-1] is Ellipsis else args
        return any(boolean_as_number(a, v) for a, v in zip(items, value, strict=False))
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return any(boolean_as_number(args[1], item) for item in value.values())
    return False


def flat(annotation: Any) -> set[Any]:
    """The types a union (or one type) is made of, ``Annotated`` unwrapped."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return flat(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(flat(arg) for arg in get_args(annotation)))
    return {annotation}


def takes_bool(annotation: Any) -> bool:
    """Whether ``annotation`` takes a boolean: ``bool`` in it, or a ``Literal`` of one."""
    for kind in flat(annotation):
        if kind is bool:
            return True
        if get_origin(kind) is Literal and any(isinstance(a, bool) for a in get_args(kind)):
            return True
    return False
