"""GLUE's nine tasks and their data: every per-task fact, loading, fingerprinting, encoding.

A ``GlueTask`` is what the family (``electra_ablate.evaluation.glue.task``) registers: its text
fields, label count, file layouts and metrics as the ELECTRA paper reports them (Matthews
correlation for CoLA, Spearman for STS-B, accuracy elsewhere, MRPC and QQP with F1 beside, MNLI
scored on its matched dev set), the headline metric first. The facts and the reading of the
files sit in one module because each needs the other: a task encodes its data, and the readers
look tasks up by name.

Whatever the source, a task loads as ``{"train", "validation"}`` Arrow tables with the hub's
column names and types (text columns, ``label`` int64 or float32 for STS-B, ``idx`` int32), so
the same data gives identical rows from any source. Only the hub needs ``datasets``: local
folders (and data bundles, on an offline node) are read with pyarrow alone. Encoding leaves
examples unpadded: fine-tuning pads each batch only to its longest example.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from electra_ablate.data.bundle import bundled_task_folder
from electra_ablate.data.paths import file_hash, resolve_path
from electra_ablate.data.tokenizer import load_tokenizer
from electra_ablate.evaluation.finetuned import FinetunedTask
from electra_ablate.evaluation.metrics import accuracy, f1, matthews, pearson, spearman
from electra_ablate.evaluation.task import TaskSettings
from electra_ablate.infra.errors import DataError, InputError, did_you_mean

FAMILY = "glue"


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
        """The hub's columns and types, whatever the source (``load_glue_task``)."""
        label = pa.float32() if self.is_regression else pa.int64()
        text = [(field, pa.string()) for field in self.text_fields]
        return pa.schema([*text, ("label", label), ("idx", pa.int32())])

    def score(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        if self.is_regression:
            return {
                "spearman": spearman(predictions, labels),
                "pearson": pearson(predictions, labels),
            }
        scored = {"accuracy": accuracy(predictions, labels)}
        if "matthews" in self.metrics:
            scored["matthews"] = matthews(predictions, labels)
        if "f1" in self.metrics:
            scored["f1"] = f1(predictions, labels)
        return scored

    def encode(self, settings: TaskSettings, tokenizer_dir: Path, max_len: int) -> EncodedGlue:
        source = settings.source(FAMILY, self.name)
        splits = load_glue_task(source, self.name, spec_dir=settings.spec_dir)
        return encode_glue(self.name, splits, tokenizer_dir, max_len=max_len)

    def example_counts(self, settings: TaskSettings) -> tuple[int, int] | None:
        """Rows of the train and validation splits (``glue_example_counts``); None where the
        data cannot be read (a study checks it before this is asked)."""
        try:
            source = settings.source(FAMILY, self.name)
            return glue_example_counts(source, self.name, settings.spec_dir)
        except (DataError, InputError, OSError, pa.ArrowException):
            return None


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


HUB_DATASET = "nyu-mll/glue"


HUB_ROWS: dict[str, tuple[int, int]] = {
    "cola": (8551, 1043),
    "sst2": (67349, 872),
    "mrpc": (3668, 408),
    "stsb": (5749, 1500),
    "qqp": (363846, 40430),
    "mnli": (392702, 9815),
    "qnli": (104743, 5463),
    "rte": (2490, 277),
    "wnli": (635, 71),
}
"""Rows of each task's train and validation split on the hub (``HUB_DATASET``; MNLI's
validation is its matched set), for ``glue_example_counts`` when a study reads the hub, whose
files are not looked at before fine-tuning."""


@functools.cache
def glue_example_counts(source: str, task: str, spec_dir: Path | None = None) -> tuple[int, int]:
    """Rows of ``task``'s train and validation splits without reading them: a parquet file's
    footer, a tsv file's non-empty lines (less its header), the hub's published sizes
    (``HUB_ROWS``). Cached per process: a study's schedule asks it of every job."""
    spec = glue_task(task)
    layout, folder = locate_glue_task(source, task, spec_dir=spec_dir)
    if layout == "hub":
        return HUB_ROWS[spec.name]
    if layout == "parquet":
        train, validation = (
            sum(pq.ParquetFile(f).metadata.num_rows for f in split_files(folder, name))
            for name in ("train", spec.validation_split)
        )
        return train, validation
    header = 1 if spec.tsv_header else 0
    return _lines(folder / "train.tsv") - header, _lines(folder / spec.tsv_dev_file) - header


def _lines(path: Path) -> int:
    """Non-empty lines of a text file (a GLUE tsv row is one line: it is read unquoted)."""
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())


def load_glue_task(source: str, task: str, *, spec_dir: Path | None = None) -> dict[str, pa.Table]:
    """``{"train", "validation"}`` of ``task`` from ``source``: ``"hub"`` or a local folder."""
    spec = glue_task(task)
    layout, folder = locate_glue_task(source, task, spec_dir=spec_dir)
    if layout == "hub":
        splits = _from_hub(spec)
    elif layout == "parquet":
        splits = _from_parquet(spec, folder)
    else:
        splits = _from_tsv(spec, folder)
    loaded = {split: _normalised(spec, dataset) for split, dataset in splits.items()}
    for split, dataset in loaded.items():
        _check_labels(spec, split, dataset, "the hub" if layout == "hub" else str(folder))
    return loaded


