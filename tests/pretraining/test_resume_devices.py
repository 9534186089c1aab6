"""A resume on another allocation: fewer or more visible GPUs, or another number of ranks.

A state used to hold one CUDA random state per visible GPU and one entry per rank; restoring it
with fewer GPUs or as a rank it had no entry for raised ``IndexError``, which read as an
unreadable state: every state was skipped and the run silently restarted from step 0. Now what
fits is restored and the run continues from its step. The CUDA random-state functions are
simulated (no GPU here): a fake ``set_rng_state_all`` fails as the real one does on a device that
does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_helpers import make_trainer
from safetensors.torch import load_file

from electra_ablate.infra.manifest import write_manifest
from electra_ablate.pretraining.engine import Distributed, Trainer


class Crash(Exception):
    pass


class FakeGPUs:
    """``count`` visible GPUs as far as the random-state functions go."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
        self.count, self.restored = count, None
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.count)
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", self.get_all)
        monkeypatch.setattr(torch.cuda, "set_rng_state_all", self.set_all)

    def get_all(self) -> list[torch.Tensor]:
        return [torch.full((16,), device, dtype=torch.uint8) for device in range(self.count)]

    def set_all(self, states: list[torch.Tensor]) -> None:
        if len(states) > self.count:
            raise IndexError("list index out of range")  # no generator for that device
        self.restored = states


class FakeRanks(Distributed):
    """Rank ``rank`` of ``world_size`` with no process group: enough to resume a state."""

    def wrap(self, module, device):
        return module

    def barrier(self) -> None:
        pass


def crashed_run(run_dir: Path, at: int = 8) -> Trainer:
    """A run killed at step ``at`` (its states at steps 3 and 6 are on disk)."""
    trainer = make_trainer(run_dir)
    real_batch = trainer.run.train_batches.batch
    trainer.run.train_batches.batch = lambda s: (
        (_ for _ in ()).throw(Crash) if s == at else real_batch(s)
    )
    with pytest.raises(Crash):
        trainer.train()
    return trainer


def test_a_resume_with_fewer_gpus_continues_from_its_step(tmp_path, monkeypatch, capsys):
    gpus = FakeGPUs(monkeypatch, count=2)
    crashed_run(tmp_path / "b")
    gpus.count = 1  # the job is requeued on a smaller allocation
    resumed = make_trainer(tmp_path / "b")
    real_batch, steps = resumed.run.train_batches.batch, []
    resumed.run.train_batches.batch = lambda s: steps.append(s) or real_batch(s)
    resumed.train()
    assert "skipping checkpoint" not in capsys.readouterr().err
    assert min(steps) == 6, "the run continues from its newest state, not from step 0"
    assert [t.tolist() for t in gpus.restored] == [[0] * 16], "GPU 0's saved state"
    make_trainer(tmp_path / "a").train()
    done_a = sorted((tmp_path / "a" / "states").glob("step-*"))[-1]
    done_b = sorted((tmp_path / "b" / "states").glob("step-*"))[-1]
    assert done_a.name == done_b.name, "the newest state is kept, not pruned"
    wa, wb = (load_file(str(d / "model.safetensors")) for d in (done_a, done_b))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_resume_with_more_gpus_restores_those_it_saved(tmp_path, monkeypatch):
    gpus = FakeGPUs(monkeypatch, count=1)
    crashed_run(tmp_path)
    gpus.count = 4
    resumed = make_trainer(tmp_path)
    resumed.start_or_resume()
    assert resumed.step == 6
    assert [t.tolist() for t in gpus.restored] == [[0] * 16]


def resumed_as(run_dir: Path, rank: int, world_size: int) -> Trainer:
    template = make_trainer(run_dir)
    trainer = Trainer(
        template.objective, template.run, torch.device("cpu"), FakeRanks(rank, world_size)
    )
    trainer.start_or_resume()
    return trainer


def test_a_resume_on_more_ranks_continues_and_reseeds_the_new_rank(tmp_path, capsys):
    crashed_run(tmp_path)
    saved = torch.load(sorted((tmp_path / "states").glob("step-*"))[-1] / "rng.pt")
    capsys.readouterr()

    rank0 = resumed_as(tmp_path, rank=0, world_size=2)
    assert rank0.step == 6
    assert torch.equal(torch.get_rng_state(), saved[0]["cpu"]), "rank 0's own state"
    err = capsys.readouterr().err
    assert "skipping checkpoint" not in err
    assert err.count("warning:") == 1 and "saved by 1 rank(s) and resumes on 2" in err

    rank1 = resumed_as(tmp_path, rank=1, world_size=2)
    assert rank1.step == 6, "a rank with no saved random state still resumes"
    draws = torch.rand(4)
    torch.manual_seed(rank1.rank_seed())
    assert torch.equal(draws, torch.rand(4)), "re-seeded deterministically"
    assert "warning:" not in capsys.readouterr().err, "rank 0 alone says it"


def test_a_resume_on_fewer_ranks_restores_each_ranks_own_state(tmp_path, capsys):
    crashed_run(tmp_path)
    state = sorted((tmp_path / "states").glob("step-*"))[-1]
    saved = torch.load(state / "rng.pt")
    other = {"cpu": torch.manual_seed(7).get_state()}
    torch.save([saved[0], other], state / "rng.pt")  # as if two ranks had saved it
    write_manifest(state)
    trainer = make_trainer(tmp_path)
    trainer.start_or_resume()
    assert trainer.step == 6
    assert torch.equal(torch.get_rng_state(), saved[0]["cpu"])
    assert "saved by 2 rank(s) and resumes on 1" in capsys.readouterr().err
