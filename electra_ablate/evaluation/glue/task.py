"""GLUE as one task family: every GLUE fact lives here, and only here.

The tasks (text fields, label counts, file layouts), their metrics as the ELECTRA paper reports
them (Matthews correlation for CoLA, Spearman for STS-B, accuracy elsewhere, MRPC and QQP with F1
beside, MNLI scored on its matched dev set), the headline metric of each, which tasks enter the
GLUE score (all but WNLI) and how the data is fingerprinted. Loading and encoding are in
``electra_ablate.evaluation.glue.data`` (imported when a task is evaluated, so that a spec can name tasks
in an instant).

Registered in ``pyproject.toml`` as ``glue = "electra_ablate.evaluation.glue.task:GLUE"`` in the
``electra_ablate.tasks`` entry-point group, as a third-party family would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from electra_ablate.analysis import paper
from electra_ablate.evaluation.finetuned import FinetunedTask
from electra_ablate.evaluation.task import Task, TaskFamily, TaskSettings
from electra_ablate.infra.errors import DataError, did_you_mean

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from electra_ablate.evaluation.glue.data import EncodedGlue

FAMILY = "glue"

EXCLUDED_FROM_SCORE = frozenset({"wnli"})
"""The ELECTRA paper's GLUE score leaves WNLI out: its dev set is adversarial to every model and
only adds noise to the average."""


@dataclass(frozen=True)
class GlueTask(FinetunedTask):
    name: str
    """Hub config name, also the folder name in the parquet layout."""
    tsv_dir: str
    text_fields: tuple[str, ...]
    num_labels: int
    """1 for regression (STS-B)."""
    metrics: tuple[str, ...]
    """Every metric reported, the headline (the task's GLUE score) first."""
    tsv_columns: tuple[str | int, ...]
    """Where ``text_fields`` + label sit in the tsv: header names, or indices without a header."""
    tsv_header: bool = True
    label_names: tuple[str, ...] | None = None
    """tsv labels written as words, in the order of the hub's label ids."""
    validation_split: str = "validation"
    tsv_dev_file: str = "dev.tsv"
    family: str = FAMILY
    description: ClassVar[str] = "GLUE task, fine-tuned with a fresh head on [CLS] (the paper)"

    def schema(self) -> pa.Schema:
        """The hub's columns and types, whatever the source (``data.glue.load_glue_task``)."""
        import pyarrow as pa

        label = pa.float32() if self.is_regression else pa.int64()
        text = [(field, pa.string()) for field in self.text_fields]
        return pa.schema([*text, ("label", label), ("idx", pa.int32())])

    def score(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        from electra_ablate.evaluation import metrics

        if self.is_regression:
            return {
                "spearman": metrics.spearman(predictions, labels),
                "pearson": metrics.pearson(predictions, labels),
            }
        scored = {"accuracy": metrics.accuracy(predictions, labels)}
        if "matthews" in self.metrics:
            scored["matthews"] = metrics.matthews(predictions, labels)
        if "f1" in self.metrics:
            scored["f1"] = metrics.f1(predictions, labels)
        return scored

    def encode(self, settings: TaskSettings, tokenizer_dir: Path, max_len: int) -> EncodedGlue:
        from electra_ablate.evaluation.glue.data import encode_glue, load_glue_task

        source = settings.source(FAMILY, self.name)
        splits = load_glue_task(source, self.name, spec_dir=settings.spec_dir)
        return encode_glue(self.name, splits, tokenizer_dir, max_len=max_len)


_ENTAILMENT = ("entailment", "not_entailment")

GLUE_TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask(
            "cola", "CoLA", ("sentence",), 2, ("matthews", "accuracy"), (3, 1), tsv_header=False
        ),
        GlueTask("sst2", "SST-2", ("sentence",), 2, ("accuracy",), ("sentence", "label")),
        GlueTask(
            "mrpc",
            "MRPC",
            ("sentence1", "sentence2"),
            2,
            ("accuracy", "f1"),
            ("#1 String", "#2 String", "Quality"),
        ),
        GlueTask(
            "stsb",
            "STS-B",
            ("sentence1", "sentence2"),
            1,
            ("spearman", "pearson"),
            ("sentence1", "sentence2", "score"),
        ),
        GlueTask(
            "qqp",
            "QQP",
            ("question1", "question2"),
            2,
            ("accuracy", "f1"),
            ("question1", "question2", "is_duplicate"),
        ),
        GlueTask(
            "mnli",
            "MNLI",
            ("premise", "hypothesis"),
            3,
            ("accuracy",),
            ("sentence1", "sentence2", "gold_label"),
            label_names=("entailment", "neutral", "contradiction"),
            validation_split="validation_matched",
            tsv_dev_file="dev_matched.tsv",
        ),
        GlueTask(
            "qnli",
            "QNLI",
            ("question", "sentence"),
            2,
            ("accuracy",),
            ("question", "sentence", "label"),
            label_names=_ENTAILMENT,
        ),
        GlueTask(
            "rte",
            "RTE",
            ("sentence1", "sentence2"),
            2,
            ("accuracy",),
            ("sentence1", "sentence2", "label"),
            label_names=_ENTAILMENT,
        ),
        GlueTask(
            "wnli",
            "WNLI",
            ("sentence1", "sentence2"),
            2,
            ("accuracy",),
            ("sentence1", "sentence2", "label"),
        ),
    )
}
"""In the order GLUE papers print them."""


def glue_task(name: str) -> GlueTask:
    try:
        return GLUE_TASKS[name]
    except KeyError:
        raise DataError(
            f"unknown GLUE task {name!r}{did_you_mean(name, GLUE_TASKS)}; "
            f"choose from {', '.join(GLUE_TASKS)}"
        ) from None


class GlueFamily(TaskFamily):
    name = FAMILY
    title = "GLUE"
    aggregate = "GLUE score"
    description = "the GLUE benchmark's dev sets (hub, hub-parquet folder or GLUE tsv)"
    published = paper.TABLE5_GLUE
    published_names = paper.TABLE5_NAMES
    published_label = "Paper Table 5"
    published_source = paper.TABLE5_SOURCE
    published_note = (
        "The paper's numbers come from base-size models pre-trained to convergence: compare "
        "the ordering, not the absolute values."
    )

    def tasks(self) -> Sequence[GlueTask]:
        return list(GLUE_TASKS.values())

    def in_aggregate(self, task: Task) -> bool:
        return task.name not in EXCLUDED_FROM_SCORE

    def check(self, task: Task, settings: TaskSettings) -> None:
        from electra_ablate.evaluation.glue.data import check_glue_task

        source = settings.source(FAMILY, task.name)
        check_glue_task(source, task.name, spec_dir=settings.spec_dir)

    def fingerprint(self, task: Task, settings: TaskSettings) -> str:
        from electra_ablate.evaluation.glue.data import glue_task_fingerprint

        source = settings.source(FAMILY, task.name)
        return glue_task_fingerprint(source, task.name, spec_dir=settings.spec_dir)


GLUE = GlueFamily()
