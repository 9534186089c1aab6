"""The study spec: the YAML a study is written in, validated, with its variants and overrides.

- ``names``: the rule for study, objective and variant names (one path component), and the
  pydantic field that holds one;
- ``overrides``: ``--set`` overrides, dotted paths read and applied to a spec's mapping;
- ``messages``: validation errors written as one line, ``field.path: message`` per problem;
- ``schema``: the models, ``StudySpec`` and its parts, with the keys an earlier version took;
- ``yaml_env``: a spec's YAML file read, and its ``${VAR}`` environment variables expanded;
- ``loading``: a spec loaded and validated completely, with the checks run at load (objectives,
  variants, data sources), and a recorded spec read back;
- ``reference``: the docs' table of spec keys, printed by ``ablate schema --markdown``.

The names below are the ones the rest of the package uses; they are re-exported eagerly (the
models, ``schema``, need pydantic, never torch).
"""

from electra_ablate.spec.loading import load_spec, parse_spec, recorded_spec
from electra_ablate.spec.overrides import parse_set_options
from electra_ablate.spec.reference import reference_rows
from electra_ablate.spec.schema import (
    BackboneSpec,
    BudgetSpec,
    EvaluationSpec,
    FinetuneSpec,
    LauncherSpec,
    ObjectiveEntry,
    StudySpec,
    VariantSpec,
    task_settings,
)
from electra_ablate.spec.yaml_env import read_yaml

__all__ = [
    "BackboneSpec",
    "BudgetSpec",
    "EvaluationSpec",
    "FinetuneSpec",
    "LauncherSpec",
    "ObjectiveEntry",
    "StudySpec",
    "VariantSpec",
    "load_spec",
    "parse_set_options",
    "parse_spec",
    "read_yaml",
    "recorded_spec",
    "reference_rows",
    "task_settings",
]
