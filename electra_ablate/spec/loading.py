"""A study spec loaded: read from its YAML file (``load_spec``) or validated from a mapping
(``parse_spec``) completely, every error reported at once, with the checks run at load:
objective names and params (``objective_errors``), every variant, and with ``check_data``
the data the spec points at (``check_data_sources``). ``recorded_spec`` reads back the
resolved spec a ``study.json`` holds.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from electra_ablate.data.bundle import active_bundle, bundled_pretraining
from electra_ablate.data.corpus import corpus_source
from electra_ablate.data.packing import PackingConfig
from electra_ablate.data.paths import resolve_path
from electra_ablate.evaluation.task import family_of, get_task
from electra_ablate.infra.errors import AblateError, InputError, SpecError, did_you_mean
from electra_ablate.pretraining.registry import (
    available_objectives,
    import_objective,
    is_import_path,
)
from electra_ablate.spec.messages import format_validation_error, validation_messages
from electra_ablate.spec.overrides import apply_overrides
from electra_ablate.spec.schema import RETIRED_KEYS, StudySpec, task_settings
from electra_ablate.spec.yaml_env import expand_env, read_yaml, unset_env


def recorded_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved spec read back from a ``study.json`` (to fine-tune, merge or rebuild), as this
    version validates it: retired keys dropped, and no trackers, since reading a study back
    sends nothing (and must not need a tracker's package on this machine)."""
    out = copy.deepcopy(dict(spec))
    pretrain = out.get("pretrain")
    if isinstance(pretrain, dict):
        pretrain.pop("tensorboard", None)
    out.pop("tracking", None)
    return out


def parse_spec(
    raw: dict[str, Any],
    spec_dir: Path = Path("."),
    source: str = "spec",
    overrides: Mapping[str, Any] | None = None,
    check_data: bool = False,
) -> StudySpec:
    """Validate ``raw`` (after ``overrides``) completely: fields, objectives and their params,
    every variant; with ``check_data`` also environment variables and data paths. Every error
    the spec has is reported at once (one line, ``; ``-separated): a typo in a top-level key
    does not hide a misspelt objective name, nor one objective's params another's."""
    expanded = expand_env(raw)
    try:
        expanded = apply_overrides(expanded, overrides or {})
    except ValueError as exc:
        raise SpecError(f"{source}: --set {exc}") from None
    errors: list[str] = []
    across: list[str] = []
    spec: StudySpec | None = None
    try:
        spec = StudySpec.model_validate({**expanded, "spec_dir": spec_dir})
    except ValidationError as exc:
        found = exc.errors()
        errors += validation_messages(
            [e for e in found if e["loc"]], root=StudySpec, retired=RETIRED_KEYS
        )
        # checks across fields (no field path) come after the objectives' own errors: a
        # misspelt objective name is what makes `budget.steps_of` name no objective label
        across = validation_messages(
            [e for e in found if not e["loc"]], root=StudySpec, retired=RETIRED_KEYS
        )
    entries = expanded.get("objectives")
    errors += objective_errors(entries if isinstance(entries, list) else [])
    errors += across
    if errors:
        raise SpecError(f"{source}: {'; '.join(errors)}")
    assert spec is not None
    try:
        variants = spec.variant_specs()
    except ValueError as exc:
        raise SpecError(f"{source}: {exc}") from None
    for label, variant in variants:
        where = source if label is None else f"{source}: variant {label}"
        if label is not None:
            check_objectives(variant, where)
        if check_data:
            check_data_sources(variant, where)
    return spec


def check_objectives(spec: StudySpec, source: str) -> None:
    """Each objective name must be registered and its params valid for that objective."""
    errors = objective_errors([entry.model_dump() for entry in spec.objectives])
    if errors:
        raise SpecError(f"{source}: {'; '.join(errors)}")


def objective_errors(entries: list[Any]) -> list[str]:
    """What is wrong with the objectives of a spec, every entry checked: an unregistered name
    (with a "did you mean"), params the objective rejects. Reads the raw entries, so it runs
    even when the rest of the spec has errors; entries pydantic rejects outright are left to it.
    """
    try:
        registered = available_objectives()
    except AblateError as exc:
        raise SpecError(str(exc)) from None
    errors = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name, params = entry["name"], entry.get("params") or {}
        if is_import_path(name):  # package.module:Class, imported under the registry's rules
            try:
                objective_class = import_objective(name)
            except InputError as exc:
                errors.append(f"objectives[{i}].name: {exc}")
                continue
            except AblateError as exc:
                raise SpecError(str(exc)) from None
        elif name not in registered:
            hint = did_you_mean(name, registered) or f" (registered: {', '.join(registered)})"
            errors.append(f"objectives[{i}].name: unknown objective {name!r}{hint}")
            continue
        else:
            objective_class = registered[name]
        if not isinstance(params, dict):
            continue  # pydantic names it: objectives[i].params must be a mapping
        params_model = objective_class.Params
        try:
            params_model.model_validate(params)
        except ValidationError as exc:
            where = ("objectives", i, "params")
            errors.append(format_validation_error(exc, where, root=params_model))
    return errors


def check_data_sources(spec: StudySpec, source: str) -> None:
    """What ``run`` would otherwise reject minutes later: unset ``${VAR}``s, corpus paths that
    match nothing, a missing vocab file, task data not found where the spec points."""
    dumped = spec.model_dump(mode="json")
    bundle = active_bundle()  # a data bundle stands in for the data's files (data/bundle.py)
    for variable, where in unset_env(dumped):
        if bundle is None or not where.startswith("data."):
            raise SpecError(f"{source}: {where} uses ${{{variable}}}, which is not set")
    try:
        seq_len = spec.backbone_config().max_seq_len
        bundled = bundled_pretraining(spec.data, seq_len, PackingConfig().as_dict())
        if spec.data.corpus.paths and bundled is None:
            corpus_source(spec.data.corpus, spec.spec_dir)
        vocab_file = spec.data.tokenizer.vocab_file
        if (
            vocab_file is not None
            and bundled is None
            and not resolve_path(vocab_file, spec.spec_dir).is_file()
        ):
            raise SpecError(f"data.tokenizer.vocab_file: {vocab_file} does not exist")
        for block in spec.evaluation_blocks():
            for name in block.tasks:
                task = get_task(name)
                family_of(task).check(task, task_settings(spec, block, name))
    except AblateError as exc:
        raise SpecError(f"{source}: {exc}") from None


def load_spec(
    path: Path | str, overrides: Mapping[str, Any] | None = None, check_data: bool = False
) -> StudySpec:
    path = Path(path)
    return parse_spec(
        read_yaml(path),
        spec_dir=path.resolve().parent,
        source=str(path),
        overrides=overrides,
        check_data=check_data,
    )
