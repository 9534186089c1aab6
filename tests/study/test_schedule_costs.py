"""What the one-card schedule orders ready evaluations by: each task's untimed cost
(``Task.relative_cost``), read from its data's row counts without reading the rows, and its kind
in the schedule log (``Task.schedule_kind``). The real task classes, on small hand-made GLUE
folders (and, marked slow, the shared data against the hub's published sizes)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.data import GLUE_TASKS, HUB_ROWS, glue_example_counts
from electra_ablate.evaluation.task import TaskSettings, available_tasks, get_task

ROWS = {"sst2": (600, 90), "rte": (100, 30)}  # train, validation


def glue_folder(root: Path) -> Path:
    """SST-2 and RTE as parquet (the hub's layout) with ``ROWS`` rows."""
    for task, counts in ROWS.items():
        (root / task).mkdir(parents=True)
        for split, n in zip(("train", "validation"), counts, strict=True):
            table = pa.table({"sentence": ["a film"] * n, "label": [0] * n})
            pq.write_table(table, root / task / f"{split}.parquet")
    return root


def settings(glue: str, **recipe: object) -> TaskSettings:
    return TaskSettings(sources={"glue": glue}, recipe=FinetuneRecipe(**recipe))


def cost(task: str, where: TaskSettings) -> float:
    return get_task(task).relative_cost(where)


def test_a_longer_fine_tune_costs_more_and_a_probe_less_than_any_fine_tune(tmp_path):
    here = settings(str(glue_folder(tmp_path)))
    # the paper's recipe: SST-2 three epochs of 600, RTE ten of 100, each dev set at a third
    assert cost("sst2", here) == 600 * 3 + 90 / 3
    assert cost("rte", here) == 100 * 10 + 30 / 3
    assert cost("sst2", here) > cost("rte", here) > cost("rtd_unigram", here)
    assert cost("rte", here) > cost("rte_probe", here) > 0
    assert cost("sst2_probe", here) == pytest.approx(0.1 * (600 + 90))
    # caps and epochs enter as the fine-tune applies them
    capped = settings(str(tmp_path), train_caps={"sst2": 50}, task_epochs={"rte": 2})
    assert cost("sst2", capped) == 50 * 3 + 90 / 3 and cost("rte", capped) == 100 * 2 + 30 / 3
    capped = TaskSettings(sources={"glue": str(tmp_path)}, eval_cap=9)
    assert cost("rte", capped) == 100 * 10 + 9 / 3


def test_counts_come_from_the_files_whatever_their_layout_and_from_the_hub_sizes(tmp_path):
    parquet = glue_folder(tmp_path / "parquet")
    tsv = tmp_path / "tsv" / "SST-2"
    tsv.mkdir(parents=True)
    rows = "".join("a film\t0\n" for _ in range(600))
    (tsv / "train.tsv").write_text("sentence\tlabel\n" + rows)
    (tsv / "dev.tsv").write_text("sentence\tlabel\n" + rows[: 90 * len("a film\t0\n")])
    assert glue_example_counts(str(parquet), "sst2") == glue_example_counts(str(tsv.parent), "sst2")
    assert cost("sst2", settings("hub")) == HUB_ROWS["sst2"][0] * 3 + HUB_ROWS["sst2"][1] / 3
    assert cost("sst2", settings("hub")) > cost("rte", settings("hub"))
    # data that is not there (a study checks it first) is an unknown cost, never an error
    assert cost("rte", settings(str(tmp_path / "nowhere"))) == 1.0


def test_the_schedule_log_calls_a_fine_tune_a_fine_tune_and_a_probe_a_probe():
    kinds = {name: task.schedule_kind for name, task in available_tasks().items()}
    assert {kinds[t] for t in GLUE_TASKS} == {"finetune"}
    assert kinds["sst2_probe"] == kinds["rtd_unigram"] == kinds["rtd_head_unigram"] == "probe"
    assert set(kinds.values()) == {"finetune", "probe"}


@pytest.mark.slow
def test_the_hub_sizes_are_the_shared_datas(shared_data):
    """``HUB_ROWS`` (read when a study's GLUE is the hub) against the shared data's parquet
    copies of the hub, for every task the shared data holds whole."""
    compared = 0
    for task in GLUE_TASKS.values():
        folder = shared_data / "glue" / task.name
        if not (folder / "train.parquet").is_file():
            continue
        assert glue_example_counts(str(shared_data / "glue"), task.name) == HUB_ROWS[task.name]
        compared += 1
    assert compared >= 5
