"""Pieces of the GPU path checked on a CPU: the deterministic mode a GPU resume needs to end
with the weights of an unbroken run, the engine tests' objective on any device, and the
fine-tuning bench's ``--device``."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import pytest
import torch
from engine_helpers import CFG, UNIFORM, DeterministicMLM, SyntheticBatches, make_trainer
from torch.overrides import TorchFunctionMode

from electra_ablate.infra.identity import IDENTITY_EXCLUDED
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.objective import ObjectiveParams

ROOT = Path(__file__).resolve().parents[2]


def test_the_deterministic_mode_holds_while_a_run_trains_and_only_then(tmp_path, monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    trainer = make_trainer(tmp_path, "bert_mlm", steps_of_budget=2, deterministic=True)
    seen = []
    step = trainer.train_step

    def watched(*args):
        seen.append(
            (torch.are_deterministic_algorithms_enabled(), os.environ["CUBLAS_WORKSPACE_CONFIG"])
        )
        return step(*args)

    trainer.train_step = watched
    assert not torch.are_deterministic_algorithms_enabled()
    trainer.train()
    assert seen and set(seen) == {(True, ":4096:8")}
    assert not torch.are_deterministic_algorithms_enabled(), "the caller's setting comes back"
    assert not PretrainSpec().deterministic, "off by default: it costs speed on a GPU"
    assert "deterministic" in IDENTITY_EXCLUDED, "how a run runs, not what it learns"


class MadeOn(TorchFunctionMode):
    """The devices of every tensor made inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.devices: set[torch.device] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self.devices.add(out.device)
        return out


def test_the_engine_tests_objective_builds_its_tensors_on_the_batchs_device():
    """On ``meta`` a tensor left on the CPU goes unnoticed (meta kernels check no devices), so
    the test looks at where each tensor of the forward is made."""
    torch.manual_seed(0)
    objective = DeterministicMLM(CFG, ObjectiveParams(), UNIFORM).to("meta")
    batch = {k: v.to("meta") for k, v in SyntheticBatches(2).batch(0).items()}
    with MadeOn() as made:
        objective(batch)
    assert made.devices == {torch.device("meta")}


def test_the_finetune_bench_takes_a_device_and_refuses_a_missing_gpu(monkeypatch, capsys):
    """The bench's script run as ``__main__`` in this process: its refusal is argparse's, exit 2
    and the reason on stderr."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    script = ROOT / "bench" / "finetune_throughput.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--device", "cuda"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(script), run_name="__main__")
    assert exited.value.code == 2
    assert "--device cuda: CUDA is not available" in capsys.readouterr().err
