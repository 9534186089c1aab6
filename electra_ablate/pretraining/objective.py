"""The objective contract and the entry-point registry: everything a plugin author needs, here.

An objective is an ``nn.Module`` that owns every model it trains (generator, discriminator,
heads) and turns a batch of packed token ids into a loss plus metrics. The engine only ever
talks to this interface: it never knows which objective it runs. Objectives are discovered
through the ``electra_ablate.objectives`` entry-point group, the same door a third-party
package uses. ``ablate check NAME`` (``electra_ablate.conformance.objective``) verifies the
contract.

The contract, in full:

- ``name``, ``description`` and ``Params`` (a pydantic model: the objective's typed knobs).
- ``__init__(backbone, params, vocab)``: build every module; no data is seen yet.
- ``forward(batch) -> StepOutput``: a finite scalar loss and detached scalar metrics, each
  named by the metric-naming convention (``metric_kind``: ``*_loss``, ``*_nats_learnt``,
  ``*_auc``, ``*_acc``, ``*_entropy``, ``*_kl_<reference>``, ``*_frac``, ...), or declared in
  ``metric_kinds``, so that reports draw each metric in its kind's panels and columns.
- ``kept_model() -> KeptModel``: the encoder (and pre-training head) that fine-tuning and
  export take, with its role, one of ``KEPT_ROLES``.
- ``flops_plan(seq_len) -> list[ModelPass]``: the encoder passes one sequence costs in a
  training step of the current stage; each pass's head is one of ``HEAD_KINDS``, and whatever
  else the objective runs per position (a copy gate) it declares as ``ModelPass.extra_linears``.
- Optional: ``stages()`` and ``enter_stage(i)`` for staged training (the budget is split between
  stages by FLOPs or by steps, ``stage_split()``); ``output_priors()`` for the opt-in
  initialisation of output biases at the data's priors; ``leaves_parameters_unused()`` where a
  stage's loss leaves some trainable parameter without a gradient.
"""

from __future__ import annotations

import copy
import importlib
import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from torch.overrides import TorchFunctionMode

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.tokens import SpecialTokens, Vocab

# what an objective keeps is the checkpoints wing's: named here too, as part of the contract
from electra_ablate.checkpoints.kept import KEPT_ROLES as KEPT_ROLES
from electra_ablate.checkpoints.kept import KeptModel
from electra_ablate.checkpoints.kept import KeptRole as KeptRole
from electra_ablate.infra.entry_points import registered
from electra_ablate.infra.errors import AblateError, InputError, did_you_mean
from electra_ablate.pretraining.config import PriorKind

ENTRY_POINT_GROUP = "electra_ablate.objectives"

Batch = dict[str, torch.Tensor]
"""``input_ids``, ``token_type_ids``, ``attention_mask``: [B, L] tensors of one packed batch.

A batch without padding has no ``attention_mask`` (``batch.get("attention_mask")`` is None):
the collate decides that on the host, so the encoder never asks the device (``model.padding_mask``).
"""

HeadKind = Literal["mlm", "binary", "none"]
"""Heads the FLOPs model prices: ``mlm`` a vocabulary softmax at the predicted positions only,
``binary`` the discriminator's per-token logit, ``none`` no head. An objective's own extra layers
are not kinds here: it declares their cost itself (``ModelPass.extra_linears``)."""
HEAD_KINDS: tuple[str, ...] = get_args(HeadKind)

# PriorKind (``electra_ablate.pretraining.config``): output layers that ``pretrain.prior_bias``
# can start at the data's priors: the main model's MLM heads, a generator's MLM head, and binary
# heads (replaced-token detection, copy gates).
PRIOR_KINDS: tuple[str, ...] = get_args(PriorKind)

StageSplit = Literal["flops", "steps"]

MetricKind = Literal[
    "loss",
    "nats_learnt",
    "auc",
    "accuracy",
    "precision",
    "recall",
    "entropy",
    "divergence",
    "rate",
    "reward",
]
"""What a logged metric measures; reports choose panels, columns and reference lines by kind."""

