"""The study spec's models: ``StudySpec`` and its parts. One YAML file says what to pre-train,
on what, for how much compute, and how to fine-tune it. Validated by pydantic (unknown keys are
errors) down to objective params and the fine-tuning recipe, so an error points at the exact
field, e.g.
``objectives[1].params.generator_size: Input should be less than or equal to 1``.

Two ways to change a spec without editing it, both with the same dotted paths:
``--set pretrain.learning_rate=5e-4`` on the command line, and ``variants`` inside the spec,
each a named set of changes; a study runs every objective under every variant (a recipe
sweep applied identically to all objectives). The paths are read and applied by
``overrides``; a spec is read from YAML and checked by ``loading``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.data.config import DataSpec
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.task import TaskSettings, available_tasks, get_task
from electra_ablate.infra.errors import did_you_mean
from electra_ablate.infra.spec_model import SpecModel
from electra_ablate.infra.tracking.registry import tracker_problem
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.spec.messages import format_validation_error
from electra_ablate.spec.names import name_field
from electra_ablate.spec.overrides import apply_overrides


class Strict(SpecModel):
    """A section of the study spec: unknown keys refused, no boolean read as a number."""


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


class ScheduleSpec(Strict):
    """How ``ablate run --workers N`` hands a study's work to its worker processes (the order
    ``electra_ablate.study.schedule.Schedule`` picks). How work is ordered changes no result:
    this section is in no run's or job's identity."""

    shape: Literal["auto", "pool", "one_card"] = Field(
        "auto",
        description="pool: runs first (most expensive first), then each evaluation as it is "
        "ready; one_card: one pre-training at a time, evaluations after it, longest first (for "
        "workers sharing one GPU); auto: one_card with more than one worker on one GPU, else pool",
    )
    beside: int = Field(
        0,
        ge=0,
        description="one_card: evaluations that may run beside the pre-training (each slows it)",
    )

    @model_validator(mode="after")
    def _beside_needs_one_card(self) -> ScheduleSpec:
        if self.beside and self.shape == "pool":
            raise ValueError(
                f"beside: {self.beside} does nothing with shape: pool (the pool starts "
                "every evaluation as soon as it is ready); set shape: one_card or auto, or "
                "leave beside out"
            )
        return self


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
    schedule: ScheduleSpec = Field(
        default_factory=ScheduleSpec,
        description="the order --workers run the work in: pool, or one_card for one shared GPU",
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
            named = [o.display for o in self.objectives if o.name == self.budget.steps_of]
            hint = f"; {self.budget.steps_of!r} is the name of {named[0]!r}" if named else ""
            raise ValueError(
                f"budget.steps_of {self.budget.steps_of!r} is not an objective label "
                f"(the labels: {', '.join(labels)}){hint}"
            )
        if self.finetune is not None and self.evaluation is not None:
            both = sorted(set(self.finetune.tasks) & set(self.evaluation.tasks))
            if both:
                raise ValueError(f"tasks in both finetune and evaluation: {', '.join(both)}")
        return self

    def plan_notes(self) -> list[str]:
        """Lines the plan states because a setting of this spec gives way to another: each
        block whose ``recipe.task_epochs`` overrides ``recipe.epochs`` for some of its tasks."""
        notes = []
        for name in ("finetune", "evaluation"):
            block = getattr(self, name)
            if block is None:
                continue
            recipe = block.resolved_recipe()
            overridden = recipe.epochs_overridden(block.tasks)
            by_epochs: dict[int, list[str]] = {}
            for task, epochs in overridden.items():
                by_epochs.setdefault(epochs, []).append(task)
            for epochs, tasks in by_epochs.items():
                notes.append(  # short: the dry run prints it under an 80-column table
                    f"{', '.join(tasks)}: {epochs} epochs by {name}.recipe.task_epochs, "
                    f"not epochs {recipe.epochs}"
                )
        return notes

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
                    message = format_validation_error(exc, root=StudySpec, retired=RETIRED_KEYS)
                    raise ValueError(f"{where}: {message}") from None
                raise ValueError(f"{where}: {exc}") from None
            out.append((variant.label, spec))
        return out


RETIRED_KEYS = {
    "pretrain.tensorboard": "retired: trackers are chosen at the top level now, write "
    "`tracking: [tensorboard]` (or --set tracking=[tensorboard])",
}
"""Keys an earlier version took, by dotted path, with what to write instead: a spec that still
sets one is refused with that line rather than a bare "unknown key". A study's ``study.json``
written then is read with ``loading.recorded_spec``."""


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
