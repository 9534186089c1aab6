"""Study specs: one YAML file says what to pre-train, on what, for how much compute, and how to
fine-tune it. Validated by pydantic (unknown keys are errors) down to objective params and the
fine-tuning recipe, so an error points at the exact field, e.g.
``objectives[1].params.generator_size: Input should be less than or equal to 1``.

Two ways to change a spec without editing it, both with the same dotted paths:
``--set pretrain.learning_rate=5e-4`` on the command line, and ``variants`` inside the spec,
each a named set of changes; a study runs every objective under every variant (a recipe
sweep applied identically to all objectives).
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.data.bundle import active_bundle, bundled_pretraining
from electra_ablate.data.config import DataSpec
from electra_ablate.data.corpus import corpus_source
from electra_ablate.data.packing import PackingConfig
from electra_ablate.data.paths import resolve_path
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.task import TaskSettings, available_tasks, family_of, get_task
from electra_ablate.infra.errors import AblateError, InputError, SpecError, did_you_mean
from electra_ablate.infra.tracking.registry import tracker_problem
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.objective import (
    available_objectives,
    import_objective,
    is_import_path,
)

# A study name, objective label or variant label becomes part of a path, so it must be one path
# component that stays inside the output folder: letters, digits, `_`, `=` and `-`, with single
# dots only between them (no `..`, no leading dot, no `/` or `\`), at most NAME_MAX_LENGTH
# characters. pydantic's regex engine has no look-around, hence the dot-separated groups.
NAME_PATTERN = r"^[A-Za-z0-9_=-]+(\.[A-Za-z0-9_=-]+)*$"
NAME_MAX_LENGTH = 100
NAME_RULE = (
    "must be a single path component: letters, digits, _ = - and single dots between them "
    f"(no '..', no leading dot, no / or \\), at most {NAME_MAX_LENGTH} characters"
)


def name_field(description: str, default: Any = ...) -> Any:
    """A pydantic field holding a name that becomes part of a path (``NAME_PATTERN``)."""
    return Field(default, pattern=NAME_PATTERN, max_length=NAME_MAX_LENGTH, description=description)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BackboneSpec(Strict):
    preset: Literal["micro", "tiny", "small", "base", "large"] = Field(
        "tiny",
        description="micro (tests), tiny (CPU studies), small/base/large (the paper's ELECTRA)",
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="changes to the preset, by field (below)"
    )

    @field_validator("overrides")
    @classmethod
    def _overrides_are_valid(cls, overrides: dict[str, Any], info: ValidationInfo) -> dict:
        fields = BackboneConfig.model_fields
        for key in overrides:
            if key not in fields:
                raise ValueError(f"unknown field {key!r}{did_you_mean(key, fields)}")
        if "preset" in info.data:
            try:
                preset(info.data["preset"]).with_overrides(**overrides)
            except ValidationError as exc:
                raise ValueError(format_validation_error(exc)) from None
        return overrides


class BudgetSpec(Strict):
    """Equal compute for every objective: a FLOPs budget, or the FLOPs that ``steps`` steps of
    the objective labelled ``steps_of`` (default: the first) cost."""

    flops: float | None = Field(None, gt=0, description="pre-training FLOPs per objective")
    steps: int | None = Field(
        None, gt=0, description="or: the FLOPs that this many steps of `steps_of` cost"
    )
    steps_of: str | None = Field(None, description="objective label (default: the first)")
    convention: Literal["paper", "standard"] = Field(
        "paper", description="FLOPs convention the budget is counted in"
    )
    checkpoints: list[float] = Field(
        default_factory=lambda: [0.125, 0.25, 0.5, 1.0],
        description="budget fractions at which the kept encoder is saved; must include 1.0",
    )

    @model_validator(mode="after")
    def _one_budget(self) -> BudgetSpec:
        if (self.flops is None) == (self.steps is None):
            raise ValueError("give exactly one of budget.flops or budget.steps")
        if not self.checkpoints or any(not 0 < f <= 1 for f in self.checkpoints):
            raise ValueError("checkpoints must be fractions in (0, 1]")
        if max(self.checkpoints) != 1.0:
            raise ValueError("checkpoints must include 1.0 (the full budget)")
        return self


class ObjectiveEntry(Strict):
    name: str = Field(
        description="a registered objective (`ablate objectives`), or `package.module:Class`"
    )
    label: str | None = name_field("name in tables and plots (default: name)", None)
    params: dict[str, Any] = Field(
        default_factory=dict, description="the objective's params (`ablate objectives`)"
    )

    @property
    def display(self) -> str:
        return self.label or self.name


class FinetuneSpec(Strict):
    """Fine-tuning: tasks that fine-tune the kept encoder with a fresh head (GLUE's), each at
    every checkpoint with every seed. The shorthand for an ``evaluation`` of GLUE tasks."""

    tasks: list[str] = Field(
        min_length=1, description="fine-tuned tasks: GLUE's cola, sst2, mrpc, stsb, ..."
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0, 1, 2], min_length=1, description="fine-tuning seeds"
    )
    caps: dict[str, PositiveInt] = Field(
        default_factory=dict, description="max training examples per task"
    )
    eval_caps: dict[str, PositiveInt] = Field(
        default_factory=dict, description="max eval examples per task"
    )
    recipe: FinetuneRecipe = Field(
        default_factory=FinetuneRecipe, description="ELECTRA-Small's GLUE recipe, by field"
    )
    checkpoints: list[float] | None = Field(
        None, description="fractions to fine-tune (default all)"
    )
    baseline: bool = Field(
        True, description="also fine-tune a freshly initialised encoder: the no-pre-training row"
    )

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, tasks: list[str]) -> list[str]:
        check_task_names(tasks, needs="finetuned_head")
        return tasks

    @field_validator("caps", "eval_caps")
    @classmethod
    def _caps_name_known_tasks(cls, caps: dict[str, int]) -> dict[str, int]:
        for task in caps:  # a cap on a task not fine-tuned is harmless, a misspelt one is not
            check_task_name(task)
        return caps

    def resolved_recipe(self) -> FinetuneRecipe:
        """The recipe with ``caps`` merged into its training caps (``caps`` wins)."""
        caps = {**self.recipe.train_caps, **self.caps}
        return self.recipe.model_copy(update={"train_caps": caps})

    def task_params(self, task: str) -> dict[str, Any]:
        return {}


class EvaluationSpec(FinetuneSpec):
    """Tasks of any registered family (GLUE, probes, a plugin's), evaluated like ``finetune``'s:
    at every checkpoint, with every seed (once, for a task with no seed); the fine-tuning keys
    apply to the tasks that fine-tune."""

    tasks: list[str] = Field(
        min_length=1, description="registered tasks of any family (`ablate tasks`)"
    )
    params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="each task's own params, by task name (`ablate tasks`)"
    )

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, tasks: list[str]) -> list[str]:
        check_task_names(tasks)
        return tasks

    @field_validator("params")
    @classmethod
    def _params_validate(cls, params: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, values in params.items():
            check_task_name(name)
            model = get_task(name).Params
            if model is None:
                if values:
                    raise ValueError(f"task {name!r} takes no params")
                continue
            try:
                model.model_validate(values)
            except ValidationError as exc:
                raise ValueError(f"{name}: {format_validation_error(exc, root=model)}") from None
        return params

    def task_params(self, task: str) -> dict[str, Any]:
        return dict(self.params.get(task, {}))


def check_task_names(tasks: list[str], needs: str | None = None) -> None:
    """Every task of ``tasks`` checked by ``check_task_name``, all problems in one error."""
    problems = []
    for task in tasks:
        try:
            check_task_name(task, needs)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))


def check_task_name(task: str, needs: str | None = None) -> None:
    """A registered task (any family), and one that ``needs`` that, when given."""
    tasks = available_tasks()
    if task not in tasks:
        hint = did_you_mean(task, tasks) or f"; choose from {', '.join(tasks)}"
        raise ValueError(f"unknown task {task!r}{hint}")
    if needs is not None and tasks[task].needs != needs:
        raise ValueError(
            f"task {task!r} needs {tasks[task].needs}, not {needs}: list it under evaluation.tasks"
        )


class VariantSpec(Strict):
    """A named set of changes to the spec, as ``--set`` paths, e.g.
    ``{label: hot, set: {pretrain.learning_rate: 1.0e-3}}``."""

    label: str = name_field("name of the variant")
    set: dict[str, Any] = Field(
        default_factory=dict, description="dotted path: value, as `--set` takes them"
    )


class LauncherSpec(Strict):
    """Cluster resources for ``ablate run --launcher slurm`` (the command line overrides each).
    How a study is scheduled changes no result: this section is in no run's or job's identity."""

    partition: str | None = Field(None, description="SLURM partition (default: the cluster's)")
    account: str | None = Field(None, description="SLURM account to charge")
    gpus_per_job: int = Field(
        0, ge=0, description="GPUs of a pre-training job (more than 1: the run trains with DDP)"
    )
    cpus_per_job: int | None = Field(None, gt=0, description="CPU cores per job")
    mem_gb: int | None = Field(None, gt=0, description="memory per job")
    time_min: int = Field(
        240, gt=0, description="time limit per job; a job that hits it is requeued and resumes"
    )
    finetunes_per_job: int | None = Field(
        None, gt=0, description="fine-tunes per job (default: all of one run's in one job)"
    )
    sbatch: list[str] = Field(
        default_factory=list,
        description="extra #SBATCH lines as 'key=value' (e.g. 'qos=high', 'constraint=a100')",
    )


class StudySpec(Strict):
    name: str = name_field("names the output folder")
    description: str = Field("", description="free text, kept in study.json")
    data: DataSpec
    backbone: BackboneSpec = Field(default_factory=BackboneSpec)
    budget: BudgetSpec
    pretrain: PretrainSpec = Field(default_factory=PretrainSpec)
    objectives: list[ObjectiveEntry] = Field(min_length=1)
    finetune: FinetuneSpec | None = Field(
        None, description="GLUE fine-tuning; leave out for a pre-training-only study"
    )
    evaluation: EvaluationSpec | None = Field(
        None, description="tasks of any family, beside or instead of `finetune`'s"
    )
    variants: list[VariantSpec] = Field(
        default_factory=list, description="named sets of changes; every objective runs under each"
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="auto: cuda when available (bf16 autocast), else cpu (fp32)"
    )
    launcher: LauncherSpec = Field(
        default_factory=LauncherSpec, description="cluster resources for --launcher slurm"
    )
    tracking: list[str] = Field(
        default_factory=list,
        description="experiment trackers that also receive every unit's curves and scores: "
        "any of tensorboard, wandb, mlflow (each its extra), or a registered one; in no id",
    )

    spec_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("tracking", mode="before")
    @classmethod
    def _one_tracker_is_a_list(cls, tracking: Any) -> Any:
        return [tracking] if isinstance(tracking, str) else tracking  # --set tracking=wandb

    @field_validator("tracking")
    @classmethod
    def _trackers_usable(cls, tracking: list[str]) -> list[str]:
        """Every tracker registered and its package installed: refused here, never mid-run."""
        problems = [p for name in tracking if (p := tracker_problem(name)) is not None]
        if problems:
            raise ValueError("; ".join(problems))
        return list(dict.fromkeys(tracking))

    @model_validator(mode="after")
    def _labels_unique(self) -> StudySpec:
        for what, labels in (
            ("objective", [o.display for o in self.objectives]),
            ("variant", [v.label for v in self.variants]),
        ):
            repeated = sorted({x for x in labels if labels.count(x) > 1})
            if repeated:
                raise ValueError(f"{what} labels must be unique; repeated: {', '.join(repeated)}")
        labels = [o.display for o in self.objectives]
        if self.budget.steps_of is not None and self.budget.steps_of not in labels:
            raise ValueError(
                f"budget.steps_of {self.budget.steps_of!r} is not an objective label "
                f"(the labels: {', '.join(labels)})"
            )
        if self.finetune is not None and self.evaluation is not None:
            both = sorted(set(self.finetune.tasks) & set(self.evaluation.tasks))
            if both:
                raise ValueError(f"tasks in both finetune and evaluation: {', '.join(both)}")
        return self

    def evaluation_blocks(self) -> list[FinetuneSpec]:
        """How the study evaluates its kept encoders: ``finetune`` and ``evaluation``, each
        with its own tasks, seeds, checkpoints, caps and baseline."""
        return [block for block in (self.finetune, self.evaluation) if block is not None]

    def backbone_config(self, vocab_size: int | None = None) -> BackboneConfig:
        overrides = dict(self.backbone.overrides)
        if vocab_size is not None:
            overrides["vocab_size"] = vocab_size
        return preset(self.backbone.preset).with_overrides(**overrides)

    def variant_specs(self) -> list[tuple[str | None, StudySpec]]:
        """``[(None, self)]``, or each variant's label and its resolved spec (no variants)."""
        if not self.variants:
            return [(None, self)]
        base = self.model_dump(exclude={"variants"})
        out = []
        for i, variant in enumerate(self.variants):
            try:
                raw = apply_overrides(base, variant.set)
                spec = StudySpec.model_validate({**raw, "spec_dir": self.spec_dir})
            except (ValueError, ValidationError) as exc:
                where = f"variants[{i}] ({variant.label})"
                if isinstance(exc, ValidationError):
                    message = format_validation_error(exc, root=StudySpec)
                    raise ValueError(f"{where}: {message}") from None
                raise ValueError(f"{where}: {exc}") from None
            out.append((variant.label, spec))
        return out


# ------------------------------------------------------------------ dotted-path overrides

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


# ---------------------------------------------------------------------------- errors


def format_location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


RETIRED_KEYS = {
    "pretrain.tensorboard": "retired: trackers are chosen at the top level now, write "
    "`tracking: [tensorboard]` (or --set tracking=[tensorboard])",
}
"""Keys an earlier version took, by dotted path, with what to write instead: a spec that still
sets one is refused with that line rather than a bare "unknown key". A study's ``study.json``
written then is read with ``recorded_spec``."""


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


def format_validation_error(
    exc: ValidationError, prefix: tuple[Any, ...] = (), root: type[BaseModel] | None = None
) -> str:
    """All of pydantic's errors on one line, each as ``field.path: message``; an unknown key
    gets a "did you mean" when ``root`` (the model validated) has a close field name, or what
    to write instead when it is a retired one (``RETIRED_KEYS``)."""
    return "; ".join(validation_messages(exc.errors(), prefix, root))


def validation_messages(
    errors: list[Any], prefix: tuple[Any, ...] = (), root: type[BaseModel] | None = None
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
            parent = _model_at(root, loc[:-1]) if root is not None else None
            hint = did_you_mean(loc[-1], parent.model_fields) if parent is not None else ""
            retired = RETIRED_KEYS.get(".".join(str(p) for p in loc if not isinstance(p, int)))
            msg = retired if retired is not None and root is StudySpec else f"unknown key{hint}"
        parts.append(f"{where}: {msg}" if where else msg)
    return parts


def _model_at(model: Any, loc: tuple[Any, ...]) -> type[BaseModel] | None:
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


# ------------------------------------------------------------------------- loading

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
        errors += validation_messages([e for e in found if e["loc"]], root=StudySpec)
        # checks across fields (no field path) come after the objectives' own errors: a
        # misspelt objective name is what makes `budget.steps_of` name no objective label
        across = validation_messages([e for e in found if not e["loc"]], root=StudySpec)
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


def task_settings(spec: StudySpec, block: FinetuneSpec, task: str) -> Any:
    """What ``task`` is told about the study besides the encoder and the seed
    (``evaluation.task.TaskSettings``): where the data lives, the recipe, its caps, its params."""
    return TaskSettings(
        sources=spec.data.model_dump(mode="json"),
        spec_dir=spec.spec_dir,
        recipe=block.resolved_recipe(),
        eval_cap=block.eval_caps.get(task),
        params=block.task_params(task),
        max_seq_len=spec.backbone_config().max_seq_len,
    )


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


# ----------------------------------------------------------------------- reference


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
            nested = _model_at(model, (name,))
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
