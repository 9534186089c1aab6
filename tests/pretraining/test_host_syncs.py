"""A training step that is not a logging step never makes the host wait for the device.

Counted on the CPU with ``host_syncs.HostSyncCounter`` (see there what counts as a sync). Before
this was enforced an ELECTRA step made 34: an ``.item()`` per metric, the NaN check, the
gradient norm, the encoder asking whether the batch had padding, special-id tensors copied from
the host, and ROC-AUC's boolean indexing and ``unique``.
"""

from __future__ import annotations

import math

import pytest
import torch
from engine_helpers import make_trainer
from host_syncs import HostSyncCounter
from objective_names import BUILT_IN

from electra_ablate.pretraining.engine.trainer import MetricMeans

# every stage of every objective: two-stage's frozen-generator stage and adversarial's MLE
# warm-up run other code than their first stage
CASES = [(name, {}, 0) for name in BUILT_IN] + [
    ("two_stage", {}, 1),
    ("adversarial", {"mle_warmup": 0.3}, 0),
    ("adversarial", {"baseline": False}, 0),
    ("electra", {"generator": "unigram"}, 0),
]


def count_step_syncs(tmp_path, name: str, params: dict, stage: int) -> list[str]:
    trainer = make_trainer(tmp_path, name, params=params, steps_of_budget=20)
    trainer.start_or_resume()
    trainer.step = trainer.plan.stage_start(stage)
    trainer.enter_stage(stage)
    trainer.advance()  # the first step of a stage creates the optimizer's state
    assert trainer.step % trainer.spec.log_every != 0, "the counted step must not log"
    host_batch = trainer.batch(trainer.step)  # built on the host before the step, as always
    trainer.batch = lambda step: host_batch
    # torch keeps a non-fused AdamW's step counters on the host, on a GPU too: no device sync
    exempt = [s["step"] for s in trainer.optimizer.state.values() if "step" in s]
    with HostSyncCounter(exempt) as counter:
        trainer.advance()
    return counter.syncs


@pytest.mark.parametrize(("name", "params", "stage"), CASES)
def test_a_training_step_makes_no_host_sync(tmp_path, name, params, stage):
    syncs = count_step_syncs(tmp_path, name, params, stage)
    assert syncs == [], f"{len(syncs)} host syncs in a {name} step:\n" + "\n".join(syncs)


def test_the_counter_sees_every_kind_of_sync():
    x, tolist = torch.randn(6), torch.Tensor.tolist
    with HostSyncCounter() as counter:
        x.sum().item()
        bool(x.all())
        float(x.max())
        x.tolist()
        x[x > 0]
        torch.unique(x)
        x.nonzero()
        torch.tensor([1, 2])
        x.sum()  # not a sync
    assert len(counter.syncs) == 8, counter.syncs
    assert torch.Tensor.tolist is tolist  # the patch is undone


def test_metric_means_sum_on_the_device_and_read_once(tmp_path):
    """Device sums give what summing ``.item()`` values in Python gave, per metric's own steps."""
    means, values = MetricMeans(), [(1.5, 0.25), (2.25, None), (3.0, 0.75)]
    for loss, auc in values:
        step = {"loss": torch.tensor(loss), "lr": 0.1}
        if auc is not None:
            step["disc_auc"] = torch.tensor(auc)
        means.add(step)
    with HostSyncCounter() as counter:
        popped = means.pop()
    assert len(counter.syncs) == 2  # one read per key set, not one per metric and step
    assert popped == {"loss": 2.25, "disc_auc": 0.5, "lr": pytest.approx(0.1)}


def test_a_nan_step_is_named_at_the_next_row_and_nothing_after_it_is_saved(tmp_path):
    """The finiteness check is deferred to the next write; the step and term are still named,
    and no state, row or kept encoder holds what followed the bad step."""
    trainer = make_trainer(tmp_path, steps_of_budget=20)
    trainer.spec = trainer.spec.model_copy(update={"log_every": 5, "resume_every": 0})
    bad_step = 6  # between two rows
    forward = trainer.objective.forward

    def poisoned(batch):
        out = forward(batch)
        if trainer.step == bad_step:
            out.metrics["gen_mlm_loss"] = out.metrics["gen_mlm_loss"] * math.nan
            out.loss = out.loss * math.nan
        return out

    trainer.objective.forward = poisoned
    with pytest.raises(Exception, match=rf"step {bad_step} \(stage main\): gen_mlm_loss=nan"):
        trainer.train()
    rows = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 1 and '"step": 5' in rows[0]
    assert not list((tmp_path / "states").glob("step-*")) or all(
        int(p.name.split("-")[1]) <= bad_step for p in (tmp_path / "states").glob("step-*")
    )
