"""A fine-tune's record and its results rows say which precision it trained in (issue 36); the
precision stays out of the job's id, like the device."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import torch

from electra_ablate.analysis.results import write_table
from electra_ablate.backbone.config import PRESETS
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.finetuned import FinetunedTask
from electra_ablate.evaluation.glue.task import GLUE_TASKS
from electra_ablate.evaluation.run import EvaluationJob, run_job
from electra_ablate.evaluation.task import Task, TaskSettings
from electra_ablate.pretraining.objective import KeptModel
from electra_ablate.study.tables import result_rows

SST2 = GLUE_TASKS["sst2"]


def settings(precision: str) -> TaskSettings:
    return TaskSettings(recipe=FinetuneRecipe(precision=precision))


def test_a_fine_tune_resolves_its_recipes_precision_on_its_device():
    assert SST2.precision(settings("auto"), "cpu") == "fp32"
    assert SST2.precision(settings("auto"), torch.device("cuda")) == "bf16"
    assert SST2.precision(settings("fp16"), "cpu") == "fp16"
    assert Task.precision(SST2, settings("bf16"), "cpu") is None  # a task that trains nothing


def test_precision_is_not_part_of_a_fine_tunes_identity():
    assert SST2.identity(settings("bf16")) == SST2.identity(settings("fp32"))


def test_the_record_and_the_results_rows_carry_the_precision(monkeypatch):
    metrics = {"accuracy": 50.0, "train_examples": 8, "wall_seconds": 1.0}
    monkeypatch.setattr(FinetunedTask, "evaluate", lambda *args, **kwargs: dict(metrics))
    cfg = PRESETS["micro"].with_overrides(vocab_size=64)
    kept = LoadedKept(KeptModel(Encoder(cfg), "discriminator", TokenBinaryHead(cfg)), {}, None)
    job = EvaluationJob("job", "run", 1.0, "sst2", 0, settings("bf16"))
    record = run_job(job, "cpu", kept=kept)
    assert record["status"] == "done" and record["precision"] == "bf16"
    assert "precision" not in record["metrics"]  # never read as a metric

    study = SimpleNamespace(spec=SimpleNamespace(name="s"))
    unit = SimpleNamespace(run_id="run", variant=None, objective="electra", label="e", seed=0)
    rows = result_rows(study, unit, record)
    assert [row["precision"] for row in rows] == ["bf16"]


def test_a_results_table_written_before_precision_reads_with_it_null(tmp_path):
    old = {
        "study": "s",
        "run_id": "r",
        "objective": "electra",
        "label": "e",
        "pretrain_seed": 0,
        "checkpoint_fraction": 1.0,
        "pretrain_step": 10,
        "flops_paper": 1.0,
        "flops_standard": 1.0,
        "family": "glue",
        "task": "sst2",
        "finetune_seed": 0,
        "metric": "accuracy",
        "headline": True,
        "in_aggregate": True,
        "value": 50.0,
        "train_examples": 8,
        "wall_s": 1.0,
    }
    frame = write_table(tmp_path / "results.parquet", [old])
    assert frame["precision"].to_list() == [None]
    assert frame.schema["precision"] == pl.String
