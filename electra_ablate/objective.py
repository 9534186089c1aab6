"""The objective interface and the entry-point registry.

An objective is an ``nn.Module`` that owns every model it trains (generator, discriminator,
heads) and turns a batch of packed token ids into a loss plus metrics. The engine only ever
talks to this interface: it never knows which objective it runs. Objectives are discovered
through the ``electra_ablate.objectives`` entry-point group, the same door a third-party
package uses.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, ClassVar, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from electra_ablate.config import BackboneConfig
from electra_ablate.errors import AblateError
from electra_ablate.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.tokens import SpecialTokens

ENTRY_POINT_GROUP = "electra_ablate.objectives"

Batch = dict[str, torch.Tensor]
"""``input_ids``, ``token_type_ids``, ``attention_mask``: [B, L] tensors of one packed batch."""


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
    """A slice of the FLOPs budget trained with its own optimizer and schedule."""

    name: str
    fraction: float


@dataclass(frozen=True)
class ModelPass:
    """One encoder pass per sequence in a training step, as the FLOPs model sees it.

    ``head`` runs at ``predicted`` positions per sequence: ``mlm`` is a vocabulary softmax (only
    at predicted positions), ``binary`` the discriminator's per-token logit, ``copy_mlm`` the
    All-Tokens MLM head (vocabulary softmax plus a copy gate), ``none`` no head. A pass that is
    not ``trained`` (a frozen generator) costs a forward pass only.
    """

    config: BackboneConfig
    head: Literal["mlm", "binary", "copy_mlm", "none"]
    predicted: int
    trained: bool = True


@dataclass
class KeptModel:
    """What fine-tuning and export take from a pre-trained objective."""

    encoder: Encoder
    role: Literal["discriminator", "mlm"]
    head: nn.Module


@dataclass(frozen=True)
class OutputPriors:
    """What an output layer should predict before it has learnt anything from context.

    ``token_probs`` is the training data's token distribution over the vocabulary (add-one
    smoothed, special tokens counted out), i.e. what a frequency-only MLM predicts.
    """

    token_probs: torch.Tensor

    @classmethod
    def from_counts(cls, counts: torch.Tensor, special: SpecialTokens) -> OutputPriors:
        counts = counts.double().clone()
        counts[list(special.ids)] = 0.0
        smoothed = counts + 1.0
        return cls((smoothed / smoothed.sum()).float())

    @property
    def log_probs(self) -> torch.Tensor:
        return self.token_probs.log()

    @property
    def unigram_collision(self) -> float:
        """Chance that a frequency-only sample equals the original token (sum of p^2)."""
        return float((self.token_probs.double() ** 2).sum())


def logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


class Objective(nn.Module):
    """Base class of every pre-training objective.

    Subclasses set ``name``, ``description`` and ``Params``, build their modules in
    ``__init__`` and implement ``forward``, ``kept_model`` and ``flops_plan``. Staged objectives
    override ``stages`` and ``enter_stage``.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[ObjectiveParams]] = ObjectiveParams

    def __init__(self, backbone: BackboneConfig, params: ObjectiveParams, special: SpecialTokens):
        super().__init__()
        self.backbone = backbone
        self.params = params
        self.special = special
        self.stage_index = 0

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

    def enter_stage(self, index: int) -> None:
        """Called by the engine before training (or resuming) stage ``index``."""
        self.stage_index = index

    def trainable_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        """Named parameters the current stage's optimizer updates (shared ones listed once)."""
        return ((n, p) for n, p in self.named_parameters() if p.requires_grad)

    def detection_prior(self, priors: OutputPriors) -> float:
        """P("replaced") over the positions that carry the detection loss, while the generator
        is still frequency-only: masked (``mask_rate``) and sampled as another token."""
        return self.params.mask_rate * (1.0 - priors.unigram_collision)

    @torch.no_grad()
    def init_output_biases(self, priors: OutputPriors) -> None:
        """Start every output layer at the prior of what it predicts instead of at zero.

        With zero biases, the fastest way for a post-LN encoder to fit a base rate (15%
        replaced, or the unigram distribution) is to push every token's state along one shared
        direction; LayerNorm then squeezes out what tells tokens apart, layer after layer, and
        the gradients that would learn from context vanish. Measured on ``tiny``: the spread of
        token states across a batch falls from 0.64 to 1.5e-4 over four layers within 60 steps,
        and a discriminator stays at its prior (precision 0) for thousands of steps. With the
        prior in the bias there is nothing left to fit that way. MLM heads get the log token
        frequencies, detection heads ``logit(detection_prior)``; objectives with other output
        layers extend this.
        """
        for module in self.modules():
            if isinstance(module, MLMHead):
                module.bias.copy_(priors.log_probs)
            elif isinstance(module, TokenBinaryHead):
                module.logit.bias.fill_(logit(self.detection_prior(priors)))


def available_objectives() -> dict[str, type[Objective]]:
    """Every objective registered in the entry-point group, built-in or third-party."""
    found: dict[str, type[Objective]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
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
    objectives = available_objectives()
    if name not in objectives:
        raise AblateError(f"unknown objective {name!r}; registered: {', '.join(objectives)}")
    return objectives[name]


def build_objective(
    name: str, backbone: BackboneConfig, params: dict[str, Any] | None, special: SpecialTokens
) -> Objective:
    cls = get_objective(name)
    return cls(backbone, cls.Params.model_validate(params or {}), special)