def _check_labels(spec: GlueTask, split: str, table: pa.Table, where: str) -> None:
    """Every class label is one of the task's classes: a 7 in a 2-class task, or a test split's
    -1, would otherwise train on garbage targets or fail deep in the loss."""
    if spec.is_regression:
        return
    labels = table.column("label").to_numpy()
    bad = np.flatnonzero((labels < 0) | (labels >= spec.num_labels))
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{spec.name} {split} row {row} (in {where}): label {labels[row]} is not a class "
            f"of 0-{spec.num_labels - 1} ({bad.size} such row(s))"
        )


def locate_glue_task(
    source: str, task: str, *, spec_dir: Path | None = None
) -> tuple[str, Path | None]:
    """Where ``task`` lives, without reading it: ``("hub", None)``, ``("parquet", folder)`` or
    ``("tsv", folder)``; a missing folder or task is a ``DataError`` naming what was looked for."""
    spec = glue_task(task)
    if source == "hub":
        return "hub", None
    try:
        return _locate_in(resolve_path(source, spec_dir), task, spec)
    except DataError as missing:  # not here: an offline node reads a data bundle's copy
        bundled = bundled_task_folder(FAMILY)
        if bundled is None:
            raise
        try:
            return _locate_in(bundled, task, spec)
        except DataError:
            raise missing from None


def _locate_in(folder: Path, task: str, spec: GlueTask) -> tuple[str, Path]:
    if not folder.is_dir():
        raise DataError(f"GLUE folder {folder} does not exist")
    if (folder / spec.name).is_dir():
        return "parquet", folder / spec.name
    if (folder / spec.tsv_dir).is_dir():
        return "tsv", folder / spec.tsv_dir
    found = [
        t.name
        for t in GLUE_TASKS.values()
        if (folder / t.name).is_dir() or (folder / t.tsv_dir).is_dir()
    ]
    raise DataError(
        f"GLUE task {task!r} not found in {folder} (looked for {spec.name}/ or "
        f"{spec.tsv_dir}/; found: {', '.join(found) or 'no GLUE tasks'})"
    )


def glue_task_fingerprint(source: str, task: str, *, spec_dir: Path | None = None) -> str:
    """What a fine-tune's result depends on in ``task``'s data: the task folder's file contents
    (not its path, which may be spelled ``a/../b``, or differ on another machine), or the hub.
    Fine-tune records are cached under it, like pre-training data under the corpus's hashes."""
    layout, folder = locate_glue_task(source, task, spec_dir=spec_dir)
    if layout == "hub":
        return f"hub:{HUB_DATASET}/{glue_task(task).name}"
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return "|".join(f"{p.relative_to(folder).as_posix()}:{file_hash(p)}" for p in files)


def check_glue_task(source: str, task: str, *, spec_dir: Path | None = None) -> None:
    """Raise a ``DataError`` unless ``task``'s train and validation files are where a study
    will look for them (the hub is not contacted)."""
    spec = glue_task(task)
    layout, folder = locate_glue_task(source, task, spec_dir=spec_dir)
    if layout == "parquet":
        for name in ("train", spec.validation_split):
            if not split_files(folder, name):
                raise DataError(f"GLUE task {task!r}: no {name} split in {folder}")
    elif layout == "tsv":
        for name in ("train.tsv", spec.tsv_dev_file):
            if not (folder / name).is_file():
                raise DataError(f"GLUE task {task!r}: {folder / name} does not exist")


def _from_hub(spec: GlueTask) -> dict[str, pa.Table]:
    import datasets  # the hub only: local folders need no `datasets`

    try:
        loaded = datasets.load_dataset(HUB_DATASET, spec.name)
    except Exception as e:  # offline, hub down, renamed: all one message for the user
        raise DataError(
            f"cannot load GLUE task {spec.name!r} from the hub ({HUB_DATASET}): {e}; "
            "offline, point data.glue at a local folder instead"
        ) from e
    return {
        "train": loaded["train"].with_format("arrow")[:],
        "validation": loaded[spec.validation_split].with_format("arrow")[:],
    }


def split_files(folder: Path, name: str) -> list[Path]:
    """A split's parquet files in a task's folder, in order: ``<split>.parquet`` as in the
    shared data, or its shards ``<split>-00000-of-00001.parquet``; none where it is missing."""
    return sorted([*folder.glob(f"{name}.parquet"), *folder.glob(f"{name}-*.parquet")])


