"""Weights & Biases: one W&B run per unit, in project ``$WANDB_PROJECT`` (default
``electra-ablate``), grouped by the study's name and named by the unit's label.

The run's id is the unit's tracker key (a hash of the study's name and the unit's id) and it is
opened with ``resume="allow"``: a resumed pre-training run and the unit's later evaluations
continue the same W&B run, and an identical unit reused into another study gets its own.
Everything is plotted against ``pretrain_step`` (``define_metric``), not W&B's own step counter,
which only grows: evaluations logged after pre-training land at their checkpoint's step, and
the unit's ledger keeps a row from being logged twice.

W&B sends in the background, so logging never waits for the network; opening a run does. Online
without a network ``wandb.init`` would wait 90 s before failing, so it is given
``INIT_TIMEOUT_S`` (the tracker then warns and turns itself off). The library's console output
is silenced (``WANDB_SILENT`` unless set, ``console="off"``): the terminal stays the study's.
``WANDB_MODE=offline`` keeps runs in ``$WANDB_DIR/wandb`` for ``wandb sync``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

from electra_ablate.infra.tracking.protocol import STEP_KEY, TrackedUnit, event_metrics

DEFAULT_PROJECT = "electra-ablate"
INIT_TIMEOUT_S = 30.0
"""How long opening a run may wait for W&B's servers before the tracker gives up (W&B's own
default is 90 s)."""


class WandB:
    name: ClassVar[str] = "wandb"
    package: ClassVar[str | None] = "wandb"
    extra: ClassVar[str | None] = "wandb"

    def open(self, unit: TrackedUnit) -> WandBRun:
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
            group=unit.study,
            name=unit.label,
            id=unit.key,
            resume="allow",
            settings=wandb.Settings(init_timeout=INIT_TIMEOUT_S, console="off", silent=True),
        )
        # on resume the config is updated, not replaced: a value that changed (a new version's
        # deviations) must not make W&B refuse it
        run.config.update(dict(unit.config), allow_val_change=True)
        run.define_metric(STEP_KEY)
        run.define_metric("*", step_metric=STEP_KEY)
        return WandBRun(run)


class WandBRun:
    def __init__(self, run: Any) -> None:  # wandb.Run
        self.run = run

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log({**metrics, STEP_KEY: step})

    def event(self, name: str, step: int, data: Mapping[str, Any]) -> None:
        self.log(event_metrics(name, data), step)

    def close(self) -> None:
        self.run.finish()
