"""A study with fine-tunes under ``torchrun`` (2 gloo ranks): every run is pre-trained by both
ranks in step and fine-tuned by rank 0 alone, and no rank waits on a fine-tune.

Rank 0 used to fine-tune each run before the next one while rank 1 waited in the next run's
DDP constructor: past the process group's timeout (10 minutes under nccl) rank 1 failed that run
and the ranks fell out of step. Here a ``sitecustomize`` on ``PYTHONPATH`` shortens torch's
default timeout before any process group exists and makes the first fine-tune last longer than
it (as a real task's does on a GPU node), so a rank that waits on a fine-tune fails the test."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from torchrun_helpers import (
    assert_rank_zero_alone_finished,
    micro_spec,
    needs_torchrun,
    torchrun_ablate_run,
    with_pythonpath,
)

pytestmark = pytest.mark.slow

TIMEOUT_S = 15
"""The process groups' timeout in the test: far above what the ranks of a micro run wait for
each other while pre-training (a few seconds at most on a loaded machine)."""


def slow_first_fine_tune(tmp_path: Path) -> Path:
    """A folder whose ``sitecustomize`` sets torch's default process group timeout to
    ``TIMEOUT_S`` and delays each process's first fine-tune by more than that."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"""import time
from datetime import timedelta

import torch.distributed.distributed_c10d as c10d

import electra_ablate.study.execute as execute

c10d.default_pg_timeout = timedelta(seconds={TIMEOUT_S})
run_job, delayed = execute.run_job, []


def slow_run_job(*args, **kwargs):
    if not delayed:
        delayed.append(True)
        time.sleep({TIMEOUT_S + 5})
    return run_job(*args, **kwargs)


execute.run_job = slow_run_job
"""
    )
    return site


@needs_torchrun
def test_torchrun_study_with_fine_tunes_keeps_its_ranks_in_step(tmp_path, smoke_env):
    # two runs (two seeds of BERT's MLM) and one capped GLUE task with two seeds, on data that
    # smoke_env built beforehand: rank 1 would otherwise wait on rank 0 building it
    spec = micro_spec(
        tmp_path,
        "ddp-finetune",
        budget={"steps": 4, "checkpoints": [1.0]},
        pretrain={"batch_size": 8, "seeds": [0, 1], "log_every": 2, "eval_batches": 1},
        objectives=[{"name": "bert_mlm"}],
        finetune={
            "tasks": ["rte"],
            "seeds": [0, 1],
            "caps": {"rte": 64},
            "eval_caps": {"rte": 64},
            "recipe": {"epochs": 1, "task_epochs": {}},
            "baseline": False,
        },
    )
    env = {**with_pythonpath(smoke_env, slow_first_fine_tune(tmp_path)), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "ddp"
    assert_rank_zero_alone_finished(torchrun_ablate_run(spec, out, env, tmp_path))
    runs = pl.read_parquet(out / "runs.parquet").filter(pl.col("objective") == "bert_mlm")
    assert runs["status"].to_list() == ["done", "done"]
    results = pl.read_parquet(out / "results.parquet").filter(pl.col("objective") == "bert_mlm")
    fine_tunes = results.select("run_id", "finetune_seed").unique()
    assert fine_tunes.height == 4  # 2 runs x 1 task x 2 seeds, each fine-tuned by rank 0
