"""GLUE: the task table, the three sources giving identical rows, clear errors, encoding."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from electra_ablate.data.tokenizer import save_tokenizer, train_wordpiece
from electra_ablate.evaluation.finetune.batching import as_examples
from electra_ablate.evaluation.glue.data import (
    GLUE_TASKS,
    encode_glue,
    glue_task_fingerprint,
    load_glue_task,
)
from electra_ablate.infra.errors import DataError

SENTENCES = [
    'He said "it works" and left.',
    "The quick brown fox jumps over the lazy dog.",
    "A café in Zürich serves coffee.",
    "Dogs and foxes rarely share a garden.",
]

# The classic GLUE tsv header of each task (CoLA has none), written as GLUE ships them.
TSV_HEADERS = {
    "sst2": ["sentence", "label"],
    "mrpc": ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
    "stsb": [
        "index",
        "genre",
        "filename",
        "year",
        "old_index",
        "source1",
        "source2",
        "sentence1",
        "sentence2",
        "score",
    ],
    "qqp": ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
    "mnli": [
        "index",
        "promptID",
        "pairID",
        "genre",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    ],
    "qnli": ["index", "question", "sentence", "label"],
    "rte": ["index", "sentence1", "sentence2", "label"],
    "wnli": ["index", "sentence1", "sentence2", "label"],
}
TSV_LABEL = {"sst2": "label", "mrpc": "Quality", "stsb": "score", "qqp": "is_duplicate"}
TSV_LABEL |= {"mnli": "gold_label", "qnli": "label", "rte": "label", "wnli": "label"}
TSV_TEXT = {
    "sst2": ["sentence"],
    "mrpc": ["#1 String", "#2 String"],
    "qqp": ["question1", "question2"],
    "qnli": ["question", "sentence"],
}
LABEL_WORDS = {
    "rte": ["entailment", "not_entailment"],
    "qnli": ["entailment", "not_entailment"],
    "mnli": ["entailment", "neutral", "contradiction"],
}


def hub_rows(task: str, split: str) -> list[dict]:
    """Rows as the hub has them: the task's text columns, label, idx."""
    spec = GLUE_TASKS[task]
    rows = []
    for i in range(3 if split == "train" else 2):
        row = {field: SENTENCES[(i + k) % 4] for k, field in enumerate(spec.text_fields)}
        row["label"] = round(1.25 * i, 2) if spec.is_regression else i % spec.num_labels
        row["idx"] = i
        rows.append(row)
    return rows


def tsv_line(task: str, row: dict) -> str:
    spec = GLUE_TASKS[task]
    texts = [row[f] for f in spec.text_fields]
    label = row["label"]
    if task == "cola":
        return f"gj04\t{label}\t{'' if label else '*'}\t{texts[0]}"
    if task == "stsb":
        label = f"{label:.3f}"
    elif task in LABEL_WORDS:
        label = LABEL_WORDS[task][label]
    header = TSV_HEADERS[task]
    fields = {name: "x" for name in header}
    text_columns = TSV_TEXT.get(task, ["sentence1", "sentence2"])
    for name, text in zip(text_columns, texts, strict=True):
        fields[name] = text + (" " if task == "sst2" else "")  # GLUE keeps SST-2's trailing space
    fields[TSV_LABEL[task]] = str(label)
    return "\t".join(fields[name] for name in header)


def write_tsv(root: Path, task: str) -> None:
    spec = GLUE_TASKS[task]
    folder = root / spec.tsv_dir
    folder.mkdir(parents=True, exist_ok=True)
    for split, file in (("train", "train.tsv"), ("validation", spec.tsv_dev_file)):
        lines = [tsv_line(task, row) for row in hub_rows(task, split)]
        if task != "cola":
            lines.insert(0, "\t".join(TSV_HEADERS[task]))
        bom = "\ufeff" if task == "mrpc" else ""
        (folder / file).write_text(bom + "\n".join(lines) + "\n", encoding="utf-8")


def write_parquet(root: Path, task: str, hub_names: bool = False) -> None:
    spec = GLUE_TASKS[task]
    folder = root / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train"), ("validation", spec.validation_split)):
        table = pa.Table.from_pylist(hub_rows(task, split))
        file = f"{name}-00000-of-00001.parquet" if hub_names else f"{name}.parquet"
        pq.write_table(table, folder / file)


