"""Two gloo processes (ranks as torchrun would make them, forked from the test's process)
train exactly like one process with the same global batch: the data is sharded by rank and
gradients are averaged across ranks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).parent.parent))
from engine_helpers import become_rank, deterministic_trainer  # noqa: E402

from electra_ablate.pretraining.engine import Distributed  # noqa: E402


def worker(rank: int, world_size: int, store: str, run_dir: str) -> None:
    become_rank(rank, world_size, store)
    try:
        deterministic_trainer(
            Path(run_dir), global_batch=8, rank=rank, world_size=world_size
        ).train()
    finally:
        Distributed.from_env(torch.device("cpu")).close()


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    state = sorted((run_dir / "states").glob("step-*"))[-1]
    return load_file(str(state / "model.safetensors"))


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process_with_the_same_global_batch(tmp_path):
    deterministic_trainer(tmp_path / "single", global_batch=8, rank=0, world_size=1).train()
    store = str(tmp_path / "store")
    # forked, not spawned: a fresh interpreter's imports (~2 CPU-s a rank) add nothing here
    args = (2, store, str(tmp_path / "ddp"))
    mp.start_processes(worker, args=args, nprocs=2, join=True, start_method="fork")
    single, ddp = final_weights(tmp_path / "single"), final_weights(tmp_path / "ddp")
    assert single.keys() == ddp.keys()
    for name in single:
        torch.testing.assert_close(ddp[name], single[name], rtol=1e-4, atol=1e-5, msg=name)
    initial = deterministic_trainer(tmp_path / "init", 8, 0, 1).objective.state_dict()
    changed = sum(not torch.equal(initial[k], single[k]) for k in single if k in initial)
    assert changed > 0, "training did not move the weights"
