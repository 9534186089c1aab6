"""Weights & Biases: one W&B run per unit, in project ``$WANDB_PROJECT`` (default
``electra-ablate``), grouped by the study's name and named by the unit's label.

The run's id is the unit's tracker key (a hash of the study's name and the unit's id) and it is
opened with ``resume="allow"``: a resumed pre-training run and the unit's later evaluations
continue the same W&B run, and an identical unit reused into another study gets its own.
Everything is plotted against the pre-training FLOPs (``pretrain_flops``, the paper's
convention: ``define_metric`` makes it every metric's step metric), so that two objectives,
whose steps cost differently, line up at equal compute; ``pretrain_step`` is in every row too,
for a panel whose x-axis is set to it. Neither is W&B's own step counter, which only grows:
evaluations logged after pre-training land at their checkpoint's FLOPs and step, and the unit's
ledger keeps a row from being logged twice.

W&B sends in the background, so logging never waits for the network; opening a run does. Online
without a network ``wandb.init`` would wait 90 s before failing, so it is given
``INIT_TIMEOUT_S`` (the tracker then warns and turns itself off). The library's console output
is silenced (``WANDB_SILENT`` unless set, ``console="off"``): the terminal stays the study's.

W&B keeps its files (an offline run whole, for ``wandb sync``) in ``<folder>/wandb``, the folder
being ``$WANDB_DIR`` where set, else the study's own folder: a study's runs stay with it, not in
whichever folder ``ablate`` was started from (``wandb`` itself would take the working folder).
``WANDB_MODE=offline`` (or ``wandb offline``) keeps them there only.
A folder W&B cannot write, it replaces with the system's temporary one, where nobody syncs from,
and says so only in a warning that the silence above swallows: so an offline run's folder is
checked (created, a file written in it) before the run opens, and where the run went is checked
once it has. If it is not where it was asked, opening fails with a ``TrackerProblem`` that names
the folder: the fan-out says so in one line, and the ledger marks nothing sent to W&B, so a
later run with the folder writable catches it up. Online, W&B's own copy in the temporary folder
costs nothing: the server has the run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from electra_ablate.infra.tracking.protocol import (
    FLOPS_KEY,
    STEP_KEY,
    TrackedUnit,
    TrackerProblem,
    event_metrics,
)

DEFAULT_PROJECT = "electra-ablate"
INIT_TIMEOUT_S = 30.0
"""How long opening a run may wait for W&B's servers before the tracker gives up (W&B's own
default is 90 s)."""
OFFLINE_MODES = ("offline", "dryrun")
"""The values of ``$WANDB_MODE`` (and of a run's mode) that keep runs on this machine only."""


class WandB:
    name: ClassVar[str] = "wandb"
    package: ClassVar[str | None] = "wandb"
    extra: ClassVar[str | None] = "wandb"

    def open(self, unit: TrackedUnit) -> WandBRun:
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        asked = wandb_folder(unit)
        if os.environ.get("WANDB_MODE") in OFFLINE_MODES:
            problem = cannot_write(asked)
            if problem is not None:
                raise TrackerProblem(unwritable(asked, problem))
        run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
            group=unit.study,
            name=unit.label,
            id=unit.key,
            resume="allow",
            dir=str(asked),  # as read now (W&B reads $WANDB_DIR once per process)
            settings=wandb.Settings(init_timeout=INIT_TIMEOUT_S, console="off", silent=True),
        )
        kept = Path(run.settings.sync_dir)
        if run.settings.mode in OFFLINE_MODES and not kept.resolve().is_relative_to(
            asked.resolve()
        ):  # fallen back to the temporary folder: what it logs would never be synced
            with contextlib.suppress(Exception):
                run.finish()
            raise TrackerProblem(
                unwritable(asked, cannot_write(asked) or "W&B did not use it")
                + f"; W&B would have kept the run in {kept.parent}"
            )
        # on resume the config is updated, not replaced: a value that changed (a new version's
        # deviations) must not make W&B refuse it
        run.config.update(dict(unit.config), allow_val_change=True)
        run.define_metric(STEP_KEY)
        run.define_metric(FLOPS_KEY)
        run.define_metric("*", step_metric=FLOPS_KEY)
        return WandBRun(run)


def wandb_folder(unit: TrackedUnit) -> Path:
    """Where W&B is to keep its files (in a ``wandb`` folder inside): ``$WANDB_DIR`` where set,
    else the study's folder, else the working folder (as W&B would)."""
    return Path(os.environ.get("WANDB_DIR") or unit.study_folder or os.getcwd())


def cannot_write(folder: Path) -> str | None:
    """Why no file can be written in ``folder`` (created if missing), or None if one can: a file
    is written, not the permissions read, which a read-only mount or root would belie."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".electra-ablate-"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def unwritable(folder: Path, problem: str) -> str:
    return f"cannot write to {folder} ({problem}), where W&B is to keep its offline runs"


class WandBRun:
    def __init__(self, run: Any) -> None:  # wandb.Run
        self.run = run

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log({**metrics, STEP_KEY: step})

    def event(self, name: str, step: int, data: Mapping[str, Any]) -> None:
        self.log(event_metrics(name, data), step)

    def close(self) -> None:
        self.run.finish()
