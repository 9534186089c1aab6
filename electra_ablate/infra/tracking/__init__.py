"""Experiment trackers: where a study's curves and scores go besides its own files, as the spec's
``tracking`` key names them (``[tensorboard, wandb, mlflow]``, any subset).

- ``protocol``: what a tracker is (``Tracker``, ``TrackerRun``, the ``TrackedUnit`` it opens);
- ``registry``: the ``electra_ablate.trackers`` entry-point group, and why a name cannot be used;
- ``ledger``: what each tracker run of a unit has been sent (``tracking.json``), so nothing is
  sent twice;
- ``fanout``: one unit's trackers behind one fail-safe face (``Tracking``): a tracker that fails
  warns once and is off, never the study;
- ``tensorboard``, ``wandb``, ``mlflow``: the built-in trackers, one module each, importing
  their library only when a unit is tracked.

They sit in ``infra`` so that the pre-training engine and the study both reach them: the study
opens a unit's trackers (it knows the study's name and the unit's configuration), the engine
logs its rows into them.
"""

from electra_ablate.infra.tracking.fanout import Tracking
from electra_ablate.infra.tracking.ledger import Ledger
from electra_ablate.infra.tracking.protocol import (
    FLOPS_KEY,
    STEP_KEY,
    TrackedUnit,
    Tracker,
    TrackerRun,
)
from electra_ablate.infra.tracking.registry import GROUP, available_trackers, tracker_problem

__all__ = [
    "FLOPS_KEY",
    "GROUP",
    "STEP_KEY",
    "Ledger",
    "TrackedUnit",
    "Tracker",
    "TrackerRun",
    "Tracking",
    "available_trackers",
    "tracker_problem",
]
