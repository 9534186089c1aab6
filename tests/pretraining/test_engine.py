"""The pre-training engine: equal-FLOPs plans, schedule, exact resume, NaN guard, checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from engine_helpers import CFG, SEQ, UNIFORM, Crash, assert_same_run, make_trainer

from electra_ablate.checkpoints.kept import load_kept
from electra_ablate.infra.errors import DataError, TrainingDiverged
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine import learning_rate, make_optimizer, plan_run
from electra_ablate.pretraining.engine.trainer import DIVERGENCE_FACTOR, MetricMeans
from electra_ablate.pretraining.flops import stage_step_flops
from electra_ablate.pretraining.registry import build_objective


def per_step(objective, batch=8):
    return stage_step_flops(objective, SEQ, batch, "paper")


def test_every_objective_gets_the_same_budget():
    budget = 5e12
    spent = {}
    for name in ["bert_mlm", "electra", "all_tokens_mlm", "two_stage"]:
        objective = build_objective(name, CFG, {}, UNIFORM)
        plan = plan_run(objective, budget, "paper", 8, SEQ, [0.25, 0.5, 1.0])
        spent[name] = plan.flops_at(plan.total_steps)["paper"]
        largest_step = max(f["paper"] for f in plan.stage_flops)
        assert abs(spent[name] - budget) <= largest_step * len(plan.stage_steps)
    bert = build_objective("bert_mlm", CFG, {}, UNIFORM)
    electra = build_objective("electra", CFG, {}, UNIFORM)
    assert per_step(electra)[0][1] > per_step(bert)[0][1]  # so ELECTRA gets fewer steps


def test_two_stage_runs_equal_steps_per_stage_by_default_as_the_paper_did():
    objective = build_objective("two_stage", CFG, {}, UNIFORM)
    plan = plan_run(objective, 1e13, "paper", 8, SEQ, [0.5, 1.0])
    assert abs(plan.stage_steps[0] - plan.stage_steps[1]) <= 1
    spent = plan.flops_at(plan.total_steps)["paper"]
    assert spent == pytest.approx(1e13, rel=0.01)
    # stage 2 also runs the frozen generator forward, so its half of the steps costs more
    assert plan.stage_flops[1]["paper"] > plan.stage_flops[0]["paper"]
    half = min(
        range(plan.total_steps + 1), key=lambda s: abs(plan.flops_at(s)["paper"] - spent / 2)
    )
    assert dict(plan.checkpoints)[0.5] == half  # checkpoints still fall at FLOPs fractions
    assert dict(plan.checkpoints)[1.0] == plan.total_steps


def test_two_stage_can_split_flops_instead_and_checkpoints_follow_flops():
    objective = build_objective("two_stage", CFG, {"split_by": "flops"}, UNIFORM)
    plan = plan_run(objective, 1e13, "paper", 8, SEQ, [0.5, 1.0])
    stage_flops = [s * f["paper"] for s, f in zip(plan.stage_steps, plan.stage_flops, strict=True)]
    assert stage_flops[0] == pytest.approx(stage_flops[1], rel=0.01)
    assert plan.stage_steps[0] > plan.stage_steps[1]  # stage 2 also runs the frozen generator
    assert dict(plan.checkpoints)[0.5] == plan.stage_steps[0]
    assert dict(plan.checkpoints)[1.0] == plan.total_steps
    assert plan.stage_of(plan.stage_steps[0] - 1) == 0 and plan.stage_of(plan.stage_steps[0]) == 1


def test_a_metric_is_averaged_over_the_steps_that_reported_it():
    means = MetricMeans()
    means.add({"loss": 1.0, "disc_auc": 0.9})
    means.add({"loss": 3.0})
    assert means.pop() == {"loss": 2.0, "disc_auc": 0.9}
    assert means.pop() == {}


def test_no_training_row_averages_two_stages(tmp_path):
    """The row at two-stage's switch once mixed the generator's last steps with the first
    discriminator steps: MLM and lambda-weighted detection losses in one mean, and the detection
    AUC diluted towards 0 (logged as 0.03) by the steps that had none."""
    trainer = make_trainer(tmp_path, "two_stage", steps_of_budget=20)
    switch = trainer.plan.stage_steps[0]
    trainer.spec = trainer.spec.model_copy(update={"log_every": 4})
    assert switch % 4 != 0  # the switch falls inside a logging window
    trainer.train()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    assert {(r["step"], r["stage"]) for r in train} >= {(switch, 0), (4 * (switch // 4 + 1), 1)}
    for row in train:
        assert ("disc_auc" in row) == (row["stage"] == 1)
        assert (row["step"] <= switch) == (row["stage"] == 0)
    assert all(0.2 < r["disc_auc"] < 0.8 for r in train if r["stage"] == 1)


def test_learning_rate_warms_up_then_decays_to_zero_per_stage():
    objective = build_objective("bert_mlm", CFG, {}, UNIFORM)
    plan = plan_run(objective, 100 * per_step(objective)[0][1], "paper", 8, SEQ, [1.0])
    spec = PretrainSpec(learning_rate=1e-3, warmup_fraction=0.1)
    lrs = [learning_rate(plan, s, spec) for s in range(plan.total_steps)]
    assert plan.total_steps == 100
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert lrs[10] == pytest.approx(1e-3) and lrs[-1] == pytest.approx(1e-3 / 90)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:], strict=False))


def test_no_weight_decay_on_layernorm_and_biases():
    objective = build_objective("electra", CFG, {}, UNIFORM)
    optimizer = make_optimizer(objective, PretrainSpec())
    decay, no_decay = optimizer.param_groups
    names = {id(p): n for n, p in objective.named_parameters()}
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all("norm" in names[id(p)] or names[id(p)].endswith("bias") for p in no_decay["params"])
    assert all(p.ndim == 2 for p in decay["params"])
    assert optimizer.defaults["eps"] == 1e-6 and optimizer.defaults["betas"] == (0.9, 0.999)


@pytest.mark.parametrize("name", ["electra", "two_stage"])
def test_resume_after_a_crash_reproduces_the_uninterrupted_run(tmp_path, name):
    make_trainer(tmp_path / "a", name).train()
    crashing = make_trainer(tmp_path / "b", name)
    real_batch = crashing.run.train_batches.batch

    def crash_at_8(step):
        if step == 8:
            raise Crash
        return real_batch(step)

    crashing.run.train_batches.batch = crash_at_8
    with pytest.raises(Crash):
        crashing.train()
    assert sorted(p.name for p in (tmp_path / "b" / "states").glob("step-*"))  # something saved
    make_trainer(tmp_path / "b", name).train()
    assert_same_run(tmp_path / "a", tmp_path / "b")


def test_a_corrupt_newest_state_falls_back_to_the_previous_one(tmp_path, capsys):
    make_trainer(tmp_path / "a").train()
    crashing = make_trainer(tmp_path / "b")
    real_batch = crashing.run.train_batches.batch
    crashing.run.train_batches.batch = lambda s: (
        (_ for _ in ()).throw(Crash) if s == 10 else real_batch(s)
    )
    with pytest.raises(Crash):
        crashing.train()
    newest = sorted((tmp_path / "b" / "states").glob("step-*"))[-1]
    with (newest / "model.safetensors").open("r+b") as f:
        f.seek(200)
        f.write(b"\x00garbage\x00")
    make_trainer(tmp_path / "b").train()
    assert "fails its checksum" in capsys.readouterr().err
    assert_same_run(tmp_path / "a", tmp_path / "b")


def test_a_state_trained_on_another_vocabulary_is_refused_not_resumed(tmp_path):
    """Two builds of the data cache may number WordPiece tokens differently under one run id:
    resuming across them cannot end with the uninterrupted run's weights, so it stops."""
    run = tmp_path / "b"
    crashing = make_trainer(run)
    (run / "tok" / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n##s\n")
    real_batch = crashing.run.train_batches.batch
    crashing.run.train_batches.batch = lambda s: (
        (_ for _ in ()).throw(Crash) if s == 8 else real_batch(s)
    )
    with pytest.raises(Crash):
        crashing.train()
    states = sorted((run / "states").glob("step-*"))
    (run / "tok" / "vocab.txt").write_text("[PAD]\n[UNK]\n##s\nthe\n")  # ids swapped
    with pytest.raises(DataError, match="another tokenizer vocabulary"):
        make_trainer(run).train()
    assert sorted((run / "states").glob("step-*")) == states, "nothing is skipped or lost"
    (run / "tok" / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n##s\n")  # the same again
    make_trainer(run).train()
    make_trainer(tmp_path / "a").train()
    assert_same_run(tmp_path / "a", run)


def test_checkpoints_hold_the_kept_encoder_with_its_flops(tmp_path):
    trainer = make_trainer(tmp_path)
    trainer.train()
    half, full = load_kept(tmp_path / "kept" / "0.5"), load_kept(tmp_path / "kept" / "1")
    assert half.model.role == "discriminator"
    assert half.meta["flops_paper"] == pytest.approx(full.meta["flops_paper"] / 2, rel=0.1)
    assert full.meta["step"] == trainer.plan.total_steps
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert {"train", "heldout"} == {r["split"] for r in rows}
    assert all(k in rows[0] for k in ("disc_loss", "gen_mlm_acc", "disc_recall", "replaced_frac"))
    train = [r for r in rows if r["split"] == "train"]
    assert all(r["tokens_per_s"] > 0 for r in train), "throughput is logged with every row"


def test_nan_loss_stops_the_run_names_the_term_and_keeps_finished_checkpoints(tmp_path):
    trainer = make_trainer(tmp_path)
    objective = trainer.objective
    forward = objective.forward

    def poisoned(batch):
        out = forward(batch)
        if trainer.step == trainer.plan.total_steps - 1:
            out.metrics["disc_loss"] = torch.tensor(float("nan"))
            out.loss = out.loss * float("nan")
        return out

    objective.forward = poisoned
    with pytest.raises(TrainingDiverged, match=r"step \d+ \(stage main\): disc_loss=nan"):
        trainer.train()
    assert (tmp_path / "kept" / "0.5" / "kept.json").exists()
    assert not (tmp_path / "kept" / "1").exists()


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from engine_helpers import make_trainer
make_trainer(Path(sys.argv[1]), steps_of_budget=40).train()
"""


@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume_gives_identical_weights(tmp_path, one_thread):
    """The run killed is a process of its own (``SCRIPT``); the uninterrupted run it is compared
    with and the resume after the kill run in this process, on one thread as the killed process
    (``OMP_NUM_THREADS=1``): a process start costs more than their 40 micro steps."""
    tests_dir = str(Path(__file__).parent.parent)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(tests=tests_dir))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    make_trainer(tmp_path / "a", steps_of_budget=40).train()
    # process: SIGKILL ends a process, at whatever point it has reached
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "b")], env=env)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((tmp_path / "b" / "states").glob("step-*"))) < 2:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert list((tmp_path / "b" / "states").glob("step-*")), "the resume starts from a state"
    make_trainer(tmp_path / "b", steps_of_budget=40).train()
    assert_same_run(tmp_path / "a", tmp_path / "b")


def test_a_runaway_loss_is_flagged_as_diverged_and_a_healthy_one_is_not(tmp_path):
    healthy = make_trainer(tmp_path / "ok").train()
    assert healthy["diverged"] is False
    hot = make_trainer(tmp_path / "hot")
    hot.spec = hot.run.spec = hot.spec.model_copy(update={"learning_rate": 10.0})
    summary = hot.train()
    diverged = summary["diverged"]
    assert diverged and diverged["step"] > 0
    assert diverged["loss"] > DIVERGENCE_FACTOR * diverged["start_loss"]


def test_training_to_a_checkpoint_step_gives_that_checkpoints_kept_encoder(tmp_path):
    """What rebuilding a lost kept encoder by re-training relies on."""
    full = make_trainer(tmp_path / "full")
    full.train()
    half_step = min(full.plan.checkpoint_steps())
    partial = make_trainer(tmp_path / "partial")
    assert partial.train(stop_at=half_step)["steps"] == half_step
    for name in ("kept.safetensors", "kept.json"):
        ours = (tmp_path / "partial" / "kept" / "0.5" / name).read_bytes()
        assert ours == (tmp_path / "full" / "kept" / "0.5" / name).read_bytes(), name
    assert not (tmp_path / "partial" / "kept" / "1").exists()
