"""``torchrun --standalone --nproc_per_node 2 $(which ablate) run SPEC`` on CPU (gloo) trains
exactly like one process with the same global batch: each rank takes its slice of the batch a
single process sees, DistributedDataParallel averages the gradients, rank 0 alone writes.

To compare losses to float precision the objective must use no randomness, so the test
registers the engine tests' deterministic MLM through the same entry-point group a third-party
package uses: a ``.dist-info`` folder on ``PYTHONPATH`` that ``importlib.metadata`` finds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest
import torch
from ablate_cli import ablate
from safetensors.torch import load_file
from torchrun_helpers import (
    assert_rank_zero_alone_finished,
    micro_spec,
    needs_torchrun,
    objective_plugin,
    torchrun_ablate_run,
    with_pythonpath,
)

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
pytestmark = pytest.mark.slow


@needs_torchrun
def test_torchrun_with_two_gloo_ranks_matches_one_process(tmp_path, smoke_env, monkeypatch):
    spec = micro_spec(
        tmp_path,
        "ddp",
        backbone={"preset": "micro", "overrides": {"dropout": 0.0, "attention_dropout": 0.0}},
        budget={"steps": 6, "checkpoints": [0.5, 1.0]},
        pretrain={
            "batch_size": 8,
            "learning_rate": 1e-3,
            "warmup_fraction": 0.2,
            "log_every": 1,
            "eval_batches": 2,
            "resume_every": 0,
        },
        objectives=[{"name": "deterministic_mlm"}],
    )
    # engine_helpers.DeterministicMLM: a fixed-mask MLM with no randomness at all
    plugin = objective_plugin(tmp_path, "deterministic_mlm", "engine_helpers:DeterministicMLM")
    env = {**with_pythonpath(smoke_env, plugin, TESTS), "OMP_NUM_THREADS": "1"}
    monkeypatch.syspath_prepend(str(plugin))  # PYTHONPATH's part for the in-process run
    single = ablate("run", spec, "--out", tmp_path / "single", env=env)
    assert single.returncode == 0, single.stderr
    # --no-reuse: the single run beside it has the same id, and a copy of it proves nothing
    ddp = torchrun_ablate_run(spec, tmp_path / "ddp", env, tmp_path, "--no-reuse")
    assert_rank_zero_alone_finished(ddp)
    done = json.loads(next((tmp_path / "ddp" / "pretrain").glob("*/done.json")).read_text())
    assert done["message"] == "", done  # trained by the two ranks, not reused

    metrics = {
        name: pl.read_parquet(tmp_path / name / "pretrain_metrics.parquet").sort("split", "step")
        for name in ("single", "ddp")
    }
    a, b = metrics["single"], metrics["ddp"]
    assert a.select("split", "step").equals(b.select("split", "step"))
    train = pl.col("split") == "train"
    for column, rows in [("loss", True), ("mlm_loss", True), ("grad_norm", train), ("lr", train)]:
        torch.testing.assert_close(
            torch.tensor(b.filter(rows)[column].to_list()),
            torch.tensor(a.filter(rows)[column].to_list()),
            rtol=1e-4,
            atol=1e-5,
            msg=column,
        )
    assert set(a["split"]) == {"train", "heldout"}
    kept = {
        name: load_file(
            str(next((tmp_path / name / "pretrain").glob("*/kept/1")) / "kept.safetensors")
        )
        for name in ("single", "ddp")
    }
    for key, value in kept["single"].items():
        torch.testing.assert_close(kept["ddp"][key], value, rtol=1e-4, atol=1e-5, msg=key)
    runs = pl.read_parquet(tmp_path / "ddp" / "runs.parquet")
    assert runs["status"].to_list() == ["done"]


def test_gloo_ranks_are_wrapped_in_distributed_data_parallel():
    from electra_ablate.pretraining.engine.distributed import Distributed

    model = torch.nn.Linear(2, 2)
    assert Distributed().wrap(model, torch.device("cpu")) is model  # one process: unwrapped
    assert sys.modules.get("torch.nn.parallel") is not None
