"""GLUE as one task family: its tasks, which of them enter the GLUE score, its published scores.

The tasks themselves (fields, labels, layouts, metrics) and their data are
``electra_ablate.evaluation.glue.data``; the ELECTRA paper's Table 5, printed beside measured GLUE
scores, is ``electra_ablate.evaluation.glue.published``. Both are named here too, so this module
is the one a reader (or a test) imports GLUE from.

Registered in ``pyproject.toml`` as ``glue = "electra_ablate.evaluation.glue.task:GLUE"`` in the
``electra_ablate.tasks`` entry-point group, as a third-party family would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from electra_ablate.evaluation.glue.data import (
    FAMILY,
    GLUE_TASKS,
    GlueTask,
    check_glue_task,
    glue_task,
    glue_task_fingerprint,
    locate_glue_task,
)
from electra_ablate.evaluation.glue.floors import MAJORITY_FLOORS
from electra_ablate.evaluation.glue.published import TABLE5_GLUE, TABLE5_NAMES, TABLE5_SOURCE
from electra_ablate.evaluation.task import Task, TaskFamily, TaskSettings
from electra_ablate.infra.errors import InputError

__all__ = [
    "EXCLUDED_FROM_SCORE",
    "FAMILY",
    "GLUE",
    "GLUE_TASKS",
    "GlueFamily",
    "GlueTask",
    "glue_task",
]

EXCLUDED_FROM_SCORE = frozenset({"wnli"})
"""The ELECTRA paper's GLUE score leaves WNLI out: its dev set is adversarial to every model and
only adds noise to the average."""


class GlueFamily(TaskFamily):
    name = FAMILY
    title = "GLUE"
    aggregate = "GLUE score"
    description = "the GLUE benchmark's dev sets (hub, hub-parquet folder or GLUE tsv)"
    published = TABLE5_GLUE
    published_names = TABLE5_NAMES
    published_label = "Paper Table 5"
    published_source = TABLE5_SOURCE
    published_note = (
        "The paper's numbers come from base-size models pre-trained to convergence: compare "
        "the ordering, not the absolute values."
    )
    majority_floors = MAJORITY_FLOORS

    def tasks(self) -> Sequence[GlueTask]:
        return list(GLUE_TASKS.values())

    def in_aggregate(self, task: Task) -> bool:
        return task.name not in EXCLUDED_FROM_SCORE

    def check(self, task: Task, settings: TaskSettings) -> None:
        source = settings.source(FAMILY, task.name)
        check_glue_task(source, task.name, spec_dir=settings.spec_dir)

    def fingerprint(self, task: Task, settings: TaskSettings) -> str:
        source = settings.source(FAMILY, task.name)
        return glue_task_fingerprint(source, task.name, spec_dir=settings.spec_dir)

    def bundle_folders(self, task: Task, settings: TaskSettings) -> dict[str, Path]:
        """The task's parquet or tsv folder, copied byte for byte (so its fingerprint in a
        bundle is the raw data's) to ``glue/<folder name>``, where ``locate_glue_task`` looks."""
        source = settings.source(FAMILY, task.name)
        if source == "hub":
            raise InputError(
                "data.glue is 'hub': a bundle carries task files, so point data.glue at "
                "a local GLUE folder (hub parquet or GLUE tsv) to bundle it"
            )
        _, folder = locate_glue_task(source, task.name, spec_dir=settings.spec_dir)
        return {f"{FAMILY}/{folder.name}": folder}


GLUE = GlueFamily()
