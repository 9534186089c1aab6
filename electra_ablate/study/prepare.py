"""A study's data made ready ahead of ``ablate run``: what ``ablate data prepare`` does
(``prepare_study_data``), the command itself only printing the outcome and writing a bundle.

The tokenizer and the packed pre-training sequences are built (or reused from the cache), and
every task of every evaluation block is checked against its data and, for a fine-tuned task,
encoded at the length the recipe supports on this backbone, so that a later run starts at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from electra_ablate.data.pretraining import PretrainingData, prepare_pretraining
from electra_ablate.evaluation.finetune.loop import supported_max_len
from electra_ablate.evaluation.finetuned import FinetunedTask
from electra_ablate.evaluation.task import family_of, get_task
from electra_ablate.infra.progress import status_line
from electra_ablate.spec import StudySpec, task_settings


@dataclass(frozen=True)
class TaskData:
    """One task's data as prepared: its rows and mean length where it is fine-tuned (a task
    that reads its data when it is evaluated has none here)."""

    name: str
    family: str
    metric: str
    train_rows: int | None = None
    validation_rows: int | None = None
    mean_tokens: float | None = None


@dataclass(frozen=True)
class PreparedData:
    data: PretrainingData
    max_seq_len: int
    tasks: list[TaskData]


def prepare_study_data(study: StudySpec, progress: bool) -> PreparedData:
    """Build (or reuse) the study's pre-training data and encode its tasks' data; ``progress``
    shows the steps live (on a terminal), else plain lines say them."""
    max_seq_len = study.backbone_config().max_seq_len
    # on a terminal prepare_pretraining shows its own steps; on a pipe, plain lines say them
    with status_line("preparing the pre-training data", "off" if progress else "plain"):
        data = prepare_pretraining(
            study.data, max_seq_len, spec_dir=study.spec_dir, progress=progress
        )
    tasks = []
    backbone = study.backbone_config(vocab_size=data.vocab_size)
    for block in study.evaluation_blocks():
        for name in block.tasks:
            task, settings = get_task(name), task_settings(study, block, name)
            family_of(task).check(task, settings)
            if not isinstance(task, FinetunedTask):
                tasks.append(TaskData(name, task.family, task.headline))
                continue
            max_len = supported_max_len(settings.recipe, backbone)
            encoded = task.encode(settings, data.tokenizer_dir, max_len)
            tasks.append(
                TaskData(
                    name,
                    task.family,
                    task.headline,
                    len(encoded.train["label"]),
                    len(encoded.validation["label"]),
                    float(np.mean(encoded.train["length"])),
                )
            )
    return PreparedData(data, max_seq_len, tasks)
