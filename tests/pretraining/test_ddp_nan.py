"""A NaN loss on one rank stops every rank at the same step with the same one-line error.

The rank that saw it used to stop alone while the others went into backward and waited in the
gradient all-reduce until the process group's timeout (30 minutes under gloo, 10 under nccl).
The group here is made with a 20-second timeout, so a rank left waiting fails the test quickly."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).parent.parent))
from engine_helpers import become_rank, deterministic_trainer  # noqa: E402

from electra_ablate.pretraining.engine import Distributed  # noqa: E402

NAN_STEP = 2


def train_poisoned(rank: int, run_dir: str) -> str:
    """Train with rank 1's loss made NaN at ``NAN_STEP``; what this rank stopped with."""
    trainer = deterministic_trainer(Path(run_dir), global_batch=8, rank=rank, world_size=2)
    forward = trainer.objective.forward

    def poisoned(batch):
        output = forward(batch)
        if rank == 1 and trainer.step == NAN_STEP:
            output.loss = output.loss * float("nan")
            output.metrics["mlm_loss"] = torch.tensor(float("nan"))
        return output

    trainer.objective.forward = poisoned
    try:
        trainer.train()
        return "finished"
    except Exception as exc:  # what each rank stopped with, for the test to compare
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"


def worker(rank: int, world_size: int, store: str, run_dir: str, out: str) -> None:
    become_rank(rank, world_size, store, timeout=timedelta(seconds=20))
    outcome = train_poisoned(rank, run_dir)  # its trainer, in a cycle, is collected by close()
    Path(out, f"rank{rank}.txt").write_text(outcome)
    Distributed.from_env(torch.device("cpu")).close()


@pytest.mark.slow
def test_a_nan_on_one_rank_stops_every_rank_with_the_same_line(tmp_path):
    store = str(tmp_path / "store")
    # forked, not spawned: a fresh interpreter's imports (~2 CPU-s a rank) add nothing here
    args = (2, store, str(tmp_path / "run"), str(tmp_path))
    mp.start_processes(worker, args=args, nprocs=2, join=True, start_method="fork")
    lines = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    expected = (
        f"TrainingDiverged: non-finite loss at step {NAN_STEP} (stage main): mlm_loss=nan "
        "(rank 1 of 2)"
    )
    assert lines == [expected, expected]