@pytest.mark.parametrize("task", sorted(GLUE_TASKS))
def test_tsv_and_parquet_give_identical_rows(tmp_path: Path, task: str):
    write_tsv(tmp_path / "tsv", task)
    write_parquet(tmp_path / "parquet", task, hub_names=task == "mnli")
    from_tsv = load_glue_task(str(tmp_path / "tsv"), task)
    from_parquet = load_glue_task(str(tmp_path / "parquet"), task)
    spec = GLUE_TASKS[task]
    for split in ("train", "validation"):
        assert from_tsv[split].schema == from_parquet[split].schema == spec.schema()
        assert from_tsv[split].to_pylist() == from_parquet[split].to_pylist()
        assert from_tsv[split].column_names == [*spec.text_fields, "label", "idx"]
        labels = [r["label"] for r in hub_rows(task, split)]
        assert from_tsv[split].column("label").to_pylist() == labels
    first = from_tsv["train"].column(spec.text_fields[0])[0].as_py()
    assert first == SENTENCES[0]  # bare quotes survive


def test_relative_folder_and_extra_parquet_columns(tmp_path: Path):
    folder = tmp_path / "glue" / "rte"
    folder.mkdir(parents=True)
    for split in ("train", "validation"):
        rows = hub_rows("rte", split)
        table = pa.table(
            {
                "idx": pa.array([r["idx"] for r in rows], pa.int64()),
                "sentence2": pa.array([r["sentence2"] for r in rows], pa.large_string()),
                "sentence1": pa.array([r["sentence1"] for r in rows], pa.large_string()),
                "label": [r["label"] for r in rows],
                "extra": [1.0] * len(rows),
            }
        )
        pq.write_table(table, folder / f"{split}.parquet")
    loaded = load_glue_task("glue", "rte", spec_dir=tmp_path)
    assert loaded["train"].to_pylist() == hub_rows("rte", "train")


def test_a_task_is_identified_by_its_files_contents_not_by_its_path(tmp_path: Path):
    """Fine-tune records are cached under this: the same files reached by another spelling of
    the path, or copied elsewhere, must hit the cache; an edited file must not."""
    write_parquet(tmp_path / "a", "rte")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    fingerprint = glue_task_fingerprint(str(tmp_path / "a"), "rte")
    assert glue_task_fingerprint(str(tmp_path / "b" / ".." / "a"), "rte") == fingerprint
    assert glue_task_fingerprint("a", "rte", spec_dir=tmp_path) == fingerprint
    assert glue_task_fingerprint(str(tmp_path / "b"), "rte") == fingerprint
    rows = hub_rows("rte", "train")
    rows[0] = {**rows[0], "label": 1 - rows[0]["label"]}
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "b" / "rte" / "train.parquet")
    assert glue_task_fingerprint(str(tmp_path / "b"), "rte") != fingerprint
    assert glue_task_fingerprint("hub", "rte") == "hub:nyu-mll/glue/rte"


def test_missing_task_names_what_was_looked_for_and_found(tmp_path: Path):
    write_parquet(tmp_path, "cola")
    write_tsv(tmp_path, "mrpc")
    with pytest.raises(DataError) as error:
        load_glue_task(str(tmp_path), "qqp")
    message = str(error.value)
    assert f"GLUE task 'qqp' not found in {tmp_path}" in message
    assert "qqp/ or QQP/" in message and "found: cola, mrpc" in message


def test_partial_task_and_missing_folder(tmp_path: Path):
    write_parquet(tmp_path, "qnli")
    (tmp_path / "qnli" / "train.parquet").unlink()
    with pytest.raises(DataError, match=r"no train split .*found: validation.parquet"):
        load_glue_task(str(tmp_path), "qnli")
    write_tsv(tmp_path, "rte")
    (tmp_path / "RTE" / "dev.tsv").unlink()
    with pytest.raises(DataError, match=r"RTE/dev.tsv does not exist \(found: train.tsv\)"):
        load_glue_task(str(tmp_path), "rte")
    with pytest.raises(DataError, match="GLUE folder .* does not exist"):
        load_glue_task(str(tmp_path / "absent"), "rte")
    with pytest.raises(DataError, match="unknown GLUE task 'cola2'"):
        load_glue_task(str(tmp_path), "cola2")


def test_malformed_tsv_rows_are_errors_with_their_line(tmp_path: Path):
    write_tsv(tmp_path, "sst2")
    path = tmp_path / "SST-2" / "train.tsv"
    path.write_text("sentence\tlabel\ngood film \t1\nno label here\n")
    with pytest.raises(DataError, match=r"train.tsv:3: 1 tab-separated fields, expected 2"):
        load_glue_task(str(tmp_path), "sst2")
    path.write_text("sentence\tlabel\ngood film \tpositive\n")
    with pytest.raises(DataError, match=r"train.tsv:2: bad label 'positive' for task 'sst2'"):
        load_glue_task(str(tmp_path), "sst2")
    path.write_text("text\tlabel\ngood film \t1\n")
    with pytest.raises(DataError, match=r"no column\(s\) sentence in the header"):
        load_glue_task(str(tmp_path), "sst2")