METRIC_NAMING: tuple[tuple[str, MetricKind], ...] = (
    (r"nats_learnt$", "nats_learnt"),  # the prior's loss minus the model's: 0 at the prior
    (r"(^|_)loss$", "loss"),
    (r"(^|_)auc$", "auc"),  # ROC-AUC, 0.5 at chance
    (r"(^|_)acc$", "accuracy"),
    (r"(^|_)precision$", "precision"),
    (r"(^|_)recall$", "recall"),
    (r"(^|_)entropy$", "entropy"),  # nats
    (r"(^|_)kl(_[a-z0-9]+)?$", "divergence"),  # KL from a reference, nats: gen_kl_unigram
    (r"(^|_)(frac|rate|prob)$", "rate"),  # a share in [0, 1]
    (r"(^|_)reward$", "reward"),
)
"""The metric-naming convention: ``<model>_<quantity>``, the quantity's suffix giving the kind
(``disc_auc``, ``gen_mlm_nats_learnt``, ``replaced_frac``). The first pattern that matches wins."""

METRIC_QUALIFIER = "_incl_special"
"""A suffix after the kind: the same quantity scored over every position, ``[CLS]``/``[SEP]``
included (detection metrics are otherwise scored over ordinary tokens only)."""

KIND_PRIOR: dict[str, float] = {"nats_learnt": 0.0, "auc": 0.5}
"""What a model that has learnt nothing scores, for the kinds where that is a constant."""


def split_metric_name(name: str) -> tuple[str, bool]:
    """``disc_auc_incl_special`` -> (``disc_auc``, True)."""
    if name.endswith(METRIC_QUALIFIER):
        return name[: -len(METRIC_QUALIFIER)], True
    return name, False


def metric_kind(name: str, declared: Mapping[str, str] | None = None) -> MetricKind | None:
    """The kind of a logged metric: as an objective declares it (``Objective.metric_kinds``),
    else by the naming convention; None for a name the convention does not cover (the engine's
    ``grad_norm``, ``lr``, ``tokens_per_s``)."""
    if declared and name in declared:
        return declared[name]  # type: ignore[return-value]
    base, _ = split_metric_name(name)
    for pattern, kind in METRIC_NAMING:
        if re.search(pattern, base):
            return kind
    return None


def declared_metric_kinds(objectives: Iterable[str]) -> dict[str, str]:
    """The ``metric_kinds`` that the named objectives declare, where they are installed."""
    try:
        known = available_objectives()
    except AblateError:
        return {}
    declared: dict[str, str] = {}
    for name in objectives:
        found = _installed(name, known)
        if found is not None:
            declared |= dict(found.metric_kinds)
    return declared


def params_departures(name: str, params: Mapping[str, Any]) -> list[str]:
    """``field value (the paper: x)`` for every param of objective ``name`` that declares the
    paper's value (``Field(..., json_schema_extra={"paper": x})``) and is set to another; empty
    when the objective is not installed here."""
    try:
        found = _installed(name, available_objectives())
    except AblateError:
        return []
    if found is None:
        return []
    params_model = found.Params
    out = []
    for field_name, info in params_model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if "paper" not in extra:
            continue
        value = params.get(field_name, info.get_default(call_default_factory=True))
        if value != extra["paper"]:
            out.append(f"{field_name} {value} (the paper: {extra['paper']})")
    return out


