"""The evaluation contract and its entry-point registry.

A *task* scores one kept encoder with one seed; a *family* is a set of tasks that share their
data, how that data is fingerprinted, and an aggregate (GLUE's score). Families are discovered
through the ``electra_ablate.tasks`` entry-point group, the same door a third-party package uses,
so a new family is one module plus an entry point: the study, the results tables, the report and
the CLI only ever talk to this interface. ``ablate check --task NAME``
(``electra_ablate.conformance.task.check_task``) verifies it.

The contract, in full. A ``TaskFamily`` has:

- ``name``: the family in results tables (the ``family`` column), the key its data fingerprint
  takes in a job's identity, and the stem of its report figures (``glue`` -> ``glue_vs_flops``);
  ``title`` ("GLUE") for prose, and ``aggregate`` ("GLUE score"), or None when averaging its
  tasks would mean nothing.
- ``tasks()``: its tasks, in the order tables print them.
- ``published`` (optional): published aggregate scores per objective, for reports.
- ``in_aggregate(task)``: whether a task enters the aggregate (GLUE: all but WNLI). Every family
  aggregates the same two ways (``electra_ablate.analysis.results``): per evaluated model, the
  mean over its aggregated tasks of each task's headline metric; and the paper's way, each
  task's median over seeds first, then the mean.
- ``check(task, settings)``: the task's data is where ``settings`` points (cheap: ``ablate
  validate`` and ``ablate run`` call it before any compute).
- ``fingerprint(task, settings)``: what the task's data is (file contents, not paths): part of
  every job's identity, so a job is redone exactly when its data changes.
- ``bundle_folders(task, settings)`` (optional): the folders of the task's data files that
  ``ablate data prepare --bundle`` copies for an offline node, by their place in the bundle
  (default: none).

A ``Task`` has:

- ``name``, ``description``, ``family`` (the family's ``name``);
- ``needs``, one of ``NEEDS``: what it takes from a kept encoder. ``finetuned_head``: the encoder
  is fine-tuned with a fresh head (GLUE); ``frozen_features``: the encoder's features, never
  updated (linear probes); ``detection_head``: the kept replaced-token detection head of a
  discriminator (skipped, with a recorded reason, for an MLM encoder);
- ``metrics``: every metric ``evaluate`` reports, the headline first (``headline``); values on
  the 0-100 scale GLUE papers print where the metric is a rate or a correlation; a
  classification fine-tune also reports ``PREDICTION_FACTS`` (its predictions' majority share
  and the majority-class baseline), which tables keep as rows but never aggregate;
- ``Params``: a pydantic model of its own settings (``evaluation.params.<task>`` in a spec,
  validated with the spec), or None;
- ``seeded``: whether its result depends on a seed (fine-tuning, a probe's split); an unseeded
  task is evaluated once, with the first of the spec's seeds;
- ``identity(settings)``: everything besides the encoder, the seed and the data fingerprint that
  changes its result (a fine-tuning recipe, caps, a probe's params), JSON-serialisable;
- ``evaluate(kept, settings, seed, device, progress)``: the whole evaluation of one kept encoder
  (``electra_ablate.checkpoints.kept.LoadedKept``): its metrics, plus the bookkeeping keys in
  ``RECORD_FIELDS`` that apply;
- ``skip_reason(kept)``: why this task does not apply to that encoder, or None;
- ``majority_risk(settings)``: why these settings make every model's likely outcome the
  majority class (a training set capped under what the family measured), in words, or None
  (the default: no such risk, or none measured); the dry run and the start of ``ablate run``
  warn it before compute is spent (``electra_ablate.study.preflight``);
- ``estimate_seconds(kept, settings, device)``: what ``evaluate`` will cost, for
  ``ablate run --dry-run`` (default: run it once and time it);
- ``relative_cost(settings)``: a cheap, untimed measure of the same, only compared with other
  tasks' (the one-card schedule starts the longest evaluations first:
  ``electra_ablate.study.schedule``); ``schedule_kind``: ``finetune`` or ``probe``, what a
  study's schedule log calls its evaluations (from ``needs``, by default);
- ``references`` and ``evaluate_reference(reference, settings, seed, tokenizer_dir)``: scorers
  that need no encoder (a count-based detector, a majority-class predictor), evaluated once per
  data setting on the same data, so a table can show what the data holds beside what each
  encoder learnt. Their rows carry the reference's name as objective and label.

How a probe plugs in (sketch; ``tests/evaluation/test_evaluation.py`` runs a complete one)::

    class DetectionProbe(Task):
        name, family, needs = "rtd_probe", "probes", "frozen_features"
        metrics = ("auc",)
        references = ("bigram", "token_identity")

        def identity(self, settings):
            return {"params": dict(settings.params)}

        def evaluate(self, kept, settings, seed, device="cpu", progress=None):
            corrupted = corrupt(held_out_text(settings), seed)   # fixed sources, seeded
            features = token_features(kept, corrupted)           # frozen encoder
            return {"auc": 100 * fit_and_score(features, corrupted.labels, seed)}

        def evaluate_reference(self, reference, settings, seed, tokenizer_dir):
            return {"auc": 100 * count_detector(reference, ...).auc}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from pydantic import BaseModel

from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.infra.entry_points import look_up, registered
from electra_ablate.infra.errors import AblateError, InputError

if TYPE_CHECKING:
    from electra_ablate.checkpoints.kept import LoadedKept

TASK_ENTRY_POINT_GROUP = "electra_ablate.tasks"

Needs = Literal["finetuned_head", "frozen_features", "detection_head"]
NEEDS: tuple[str, ...] = get_args(Needs)

RECORD_FIELDS = ("train_examples", "eval_examples", "epochs", "train_seconds", "wall_seconds")
"""Bookkeeping an evaluation may report beside its metrics: how much data it used and how long
it took. Never a metric: results tables keep them apart."""

MAJORITY_SHARE = "majority_share"
MAJORITY_BASELINE = "majority_baseline"
PREDICTION_FACTS = (MAJORITY_SHARE, MAJORITY_BASELINE)
"""What a classification fine-tune's dev predictions are made of, reported beside its metrics
(never in an aggregate, never a headline): the share of predictions in the most frequent
predicted class (0-100; 100 is a constant prediction) and the headline score of always
predicting the dev set's majority class. A score near that baseline with a share of 100 says the
encoder learnt nothing the task can use, however it compares with another's. Kept as result rows
of their own (``metric``), so older records simply lack them. Computed by
``electra_ablate.evaluation.finetuned.FinetunedTask.prediction_facts``."""

Progress = Callable[[int, int], None]
"""Called as work advances with (steps done, total steps)."""

ScheduleKind = Literal["finetune", "probe"]

EVAL_EXAMPLE_COST = 1 / 3
"""``Task.relative_cost``'s weight of an evaluated example against a trained one: a forward
pass, against a forward and a backward pass (about twice the forward's FLOPs)."""
PROBE_EXAMPLE_COST = 0.1
"""``Task.relative_cost``'s weight of a probe's example against a fine-tuning one: one forward
pass without gradients, in batches packed by tokens, and a linear fit on its features, against
a whole fine-tuning step's share per example (forward, backward, optimizer)."""


def capped(count: int, cap: int | None) -> int:
    """``count`` examples after a cap (None: no cap)."""
    return min(count, cap) if cap else count


@dataclass(frozen=True)
class TaskSettings:
    """What a study (or ``ablate finetune``) tells a task beyond the encoder and the seed.

    ``sources`` is the spec's ``data`` section as plain values (``glue``, ``corpus``,
    ``tokenizer``, ``cache_dir``): each family reads the keys it needs and names a missing one.
    ``recipe`` (caps merged in) and ``eval_cap`` apply to tasks that fine-tune; ``params`` are
    the task's own settings from the spec's ``evaluation.params``. ``max_seq_len`` is the length
    the study packs its pre-training text to (its backbone's), for tasks that read that text
    (the replaced-token detection probes), or None outside a study.
    """

    sources: Mapping[str, Any] = field(default_factory=dict)
    spec_dir: Path = Path(".")
    recipe: FinetuneRecipe = field(default_factory=FinetuneRecipe)
    eval_cap: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    max_seq_len: int | None = None

    def source(self, key: str, task: str) -> Any:
        """``sources[key]``, or a one-line error saying which task needed it."""
        value = self.sources.get(key)
        if value is None:
            raise InputError(f"task {task!r} needs data.{key}, which is not set")
        return value


class Task:
    """One evaluation of a kept encoder (see the module docstring for the contract)."""

    name: str
    family: str
    description: ClassVar[str] = ""
    needs: Needs = "finetuned_head"
    metrics: tuple[str, ...]
    seeded: bool = True
    references: tuple[str, ...] = ()
    Params: ClassVar[type[BaseModel] | None] = None
    """The task's own settings (``evaluation.params.<task>`` in a spec), or None for none."""

    @property
    def headline(self) -> str:
        """The one number per task that enters its family's aggregate and its tables."""
        return self.metrics[0]

    def identity(self, settings: TaskSettings) -> dict[str, Any]:
        return {}

    def evaluate(
        self,
        kept: LoadedKept,
        settings: TaskSettings,
        seed: int,
        device: Any = "cpu",
        progress: Progress | None = None,
    ) -> dict[str, float]:  # pragma: no cover - interface
        raise NotImplementedError

    def precision(self, settings: TaskSettings, device: Any) -> str | None:
        """The autocast precision ``evaluate`` trains in on ``device``, for the job's record
        (not its identity); None for a task that trains nothing in torch (the default)."""
        return None

    @property
    def schedule_kind(self) -> ScheduleKind:
        """What a study's schedule log (``schedule.jsonl``) calls an evaluation of this task:
        ``finetune`` where the encoder is trained with a head, ``probe`` where it is read
        frozen (or its kept head is)."""
        return "finetune" if self.needs == "finetuned_head" else "probe"

    def relative_cost(self, settings: TaskSettings) -> float:
        """How long one ``evaluate`` takes, in example passes of a fine-tune (a trained example
        is 1; see ``EVAL_EXAMPLE_COST``, ``PROBE_EXAMPLE_COST``), estimated without timing or
        encoding anything: a study's one-card schedule starts ready evaluations longest first
        by it, so only its order against other tasks' matters. It must be cheap (the parent of
        a study's workers asks it of every job) and the same on every machine for the same
        data. Default: 1, an unknown cost counted as one example."""
        return 1.0

    def skip_reason(self, kept: LoadedKept) -> str | None:
        if self.needs == "detection_head" and kept.model.role != "discriminator":
            role = kept.model.role
            return f"{self.name} needs a discriminator's detection head; this encoder is {role!r}"
        return None

    def majority_risk(self, settings: TaskSettings) -> str | None:
        """Why every model, baseline included, is likely to score the majority class under
        ``settings`` (e.g. too few training examples seen), with the measurement that says so,
        or None: a study's pre-flight check warns it before compute is spent. Default: None
        (a probe, or a task with nothing measured)."""
        return None

    def estimate_seconds(self, kept: LoadedKept, settings: TaskSettings, device: Any) -> float:
        """Seconds one ``evaluate`` takes: by default, one timed evaluation."""
        import time

        start = time.perf_counter()
        self.evaluate(kept, settings, 0, device)
        return time.perf_counter() - start

    def evaluate_reference(
        self, reference: str, settings: TaskSettings, seed: int, tokenizer_dir: Path
    ) -> dict[str, float]:  # pragma: no cover - interface
        raise NotImplementedError(f"{self.name} declares no reference {reference!r}")


@dataclass(frozen=True)
class MajorityFloor:
    """A task's measured floor: the fewest fine-tuning examples seen (training examples after
    the cap × epochs) at which a model of a committed study first predicted more than one class
    on the dev set, and ``source``, the studies and counts that measured it. Under it no
    committed model, baseline included, ever did: the likely outcome is the majority class."""

    examples_seen: int
    source: str


class TaskFamily:
    """A set of tasks sharing data, a fingerprint and an aggregate (see the module docstring)."""

    name: str
    title: str
    aggregate: str | None = None
    description: str = ""
    published: Mapping[str, float] = {}
    """Published aggregate scores by objective name, printed beside the measured ones (GLUE:
    the ELECTRA paper's Table 5), with ``published_names`` and ``published_source``."""
    published_names: Mapping[str, str] = {}
    published_label: str = ""
    """A column header for the published scores ("Paper Table 5")."""
    published_source: str = ""
    published_note: str = ""
    """What a reader must know to compare them (a model size, a training length)."""
    majority_floors: Mapping[str, MajorityFloor] = {}
    """By task: the floor the family measured (``MajorityFloor``), which a fine-tuned task's
    ``majority_risk`` reads. A family fact, not the task's code: it changes what the pre-flight
    check warns, never what an evaluation computes, so it sits outside the tasks' fingerprinted
    modules (``electra_ablate.infra.code_identity``)."""

    def tasks(self) -> Sequence[Task]:  # pragma: no cover - interface
        raise NotImplementedError

    def in_aggregate(self, task: Task) -> bool:
        return self.aggregate is not None

    def check(self, task: Task, settings: TaskSettings) -> None:
        return None

    def fingerprint(self, task: Task, settings: TaskSettings) -> str:
        """Data identity; a family whose tasks generate their data returns a constant."""
        return ""

    def bundle_folders(self, task: Task, settings: TaskSettings) -> dict[str, Path]:
        """The folders of ``task``'s data files that a data bundle carries for an offline node,
        by where in the bundle the family's reader looks for them
        (``electra_ablate.data.bundle.bundled_task_folder``: ``glue/RTE``); none (the default)
        where the task reads no data files of the study (a probe of the pre-training text)."""
        return {}


# ------------------------------------------------------------------------------- registry
def available_families() -> dict[str, TaskFamily]:
    """Every family registered in the entry-point group, built-in or third-party, by name."""
    found: dict[str, TaskFamily] = {}
    for ep in registered(TASK_ENTRY_POINT_GROUP):
        try:
            loaded = ep.load()
            family = loaded() if isinstance(loaded, type) else loaded
        except Exception as exc:  # a broken plugin must not take the CLI down
            raise AblateError(f"task entry point {ep.name!r} ({ep.value}) failed: {exc}") from exc
        if not isinstance(family, TaskFamily):
            raise AblateError(f"task entry point {ep.name!r} ({ep.value}) is not a TaskFamily")
        if family.name != ep.name:
            raise AblateError(
                f"task entry point {ep.name!r} ({ep.value}) names family {family.name!r}"
            )
        found[ep.name] = family
    return dict(sorted(found.items()))


def available_tasks() -> dict[str, Task]:
    """Every registered task by name, family by family, each in its family's order."""
    tasks: dict[str, Task] = {}
    for family in available_families().values():
        for task in family.tasks():
            if task.family != family.name:
                raise AblateError(
                    f"task {task.name!r} of family {family.name!r} says {task.family!r}"
                )
            if task.name in tasks:
                raise AblateError(
                    f"task {task.name!r} is registered by families {tasks[task.name].family!r} "
                    f"and {family.name!r}"
                )
            tasks[task.name] = task
    return tasks


def get_task(name: str) -> Task:
    return look_up("task", name, available_tasks())


def get_family(name: str) -> TaskFamily:
    return look_up("task family", name, available_families())


def family_of(task: Task) -> TaskFamily:
    return get_family(task.family)


def probe_tasks(names: Iterable[str]) -> list[str]:
    """The registered tasks among ``names`` that read a kept encoder without training it (any
    ``needs`` but ``finetuned_head``): the probes, which the report tabulates task by task in
    ``probes.csv``. A task whose package is not installed here is not known to be one and is
    left out."""
    tasks = available_tasks()
    return [name for name in names if name in tasks and tasks[name].needs != "finetuned_head"]


def describe_family(name: str) -> TaskFamily:
    """The registered family, or (its package not installed here, or broken) a bare one that
    names it, so that a finished study's tables can always be reported."""
    try:
        return available_families()[name]
    except (AblateError, KeyError):
        bare = TaskFamily()
        bare.name, bare.title, bare.aggregate = name, name, f"{name} score"
        return bare
