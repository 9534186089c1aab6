"""Study specs: one YAML file says what to pre-train, on what, for how much compute, and how to
fine-tune it. Validated by pydantic (unknown keys are errors); objective params are validated
against each objective's own Params model, so an error points at the exact field, e.g.
``objectives[1].params.generator_size: Input should be less than or equal to 1``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from electra_ablate.config import BackboneConfig, preset
from electra_ablate.data.config import DataSpec
from electra_ablate.errors import AblateError, SpecError
from electra_ablate.objective import PriorKind, available_objectives


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BackboneSpec(Strict):
    preset: Literal["micro", "tiny", "small", "base", "large"] = "tiny"
    overrides: dict[str, Any] = Field(default_factory=dict, description="BackboneConfig fields")

    @model_validator(mode="after")
    def _overrides_are_valid(self) -> BackboneSpec:
        preset(self.preset).with_overrides(**self.overrides)
        return self


class BudgetSpec(Strict):
    """Equal compute for every objective: a FLOPs budget, or the FLOPs that ``steps`` steps of
    the objective labelled ``steps_of`` (default: the first) cost."""

    flops: float | None = Field(None, gt=0)
    steps: int | None = Field(None, gt=0)
    steps_of: str | None = None
    convention: Literal["paper", "standard"] = "paper"
    checkpoints: list[float] = Field(default_factory=lambda: [0.125, 0.25, 0.5, 1.0])

    @model_validator(mode="after")
    def _one_budget(self) -> BudgetSpec:
        if (self.flops is None) == (self.steps is None):
            raise ValueError("give exactly one of budget.flops or budget.steps")
        if not self.checkpoints or any(not 0 < f <= 1 for f in self.checkpoints):
            raise ValueError("checkpoints must be fractions in (0, 1]")
        if max(self.checkpoints) != 1.0:
            raise ValueError("checkpoints must include 1.0 (the full budget)")
        return self


class PretrainSpec(Strict):
    batch_size: int = Field(128, gt=0)
    learning_rate: float = Field(5e-4, gt=0)
    warmup_fraction: float = Field(0.01, ge=0, lt=1)
    weight_decay: float = Field(0.01, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = Field(1e-6, gt=0)
    grad_clip: float = Field(1.0, gt=0)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    log_every: int = Field(50, gt=0)
    eval_batches: int = Field(8, ge=0, description="held-out batches evaluated at checkpoints")
    resume_every: int = Field(
        200, ge=0, description="steps between resumable states (0: only at checkpoints)"
    )
    num_threads: int | None = Field(None, gt=0)
    compile: bool = Field(False, description="torch.compile (opt-in: slow to compile on CPU)")
    prior_bias: list[PriorKind] = Field(
        default_factory=list,
        description="output biases that start at the data's priors instead of zero (the "
        "original code's init): mlm heads at log token frequencies, the generator's too, "
        "detection heads at the base replaced rate. A deviation; every report states it",
    )


class ObjectiveEntry(Strict):
    name: str
    label: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)

    @property
    def display(self) -> str:
        return self.label or self.name


class FinetuneSpec(Strict):
    tasks: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    caps: dict[str, int] = Field(default_factory=dict, description="max training examples per task")
    eval_caps: dict[str, int] = Field(
        default_factory=dict, description="max eval examples per task"
    )
    recipe: dict[str, Any] = Field(default_factory=dict, description="FinetuneRecipe overrides")
    checkpoints: list[float] | None = Field(
        None, description="fractions to fine-tune (default all)"
    )


class StudySpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    data: DataSpec
    backbone: BackboneSpec = Field(default_factory=BackboneSpec)
    budget: BudgetSpec
    pretrain: PretrainSpec = Field(default_factory=PretrainSpec)
    objectives: list[ObjectiveEntry] = Field(min_length=1)
    finetune: FinetuneSpec
    device: Literal["auto", "cpu", "cuda"] = "auto"

    spec_dir: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="after")
    def _labels_unique(self) -> StudySpec:
        labels = [o.display for o in self.objectives]
        duplicates = sorted({x for x in labels if labels.count(x) > 1})
        if duplicates:
            raise ValueError(f"objective labels must be unique; repeated: {', '.join(duplicates)}")
        if self.budget.steps_of is not None and self.budget.steps_of not in labels:
            raise ValueError(f"budget.steps_of {self.budget.steps_of!r} is not an objective label")
        return self

    def backbone_config(self, vocab_size: int | None = None) -> BackboneConfig:
        overrides = dict(self.backbone.overrides)
        if vocab_size is not None:
            overrides["vocab_size"] = vocab_size
        return preset(self.backbone.preset).with_overrides(**overrides)


def format_location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def format_validation_error(exc: ValidationError, prefix: tuple[Any, ...] = ()) -> str:
    """All of pydantic's errors on one line, each as ``field.path: message``."""
    parts = []
    for err in exc.errors():
        loc = format_location(prefix + tuple(err["loc"]))
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: Any) -> Any:
    """Expand ``${VAR}`` in every string; an unset variable stays as written (data code
    reports it by name)."""
    if isinstance(value, str):
        return _ENV.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [expand_env(v) for v in value]
    if isinstance(value, dict):
        return {k: expand_env(v) for k, v in value.items()}
    return value


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


def parse_spec(raw: dict[str, Any], spec_dir: Path = Path("."), source: str = "spec") -> StudySpec:
    try:
        spec = StudySpec.model_validate({**expand_env(raw), "spec_dir": spec_dir})
    except ValidationError as exc:
        raise SpecError(f"{source}: {format_validation_error(exc)}") from None
    check_objectives(spec, source)
    return spec


def check_objectives(spec: StudySpec, source: str) -> None:
    """Each objective name must be registered and its params valid for that objective."""
    try:
        registered = available_objectives()
    except AblateError as exc:
        raise SpecError(str(exc)) from None
    for i, entry in enumerate(spec.objectives):
        if entry.name not in registered:
            raise SpecError(
                f"{source}: objectives[{i}].name: unknown objective {entry.name!r} "
                f"(registered: {', '.join(registered)})"
            )
        params_model = registered[entry.name].Params
        try:
            params_model.model_validate(entry.params)
        except ValidationError as exc:
            raise SpecError(
                f"{source}: {format_validation_error(exc, ('objectives', i, 'params'))}"
            ) from None


def load_spec(path: Path | str) -> StudySpec:
    path = Path(path)
    return parse_spec(read_yaml(path), spec_dir=path.resolve().parent, source=str(path))
