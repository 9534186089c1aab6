"""The objective contract: what an objective author implements, and what the engine calls.

A plugin imports these names from ``electra_ablate.plugin``, the one stable face for plugin
authors; this module is where the contract is defined. An objective is an ``nn.Module`` that
owns every model it trains (generator, discriminator, heads) and turns a batch of packed token
ids into a loss plus metrics. The engine only ever talks to this interface: it never knows which
objective it runs. How objectives are found and built by name is
``electra_ablate.pretraining.registry``; ``ablate check NAME``
(``electra_ablate.conformance.objective``) verifies the contract.

The contract, in full:

- ``name``, ``description`` and ``Params`` (a pydantic model: the objective's typed knobs).
- ``__init__(backbone, params, vocab)``: build every module; no data is seen yet.
- ``forward(batch) -> StepOutput``: a finite scalar loss and detached scalar metrics, each
  named by the metric-naming convention (``electra_ablate.pretraining.metric_names``:
  ``*_loss``, ``*_nats_learnt``, ``*_auc``, ``*_acc``, ``*_entropy``, ``*_kl_<reference>``,
  ``*_frac``, ...), or declared in ``metric_kinds``, so that reports draw each metric in its
  kind's panels and columns.
- ``kept_model() -> KeptModel``: the encoder (and pre-training head) that fine-tuning and
  export take, with its role, one of ``KEPT_ROLES``.
- ``flops_plan(seq_len) -> list[ModelPass]``: the encoder passes one sequence costs in a
  training step of the current stage; each pass's head is one of ``HEAD_KINDS``, and whatever
  else the objective runs per position (a copy gate) it declares as ``ModelPass.extra_linears``.
- Optional: ``stages()`` and ``enter_stage(i)`` for staged training (the budget is split between
  stages by FLOPs or by steps, ``stage_split()``); ``output_priors()`` for the opt-in
  initialisation of output biases at the data's priors (``logit`` gives a binary head's);
  ``leaves_parameters_unused()`` where a stage's loss leaves some trainable parameter without a
  gradient.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, get_args

import torch
from pydantic import ConfigDict, Field
from torch import nn

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.tokens import SpecialTokens, Vocab

# what an objective keeps is the checkpoints wing's: named here too, as part of the contract
from electra_ablate.checkpoints.kept import KEPT_ROLES as KEPT_ROLES
from electra_ablate.checkpoints.kept import KeptModel
from electra_ablate.checkpoints.kept import KeptRole as KeptRole
from electra_ablate.infra.spec_model import SpecModel
from electra_ablate.pretraining.config import PriorKind
from electra_ablate.pretraining.metric_names import MetricKind

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


class ObjectiveParams(SpecModel):
    """Hyper-parameters every objective has; subclasses add their own typed fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mask_rate: float = Field(
        0.15,
        gt=0.0,
        lt=1.0,
        description="fraction of tokens selected",
        json_schema_extra={"paper": 0.15},  # §3.1 and Table 6 (base); Large's 0.25 not compared
    )

    def inapplicable(self) -> frozenset[str]:
        """Fields that mean nothing under the other settings (a unigram generator reads no
        input, so how it reads [MASK] is moot): no departure is stated for them."""
        return frozenset()


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
