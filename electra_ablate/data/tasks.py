"""The GLUE task registry: names, text fields, label counts, metrics and file layouts.

Kept free of heavy imports so that a spec can be checked (task names, caps) in an instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from electra_ablate.errors import DataError, did_you_mean

if TYPE_CHECKING:
    import datasets


@dataclass(frozen=True)
class GlueTask:
    name: str
    """Hub config name, also the folder name in the parquet layout."""
    tsv_dir: str
    text_fields: tuple[str, ...]
    num_labels: int
    """1 for regression (STS-B)."""
    metrics: tuple[str, ...]
    """The first is the task's score; the rest are reported beside it."""
    tsv_columns: tuple[str | int, ...]
    """Where ``text_fields`` + label sit in the tsv: header names, or indices without a header."""
    tsv_header: bool = True
    label_names: tuple[str, ...] | None = None
    """tsv labels written as words, in the order of the hub's label ids."""
    validation_split: str = "validation"
    tsv_dev_file: str = "dev.tsv"

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    @property
    def metric(self) -> str:
        return self.metrics[0]

    def features(self) -> datasets.Features:
        import datasets

        label = datasets.Value("float32" if self.is_regression else "int64")
        text = {field: datasets.Value("string") for field in self.text_fields}
        return datasets.Features({**text, "label": label, "idx": datasets.Value("int32")})


_ENTAILMENT = ("entailment", "not_entailment")

GLUE_TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask("cola", "CoLA", ("sentence",), 2, ("matthews",), (3, 1), tsv_header=False),
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
            ("spearman",),
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


def glue_task(name: str) -> GlueTask:
    try:
        return GLUE_TASKS[name]
    except KeyError:
        raise DataError(
            f"unknown GLUE task {name!r}{did_you_mean(name, GLUE_TASKS)}; "
            f"choose from {', '.join(GLUE_TASKS)}"
        ) from None