def _from_parquet(spec: GlueTask, folder: Path) -> dict[str, pa.Table]:
    """Each split from its files (``split_files``)."""
    splits = {}
    for split, name in (("train", "train"), ("validation", spec.validation_split)):
        files = split_files(folder, name)
        if not files:
            found = ", ".join(sorted(p.name for p in folder.glob("*.parquet"))) or "none"
            raise DataError(
                f"GLUE task {spec.name!r}: no {name} split in {folder} "
                f"(looked for {name}.parquet; found: {found})"
            )
        table = pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")
        splits[split] = table
    return splits


def _from_tsv(spec: GlueTask, folder: Path) -> dict[str, pa.Table]:
    return {
        "train": _read_tsv(spec, folder / "train.tsv"),
        "validation": _read_tsv(spec, folder / spec.tsv_dev_file),
    }


def _read_tsv(spec: GlueTask, path: Path) -> pa.Table:
    """One GLUE tsv; quoting off because the text has bare ``"``, BOM dropped (MRPC has one)."""
    if not path.is_file():
        found = ", ".join(sorted(p.name for p in path.parent.iterdir())) or "nothing"
        raise DataError(f"GLUE task {spec.name!r}: {path} does not exist (found: {found})")
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header = rows.pop(0) if spec.tsv_header and rows else None
    width = len(header) if header else len(rows[0]) if rows else 0
    if header is not None:
        missing = [c for c in spec.tsv_columns if c not in header]
        if missing:
            raise DataError(
                f"{path}: no column(s) {', '.join(map(str, missing))} in the header "
                f"(found: {', '.join(header)})"
            )
        positions = [header.index(c) for c in spec.tsv_columns]
    else:
        positions = list(spec.tsv_columns)
    columns: dict[str, list] = {field: [] for field in (*spec.text_fields, "label")}
    first_line = 2 if header is not None else 1
    for line, row in enumerate(rows, start=first_line):
        if len(row) != width or max(positions) >= width:
            raise DataError(f"{path}:{line}: {len(row)} tab-separated fields, expected {width}")
        *texts, label = (row[i] for i in positions)
        for field, text in zip(spec.text_fields, texts, strict=True):
            columns[field].append(text)
        columns["label"].append(_parse_label(spec, label, path, line))
    columns["idx"] = list(range(len(rows)))
    return pa.table(columns)


def _parse_label(spec: GlueTask, label: str, path: Path, line: int) -> int | float:
    try:
        if spec.is_regression:
            return float(label)
        if spec.label_names is not None:
            return spec.label_names.index(label)
        return int(label)
    except ValueError:
        raise DataError(f"{path}:{line}: bad label {label!r} for task {spec.name!r}") from None


def _normalised(spec: GlueTask, table: pa.Table) -> pa.Table:
    """The hub's columns in a fixed order with fixed types, text trimmed of surrounding
    whitespace (the GLUE tsv keeps SST-2's trailing space, parquet copies differ; the
    tokenizer ignores it either way)."""
    missing = [c for c in spec.schema().names if c not in table.column_names]
    if missing:
        raise DataError(
            f"GLUE task {spec.name!r}: missing column(s) {', '.join(missing)} "
            f"(found: {', '.join(table.column_names)})"
        )
    columns = {f: pc.utf8_trim_whitespace(table[f].cast(pa.string())) for f in spec.text_fields}
    columns["label"] = table["label"].cast(pa.float32() if spec.is_regression else pa.int64())
    columns["idx"] = table["idx"].cast(pa.int32())
    return pa.table(columns, schema=spec.schema())


@dataclass(frozen=True)
class EncodedGlue:
    """A task's splits as token ids, each a column mapping: ``input_ids`` and ``token_type_ids``
    (unpadded lists, ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``, at most ``max_len``),
    ``label`` (int64 class ids or float32 scores) and ``length`` (for dynamic padding)."""

    task: GlueTask
    train: dict[str, Any]
    validation: dict[str, Any]
    train_rows: int
    """Rows in the train split."""


def encode_glue(
    task: str,
    splits: dict[str, pa.Table],
    tokenizer_dir: Path,
    max_len: int = 128,
) -> EncodedGlue:
    """Tokenise both splits whole, truncating the longer text first to ``max_len`` incl.
    specials (caps are applied by fine-tuning: ``finetune.Examples.capped``)."""
    spec = glue_task(task)
    tokenizer = load_tokenizer(tokenizer_dir)
    tokenizer.enable_truncation(max_length=max_len, strategy="longest_first")
    encoded = {}
    for name, dataset in (("train", splits["train"]), ("validation", splits["validation"])):
        columns = dataset.to_pydict()
        texts = [columns[field] for field in spec.text_fields]
        inputs = list(zip(*texts, strict=True)) if len(texts) == 2 else texts[0]
        encodings = tokenizer.encode_batch_fast(inputs) if inputs else []
        encoded[name] = {
            "input_ids": [e.ids for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "label": np.asarray(columns["label"], np.float32 if spec.is_regression else np.int64),
            "length": np.array([len(e.ids) for e in encodings], dtype=np.int64),
        }
    return EncodedGlue(spec, encoded["train"], encoded["validation"], len(splits["train"]))