def test_hub_offline_is_a_clear_error():
    with pytest.raises(DataError, match=r"cannot load GLUE task 'cola' from the hub"):
        load_glue_task("hub", "cola")


def test_task_table():
    assert set(GLUE_TASKS) == {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"}
    assert GLUE_TASKS["cola"].headline == "matthews"
    assert GLUE_TASKS["stsb"].headline == "spearman" and GLUE_TASKS["stsb"].is_regression
    assert GLUE_TASKS["mrpc"].metrics == ("accuracy", "f1") == GLUE_TASKS["qqp"].metrics
    assert GLUE_TASKS["mnli"].num_labels == 3
    assert GLUE_TASKS["mnli"].validation_split == "validation_matched"
    assert not GLUE_TASKS["rte"].is_regression and GLUE_TASKS["rte"].headline == "accuracy"


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    tokenizer = train_wordpiece([tuple(SENTENCES)] * 5, vocab_size=150, lowercase=True)
    folder = tmp_path / "tok"
    folder.mkdir()
    save_tokenizer(tokenizer, folder)
    return folder


def test_encode_pairs_with_segments_and_longest_first_truncation(tokenizer_dir: Path):
    long_text = " ".join(["dogs and foxes"] * 20)
    splits = {
        "train": pa.Table.from_pylist(
            [
                {"sentence1": "The dog.", "sentence2": "A fox.", "label": 0, "idx": 0},
                {"sentence1": long_text, "sentence2": "A fox.", "label": 1, "idx": 1},
            ]
        ),
        "validation": pa.Table.from_pylist(
            [{"sentence1": "Dogs.", "sentence2": long_text, "label": 1, "idx": 0}]
        ),
    }
    encoded = encode_glue("rte", splits, tokenizer_dir, max_len=16)
    train = encoded.train
    short_ids, long_ids = train["input_ids"]
    assert short_ids[0] == 2 and short_ids[-1] == 3 and short_ids.count(3) == 2
    assert train["token_type_ids"][0] == [0] * (short_ids.index(3) + 1) + [1] * (
        len(short_ids) - short_ids.index(3) - 1
    )
    assert len(long_ids) == 16 and long_ids[-4:-1] == short_ids[-4:-1]  # "a fox ." kept whole
    assert train["length"].tolist() == [len(short_ids), 16]
    assert train["label"].dtype == np.int64 and train["label"].tolist() == [0, 1]
    assert encoded.validation["length"].tolist() == [16]
    assert encoded.task.name == "rte" and encoded.train_rows == 2


def test_encode_single_sentences_and_the_one_capping_path(tmp_path: Path, tokenizer_dir: Path):
    write_tsv(tmp_path, "stsb")
    splits = load_glue_task(str(tmp_path), "stsb")
    full = encode_glue("stsb", splits, tokenizer_dir)
    assert full.train["label"].dtype == np.float32
    assert full.train["label"].tolist() == [0.0, 1.25, 2.5]

    cola_dir = tmp_path / "cola_only"
    write_tsv(cola_dir, "cola")
    cola = encode_glue("cola", load_glue_task(str(cola_dir), "cola"), tokenizer_dir)
    assert cola.train_rows == 3 and len(cola.train["input_ids"]) == 3  # encoded whole
    capped = as_examples(cola.train).capped(2)
    again = as_examples(cola.train).capped(2)
    assert len(capped) == 2 and capped.input_ids == again.input_ids  # a fixed subset
    assert capped.input_ids == [ids for ids in cola.train["input_ids"] if ids in capped.input_ids]
    assert all(
        ids.count(3) == 1 and set(t) == {0}
        for ids, t in zip(capped.input_ids, capped.token_type_ids, strict=True)
    )
    assert (
        as_examples(cola.train).capped(None) is not capped
        and len(as_examples(cola.train).capped(5)) == 3
    )


@pytest.mark.parametrize("label", [7, -1])
def test_a_class_label_out_of_range_is_an_error_naming_its_split_and_row(tmp_path, label):
    """A 2-class task with a label 7 (or a test split's -1) would fine-tune on garbage targets,
    or fail deep in the loss with no file named."""
    write_parquet(tmp_path, "rte")
    path = tmp_path / "rte" / "train.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[1] = {**rows[1], "label": label}
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(
        DataError, match=rf"rte train row 1 \(in .*rte\): label {label} is not a class of 0-1"
    ):
        load_glue_task(str(tmp_path), "rte")
