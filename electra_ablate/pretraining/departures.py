"""Departures from the paper: the params of an objective set away from the values the paper used.

A param that may depart declares the paper's value (``Field(..., json_schema_extra={"paper": x})``),
and an option whose unset value is a departure the phrase that says it (``"unset": "..."``:
``GeneratorParams.mask_token_share``); every report's header lists each departure
(``electra_ablate.analysis.deviations``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from electra_ablate.infra.errors import AblateError
from electra_ablate.pretraining.registry import available_objectives, installed_objective


def params_departures(name: str, params: Mapping[str, Any], *, unset: bool = True) -> list[str]:
    """``field value (the paper: x)`` for every param of objective ``name`` that declares the
    paper's value (``Field(..., json_schema_extra={"paper": x})``) and is set to another (its
    ``unset`` phrase where it is an option left unset, unless ``unset`` is False: then only the
    values set away from the paper's, what makes an arm a variant of the paper's setting);
    empty when the objective is not installed here."""
    try:
        found = installed_objective(name, available_objectives())
    except AblateError:
        return []
    if found is None:
        return []
    params_model = found.Params
    try:
        moot = params_model.model_validate(dict(params)).inapplicable()
    except ValueError:  # refused at validation already; nothing here to judge
        moot = frozenset()
    out = []
    for field_name, info in params_model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if "paper" not in extra or field_name in moot:
            continue
        value = params.get(field_name, info.get_default(call_default_factory=True))
        if value is None and "unset" in extra:  # an option left unset: its own phrase
            if unset:
                out.append(str(extra["unset"]))
        elif value != extra["paper"]:
            out.append(f"{field_name} {value} (the paper: {extra['paper']})")
    return out