class ObjectiveParams(BaseModel):
    """Hyper-parameters every objective has; subclasses add their own typed fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mask_rate: float = Field(0.15, gt=0.0, lt=1.0, description="fraction of tokens selected")


@dataclass
class StepOutput:
    """The loss to back-propagate and detached scalar metrics (keys ending in ``_loss`` are loss
    terms, which the engine's NaN guard names when one goes non-finite)."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass(frozen=True)
class Stage:
    """A fraction of the budget trained with its own optimizer and schedule."""

    name: str
    fraction: float


@dataclass(frozen=True)
class ModelPass:
    """One encoder pass per sequence in a training step, as the FLOPs model sees it.

    ``head`` runs at ``predicted`` positions per sequence. A pass that is not ``trained`` (a
    frozen generator) costs a forward pass only.
    """

    config: BackboneConfig
    head: HeadKind
    predicted: int
    trained: bool = True
    extra_linears: tuple[tuple[int, int], ...] = ()
    """Linear layers ``(inputs, outputs)`` the objective runs beside its head at the same
    ``predicted`` positions, priced like every dense layer: All-Tokens MLM's copy gate is
    ``((hidden_size, 1),)``. How an objective declares its own head's cost."""

    def __post_init__(self) -> None:
        if self.head not in HEAD_KINDS:
            raise ValueError(f"ModelPass head {self.head!r} is not one of {HEAD_KINDS}")
        for layer in self.extra_linears:
            if len(layer) != 2 or any(not isinstance(n, int) or n < 1 for n in layer):
                raise ValueError(f"ModelPass extra_linears {layer!r} is not (inputs, outputs)")


@dataclass(frozen=True)
class OutputPrior:
    """An output bias and the value it takes under the opt-in prior initialisation."""

    kind: PriorKind
    bias: nn.Parameter
    value: torch.Tensor | float


def logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


class Objective(nn.Module):
    """Base class of every pre-training objective (see the module docstring for the contract)."""

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[ObjectiveParams]] = ObjectiveParams
    metric_kinds: ClassVar[Mapping[str, MetricKind]] = {}
    """Kinds of logged metrics whose names the naming convention does not cover."""

    def __init__(self, backbone: BackboneConfig, params: ObjectiveParams, vocab: Vocab):
        super().__init__()
        self.backbone = backbone
        self.params = params
        self.vocab = copy.deepcopy(vocab)  # its buffers follow this objective's device
        self.stage_index = 0

    @property
    def special(self) -> SpecialTokens:
        return self.vocab.special

    def forward(self, batch: Batch) -> StepOutput:  # pragma: no cover - interface
        raise NotImplementedError

    def kept_model(self) -> KeptModel:  # pragma: no cover - interface
        """The encoder (and its pre-training head) that is fine-tuned and exported."""
        raise NotImplementedError

    def flops_plan(self, seq_len: int) -> list[ModelPass]:  # pragma: no cover - interface
        """The encoder passes one sequence costs in a training step of the current stage."""
        raise NotImplementedError

    def stages(self) -> list[Stage]:
        return [Stage("main", 1.0)]

    def stage_split(self) -> StageSplit:
        """How ``Stage.fraction`` divides the budget: by pre-training FLOPs, or by steps."""
        return "flops"

    def enter_stage(self, index: int) -> None:
        """Called by the engine before training (or resuming) stage ``index``."""
        self.stage_index = index

    def leaves_parameters_unused(self) -> bool:
        """True where a step of the current stage gives some trainable parameter no gradient.

        Under ``torchrun`` DDP must then search the autograd graph for the unused ones at every
        step (``find_unused_parameters``), a cost the other objectives do not pay. The contract
        (``ablate check``) fails an objective that leaves a parameter unused without saying so.
        """
        return False

    def trainable_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """Named parameters the current stage's optimizer updates (shared ones listed once)."""
        return ((n, p) for n, p in self.named_parameters() if p.requires_grad)

    def output_priors(self) -> list[OutputPrior]:
        """Output biases that may start at the data's priors instead of zero (opt-in)."""
        return []


@torch.no_grad()
def init_output_biases(objective: Objective, kinds: Collection[str]) -> list[str]:
    """Start the output biases of the given kinds at their priors; returns the kinds it set.

    The original ELECTRA code starts every bias at zero, and an untrained generator then samples
    almost uniformly: the start of the curriculum the paper's joint training relies on. Priors
    (log token frequencies, the base rate of replaced tokens) are a deviation, offered because
    a post-LN encoder otherwise first fits those base rates with shared state directions.
    """
    done = []
    for prior in objective.output_priors():
        if prior.kind in kinds:
            if isinstance(prior.value, torch.Tensor):
                prior.bias.copy_(prior.value)
            else:
                prior.bias.fill_(prior.value)
            done.append(prior.kind)
    return sorted(set(done))


def _installed(name: str, known: Mapping[str, type[Objective]]) -> type[Objective] | None:
    """Objective ``name`` where it is installed here (registered, or importable as
    ``package.module:Class``), else None: reports read folders made on other machines."""
    if not is_import_path(name):
        return known.get(name)
    try:
        return import_objective(name)
    except AblateError:
        return None


