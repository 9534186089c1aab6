"""Optional TensorBoard logging: every pre-training metric of a run, and its fine-tuning
results, in ``<run>/tensorboard`` so curves can be compared live (``pretrain.tensorboard`` or
``ablate run --tensorboard``; the ``tensorboard`` extra)."""

from __future__ import annotations

import sys

import pytest
from engine_helpers import make_trainer

from electra_ablate.infra.errors import InputError
from electra_ablate.pretraining.engine.metrics_log import tensorboard_writer
from electra_ablate.study.execute import log_finetune_scalars


def scalars(directory) -> dict[str, list[tuple[int, float]]]:
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    ).EventAccumulator(str(directory))
    accumulator.Reload()
    return {
        tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


def test_a_run_logs_every_metric_to_tensorboard_as_it_trains(tmp_path):
    pytest.importorskip("tensorboard")
    trainer = make_trainer(tmp_path, tensorboard=True)
    trainer.train()
    logged = scalars(tmp_path / "tensorboard")
    assert {"train/loss", "train/disc_auc", "train/gen_mlm_acc", "heldout/loss"} <= set(logged)
    steps = [step for step, _ in logged["train/loss"]]
    assert steps == sorted(steps) and steps[-1] == trainer.plan.total_steps


def test_fine_tuning_results_go_beside_the_curves_at_their_checkpoint_step(tmp_path):
    pytest.importorskip("tensorboard")
    record = {
        "task": "rte",
        "seed": 1,
        "step": 300,
        "metrics": {"accuracy": 55.0, "wall_seconds": 3.0},
    }
    log_finetune_scalars(tmp_path, record)
    assert scalars(tmp_path) == {"glue/rte/accuracy/seed1": [(300, 55.0)]}


def test_without_the_package_the_error_says_which_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(InputError, match=r"electra-ablate\[tensorboard\]"):
        tensorboard_writer(tmp_path)
