"""The metric-naming convention: what a logged metric measures, read from its name.

An objective names every metric it logs ``<model>_<quantity>``, the quantity's suffix giving its
kind (``METRIC_NAMING``), or declares the kind (``Objective.metric_kinds``,
``electra_ablate.pretraining.objective``); reports draw each metric in its kind's panels and
columns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
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
    "spread",
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
    (r"(^|_)(frac|rate|prob|inactive)$", "rate"),  # a share in [0, 1]: disc_head_inactive
    (r"(^|_)reward$", "reward"),
    (r"(^|_)spread$", "spread"),  # the collapse monitor's: enc_spread, disc_head_logit_spread
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


REMEDY = "try a longer warm-up (pretrain.warmup_fraction) or a lower peak pretrain.learning_rate"
"""What to try when a collapse signal fires: the collapse seen on the GPU rungs came with a
warm-up of 1% of the run at the peak rate 5e-4."""


@dataclass(frozen=True)
class CollapseSignal:
    """One signal of the collapse monitor (``pretraining.components.monitor``): the logged
    metric, the side of ``threshold`` that means collapse, what it means, and what to try."""

    metric: str
    threshold: float
    below: bool  # collapse is a value below the threshold (False: above it)
    meaning: str
    remedy: str = REMEDY

    def crossed(self, value: object) -> bool:
        """Whether a logged value is on the collapse side (a missing or non-finite one is not)."""
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        return value < self.threshold if self.below else value > self.threshold

    def line(self, split: str, step: int, value: float) -> str:
        side = "below" if self.below else "above"
        return (
            f"{self.metric} = {value:.3g} at step {step} ({split}), {side} {self.threshold:g}: "
            f"{self.meaning}; {self.remedy} (the run goes on)"
        )


COLLAPSE_SIGNALS: tuple[CollapseSignal, ...] = (
    CollapseSignal(
        "enc_spread",
        0.01,
        below=True,
        meaning="the kept encoder's final states hardly differ across positions (encoder collapse)",
    ),
    CollapseSignal(
        "disc_head_logit_spread",
        1.0e-3,
        below=True,
        meaning="the detection head gives one logit whatever the token (a constant detector)",
    ),
)
"""The collapse monitor's thresholds, checked by the engine against every held-out row by name
(it never knows which objective logs which), each from measurements (``docs/outputs.md``, the
collapse monitor):

- ``enc_spread`` 0.01: ELECTRA on ``micro`` (the smoke corpus, lr 1e-2, 1% warm-up) collapsed
  within 30 steps, its held-out spread 3.3e-4 to 3.5e-4 and its held-out AUC at chance, as the
  GPU rungs' (held-out AUC 0.5000 exactly, ``reports/gpu_session-1e16``); the same run at
  lr 1e-3 and a 10% warm-up, learning (held-out AUC 0.78), had 0.12 at step 30 and 0.45 at step
  75, and every objective on synthetic ``micro`` batches 0.6 to 0.8;
- ``disc_head_logit_spread`` 1e-3: that collapsed run's 1.8e-4 at step 30, 4e-5 at step 75; the
  learning one's 3.3e-3 at step 30 (its head's weights still near their N(0, 0.02) start; an
  untrained ``micro`` head gives 5e-3 to 9e-3) and 0.59 at step 75.

``disc_head_inactive`` is logged but has no threshold: no run measured had a dead head (0 in
the healthy and the collapsed runs), and a dead head gives one logit, which the logit spread
catches."""


def collapse_warnings(row: Mapping[str, object], warned: set[str]) -> list[str]:
    """One line per ``COLLAPSE_SIGNALS`` entry the logged ``row`` crosses and ``warned`` does
    not hold yet (added to it): a run says each signal once, and never stops for it."""
    lines = []
    for signal in COLLAPSE_SIGNALS:
        value = row.get(signal.metric)
        if signal.metric not in warned and signal.crossed(value):
            warned.add(signal.metric)
            lines.append(signal.line(str(row.get("split", "")), int(row.get("step", 0)), value))
    return lines
