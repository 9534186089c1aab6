"""The metric-naming convention: what a logged metric measures, read from its name.

An objective names every metric it logs ``<model>_<quantity>``, the quantity's suffix giving its
kind (``METRIC_NAMING``), or declares the kind (``Objective.metric_kinds``,
``electra_ablate.pretraining.objective``); reports draw each metric in its kind's panels and
columns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

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
