"""A study with fine-tunes under ``torchrun`` (2 gloo ranks): every run is pre-trained by both
ranks in step and fine-tuned by rank 0 alone, and no rank waits on a fine-tune.

Rank 0 used to fine-tune each run before the next one while rank 1 waited in the next run's
DDP constructor: past the process group's timeout (10 minutes under nccl) rank 1 failed that run
and the ranks fell out of step. Here a ``sitecustomize`` on ``PYTHONPATH`` shortens torch's
default timeout before any process group exists and makes the first fine-tune last longer than
it (as a real task's does on a GPU node), so a rank that waits on a fine-tune fails the test."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml

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


def spec_file(tmp_path: Path, shared: Path) -> Path:
    """Two runs (two seeds of BERT's MLM) and one capped GLUE task with two seeds."""
    spec = {
        "name": "ddp-finetune",
        "data": {
            "corpus": {"paths": [f"{shared}/corpus/gutenberg/*.txt.gz"], "max_documents": 400},
            "tokenizer": {"vocab_size": 2048},
            "glue": f"{shared}/glue",
        },
        "backbone": {"preset": "micro"},
        "budget": {"steps": 4, "checkpoints": [1.0]},
        "pretrain": {"batch_size": 8, "seeds": [0, 1], "log_every": 2, "eval_batches": 1},
        "objectives": [{"name": "bert_mlm"}],
        "finetune": {
            "tasks": ["rte"],
            "seeds": [0, 1],
            "caps": {"rte": 64},
            "eval_caps": {"rte": 64},
            "recipe": {"epochs": 1, "task_epochs": {}},
            "baseline": False,
        },
        "device": "cpu",
    }
    path = tmp_path / "ddp-finetune.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_torchrun_study_with_fine_tunes_keeps_its_ranks_in_step(tmp_path, shared_data_dir):
    torchrun, ablate = shutil.which("torchrun"), shutil.which("ablate")
    if torchrun is None or ablate is None:
        pytest.skip("torchrun or the ablate console script is not installed")
    spec = spec_file(tmp_path, shared_data_dir)
    env = {**os.environ, "ABLATE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    # the data is built beforehand: rank 1 would otherwise wait on rank 0 building it
    prepare = subprocess.run(
        [ablate, "data", "prepare", str(spec)], env=env, capture_output=True, text=True
    )
    assert prepare.returncode == 0, prepare.stderr
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(slow_first_fine_tune(tmp_path)), os.environ.get("PYTHONPATH")])
    )
    out = tmp_path / "ddp"
    ddp = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node", "2", ablate, "run", str(spec)]
        + ["--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert ddp.stdout.count("results in") == 1, "rank 0 alone reports and writes"
    runs = pl.read_parquet(out / "runs.parquet").filter(pl.col("objective") == "bert_mlm")
    assert runs["status"].to_list() == ["done", "done"]
    results = pl.read_parquet(out / "results.parquet").filter(pl.col("objective") == "bert_mlm")
    fine_tunes = results.select("run_id", "finetune_seed").unique()
    assert fine_tunes.height == 4  # 2 runs x 1 task x 2 seeds, each fine-tuned by rank 0
