"""``torchrun --standalone --nproc_per_node 2 $(which ablate) run SPEC`` on CPU (gloo) trains
exactly like one process with the same global batch: each rank takes its slice of the batch a
single process sees, DistributedDataParallel averages the gradients, rank 0 alone writes.

To compare losses to float precision the objective must use no randomness, so the test
registers the engine tests' deterministic MLM through the same entry-point group a third-party
package uses: a ``.dist-info`` folder on ``PYTHONPATH`` that ``importlib.metadata`` finds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch
import yaml
from safetensors.torch import load_file

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
pytestmark = pytest.mark.slow


@pytest.fixture
def plugin_path(tmp_path) -> Path:
    """A folder whose ``.dist-info`` registers ``engine_helpers.DeterministicMLM`` (a fixed-mask
    MLM with no randomness at all) in the objectives entry-point group."""
    info = tmp_path / "site" / "deterministic_objective_test-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: deterministic-objective-test\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[electra_ablate.objectives]\ndeterministic_mlm = engine_helpers:DeterministicMLM\n"
    )
    return info.parent


def spec_file(tmp_path: Path, shared: Path) -> Path:
    spec = {
        "name": "ddp",
        "data": {
            "corpus": {"paths": [f"{shared}/corpus/gutenberg/*.txt.gz"], "max_documents": 400},
            "tokenizer": {"vocab_size": 2048},
            "glue": f"{shared}/glue",
        },
        "backbone": {"preset": "micro", "overrides": {"dropout": 0.0, "attention_dropout": 0.0}},
        "budget": {"steps": 6, "checkpoints": [0.5, 1.0]},
        "pretrain": {
            "batch_size": 8,
            "learning_rate": 1e-3,
            "warmup_fraction": 0.2,
            "log_every": 1,
            "eval_batches": 2,
            "resume_every": 0,
        },
        "objectives": [{"name": "deterministic_mlm"}],
        "device": "cpu",
    }
    path = tmp_path / "ddp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_torchrun_with_two_gloo_ranks_matches_one_process(tmp_path, plugin_path, shared_data_dir):
    torchrun = shutil.which("torchrun")
    ablate = shutil.which("ablate")
    if torchrun is None or ablate is None:
        pytest.skip("torchrun or the ablate console script is not installed")
    spec = spec_file(tmp_path, shared_data_dir)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(plugin_path), str(TESTS), os.environ.get("PYTHONPATH")])
        ),
        "ABLATE_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    single = subprocess.run(
        [ablate, "run", str(spec), "--out", str(tmp_path / "single")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert single.returncode == 0, single.stderr
    ddp = subprocess.run(
        [
            torchrun,
            "--standalone",
            "--nproc_per_node",
            "2",
            ablate,
            "run",
            str(spec),
            "--out",
            str(tmp_path / "ddp"),
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert ddp.stdout.count("results in") == 1, "rank 0 alone reports and writes"

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
