"""A compiled step on a machine met for the first time (a lent GPU node): a compiler that fails
must cost the run its speed, never its result, and nothing the step returns may be kept across
steps by reference, since CUDA graphs (``pretrain.compile: reduce-overhead``) write every replay's
outputs into the same memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from engine_helpers import CFG, make_trainer

from electra_ablate.pretraining.engine import trainer as trainer_module

ONE_LAYER = CFG.with_overrides(num_layers=1)


@pytest.fixture
def broken_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.compile`` as a machine without a working toolchain gives it: the compiled
    forward raises at its first call."""

    def broken(module: torch.nn.Module, mode: Any = True):
        def forward(batch: dict) -> Any:
            raise RuntimeError("compiler broke: no C++ compiler found\nmore lines")

        return forward

    monkeypatch.setattr(trainer_module, "compiled", broken)


def test_a_compiler_that_fails_leaves_the_run_eager_with_one_warning(tmp_path, broken_compiler):
    trainer = make_trainer(tmp_path, "electra", backbone=ONE_LAYER, compile=True, steps_of_budget=4)
    with pytest.warns(UserWarning, match="torch.compile failed") as caught:
        summary = trainer.train()
    assert len([w for w in caught if "torch.compile failed" in str(w.message)]) == 1
    assert summary["steps"] == trainer.plan.total_steps
    assert summary["compiled"] is False
    assert summary["compile_error"] == "RuntimeError: compiler broke: no C++ compiler found"
    rows = [json.loads(r) for r in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows and all(torch.isfinite(torch.tensor(r["loss"])) for r in rows)


def test_an_error_eager_raises_too_is_the_models_and_propagates(tmp_path, broken_compiler):
    trainer = make_trainer(tmp_path, "electra", backbone=ONE_LAYER, compile=True, steps_of_budget=4)
    trainer.start_or_resume()

    def model_error(batch: dict) -> Any:
        raise ValueError("a shape the model cannot take")

    trainer.model = model_error  # what eager would raise as well
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="shape the model"):
        trainer.advance()


class Overwriting:
    """A stand-in for a step replayed from a CUDA graph: each call writes its loss into the
    memory of the loss the previous call returned, as a replay writes into its static outputs."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model, self.last, self.losses = model, None, []

    def __call__(self, batch: dict) -> Any:
        out = self.model(batch)
        if self.last is not None:
            with torch.no_grad():
                self.last.copy_(out.loss.detach())
        self.last = out.loss.detach()
        self.losses.append(out.loss.item())
        return out


def test_the_first_loss_of_a_stage_survives_later_steps_writing_over_their_outputs(tmp_path):
    trainer = make_trainer(tmp_path, "bert_mlm", backbone=ONE_LAYER, steps_of_budget=6)
    trainer.start_or_resume()
    trainer.forward = stand_in = Overwriting(trainer.model)
    for _ in range(4):
        trainer.advance()
    assert len(set(stand_in.losses)) > 1  # the steps' losses differ: an overwrite would show
    assert trainer.fetch_start_losses()["0"] == pytest.approx(stand_in.losses[0])
