"""What a tracker is, so that TensorBoard, W&B, MLflow and a third party's all look alike to the
engine and the study: a ``Tracker`` opens one ``TrackerRun`` per unit of a study, from the
``TrackedUnit`` that says which unit it is, and the run takes metrics at a pre-training step,
named events (a kept checkpoint) and a close.

A tracker never decides what is worth sending again: ``fanout.Tracking`` asks the unit's ledger
first, and every call a tracker makes may fail (no network, a full disk, even a ``SystemExit``)
without harm, since the fan-out catches it and keeps what it missed unsent. A tracker that finds
its library would keep what it is sent where nobody looks (W&B's offline runs in the temporary
folder) raises a ``TrackerProblem`` saying so. So a tracker is a thin adapter of its library, and
its package is imported only in ``open``: naming it in a spec costs nothing until a unit is
tracked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

STEP_KEY = "pretrain_step"
"""One x-axis every tracker plots against: the pre-training step of a curve's row, or of the
checkpoint an evaluation scored (0 for the baseline and the reference scorers), as the tables'
``pretrain_step`` column."""

FLOPS_KEY = "pretrain_flops"
"""The other x-axis, the one the study compares at: the pre-training FLOPs (the paper's
convention, the tables' ``flops_paper``) of a row's step or of an evaluation's checkpoint. Steps
do not line up across objectives (an ELECTRA step costs more than a BERT step, so at one budget
BERT takes more of them); FLOPs do. The fan-out puts it among a run's metrics and an event's
data wherever it is known; each built-in tracker plots against it (W&B as the step metric,
TensorBoard and MLflow as the ``BY_FLOPS`` series), and a third party's gets it as one more
metric."""

BY_FLOPS = "by_flops/"
"""The prefix of the series TensorBoard and MLflow index by FLOPs (their step is an integer):
``by_flops/train/loss`` is ``train/loss`` with the FLOPs as its step."""

MAX_STEP = 2**63 - 1
"""The largest step TensorBoard and MLflow store (a 64-bit integer): 9.2e18 FLOPs, 6.6 times
ELECTRA-Small's whole pre-training (1.4e18)."""


class TrackerProblem(Exception):  # noqa: N818 - a tracker's account, said as it is
    """A tracker's own one-phrase account of why it cannot go on (W&B cannot write its offline
    runs where asked): the fan-out's warning line gives it as it is, without a type name."""


@dataclass(frozen=True)
class TrackedUnit:
    """One unit of a study as its trackers see it.

    ``key`` names the unit's tracker run wherever it is kept (a W&B run id, an MLflow tag): a
    hash of the study's name and the unit's id, so that resuming or evaluating later finds the
    same run, and an identical unit copied into another study gets its own. ``config`` is what
    the run records as its configuration (plain JSON values); ``folder`` is the unit's own folder
    (a tracker that writes files, TensorBoard's, writes there)."""

    key: str
    study: str
    label: str
    config: Mapping[str, Any]
    folder: Path
    study_folder: Path | None = None
    """The study's own folder, where a tracker keeps what is not one unit's (W&B's runs); None:
    the working folder."""


@runtime_checkable
class TrackerRun(Protocol):
    """One unit's run in one tracker. Metrics are ``name -> number`` at a pre-training step
    (``STEP_KEY``), with the step's FLOPs among them as ``FLOPS_KEY`` where known; an event is
    something that happened at a step (``kept``, with the budget fraction and the FLOPs) under a
    name, its data holding ``FLOPS_KEY`` too."""

    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def event(self, name: str, step: int, data: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class Tracker(Protocol):
    """A tracker as registered in the ``electra_ablate.trackers`` entry-point group: a class
    whose instances open runs. ``package`` is the module it needs (checked when a spec names
    the tracker, without importing it); ``extra`` the optional extra of ``electra-ablate`` that
    installs it (None for a third party's tracker: its own package brings what it needs)."""

    name: ClassVar[str]
    package: ClassVar[str | None]
    extra: ClassVar[str | None]

    def open(self, unit: TrackedUnit) -> TrackerRun: ...


def event_metrics(name: str, data: Mapping[str, Any]) -> dict[str, float]:
    """An event as metrics, for a tracker that plots events as curves (every built-in one):
    each number of ``data`` as ``<name>/<key>``, but ``FLOPS_KEY`` as it is (the x-axis)."""
    return {
        key if key == FLOPS_KEY else f"{name}/{key}": value for key, value in numeric(data).items()
    }


def by_flops(metrics: Mapping[str, float]) -> tuple[dict[str, float], int] | None:
    """``metrics`` as the FLOPs-indexed series of a tracker whose step is an integer
    (TensorBoard, MLflow): each but ``FLOPS_KEY`` under ``BY_FLOPS``, and the FLOPs rounded to
    the integer step they are logged at; None when ``metrics`` carry no FLOPs. FLOPs past
    ``MAX_STEP`` raise a ``TrackerProblem``: a tracker's failure (one warning line), never a
    point quietly moved."""
    flops = metrics.get(FLOPS_KEY)
    if flops is None or not math.isfinite(flops):
        return None
    step = round(flops)
    if not 0 <= step <= MAX_STEP:
        raise TrackerProblem(f"{flops:.3g} FLOPs is past the largest step it stores ({MAX_STEP})")
    return {BY_FLOPS + key: value for key, value in metrics.items() if key != FLOPS_KEY}, step


def numeric(data: Mapping[str, Any]) -> dict[str, float]:
    """The entries of ``data`` that a tracker can plot: finite or not, but numbers (a bool is
    not one)."""
    return {
        key: float(value)
        for key, value in data.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