def available_objectives() -> dict[str, type[Objective]]:
    """Every objective registered in the entry-point group, built-in or third-party."""
    found: dict[str, type[Objective]] = {}
    for ep in registered(ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin must not take the CLI down
            raise AblateError(
                f"objective entry point {ep.name!r} ({ep.value}) failed: {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Objective)):
            raise AblateError(f"objective entry point {ep.name!r} ({ep.value}) is not an Objective")
        found[ep.name] = cls
    return dict(sorted(found.items()))


def get_objective(name: str) -> type[Objective]:
    """A registered objective by its entry-point name, or ``package.module:Class`` imported
    directly (``import_objective``): a new objective is usable before any (re-)install."""
    if is_import_path(name):
        return import_objective(name)
    objectives = available_objectives()
    if name not in objectives:
        raise InputError(
            f"unknown objective {name!r}{did_you_mean(name, objectives)}; "
            f"registered: {', '.join(objectives)}"
        )
    return objectives[name]


def is_import_path(name: str) -> bool:
    """Whether an objective name is ``package.module:Class`` rather than a registered name
    (entry-point names cannot hold a colon)."""
    return ":" in name


def import_objective(path: str) -> type[Objective]:
    """The ``Objective`` subclass at ``package.module:Class``, under the registry's rule (an
    ``Objective`` subclass, as an entry point must be). Spec and ids record ``path`` as given,
    so the module must be importable wherever the study runs (installed, or on ``PYTHONPATH``).

    A module or class that is not there is the user's to fix (``InputError``, exit 2); a module
    that fails while importing is a fault of the plugin (``AblateError``, exit 1), as a broken
    entry point is.
    """
    module_name, _, qualname = path.partition(":")
    if not module_name or not qualname or ":" in qualname:
        raise InputError(f"objective {path!r}: give a registered name or package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            raise InputError(
                f"objective {path!r}: no module named {missing!r} (install the package, or put "
                "its folder on PYTHONPATH)"
            ) from None
        raise AblateError(f"objective {path!r}: importing {module_name} failed: {exc}") from exc
    except Exception as exc:  # a broken plugin must not take the CLI down with a traceback
        raise AblateError(f"objective {path!r}: importing {module_name} failed: {exc}") from exc
    found: Any = module
    for part in qualname.split("."):
        if not hasattr(found, part):
            classes = [
                n
                for n, v in vars(module).items()
                if isinstance(v, type) and issubclass(v, Objective)
            ]
            raise InputError(
                f"objective {path!r}: module {module_name} has no {qualname!r}"
                f"{did_you_mean(qualname, classes)}"
            )
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, Objective)):
        raise InputError(f"objective {path!r} is not an Objective subclass")
    return found


def build_objective(
    name: str, backbone: BackboneConfig, params: dict[str, Any] | None, vocab: Vocab
) -> Objective:
    cls = get_objective(name)
    return cls(backbone, cls.Params.model_validate(params or {}), vocab)


class _NoFillOnMeta(TorchFunctionMode):
    """Random initialisation of a meta tensor returns it as it is: it has no values to fill.
    torch would route the fill through its decompositions, whose first use imports the
    compiler stack (about a second of every ``ablate run`` that plans on the meta device)."""

    FILLS = frozenset({"normal_", "uniform_", "trunc_normal_"})  # methods and nn.init's

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensor = args[0] if args else kwargs.get("tensor")  # nn.init passes it by name
        if getattr(func, "__name__", "") in self.FILLS and getattr(tensor, "is_meta", False):
            return tensor
        return func(*args, **kwargs)


def build_on_meta(
    name: str, backbone: BackboneConfig, params: dict[str, Any] | None, vocab: Vocab
) -> Objective:
    """The objective on the meta device: its shapes, parameter counts and FLOPs plan without
    memory or initialisation (planning, estimates and ``ablate flops`` need nothing more)."""
    with torch.device("meta"), _NoFillOnMeta():
        return build_objective(name, backbone, params, vocab)
