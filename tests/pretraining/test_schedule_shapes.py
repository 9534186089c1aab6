"""One schedule shape per budget (issue 72, must hold 1): the budget shape (warm-up a share of
each run, linear decay to zero at the budget's end: the primary), the paper's (one 1,000,000-step
decay from step 0 times a 10,000-step warm-up: a run is the first steps of one long schedule),
and ``warmup_steps`` alone (per run: objectives of different step counts get different shapes,
which the dry run says). The original code's Adam without bias correction is an option, and a
resumed run follows the same schedule and optimiser exactly."""

from __future__ import annotations

import pytest
import torch
from engine_helpers import Crash, assert_same_run, make_trainer

from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.optim import (
    OriginalAdamW,
    learning_rate,
    per_run_shapes,
    schedule_reach,
    warmup_beyond_run,
)
from electra_ablate.pretraining.engine.plan import RunPlan

PAPER = {"decay_horizon_steps": 1_000_000, "warmup_steps": 10_000}
# ELECTRA-Small and BERT-Small at 1e16 FLOPs on the GPU (issue 72): one budget, two step counts
ELECTRA_STEPS, BERT_STEPS = 7_737, 10_235


def plan(*stage_steps: int) -> RunPlan:
    return RunPlan(stage_steps, tuple({"paper": 1.0, "standard": 1.0} for _ in stage_steps), ())


def test_the_paper_shape_is_the_original_codes_rate_at_chosen_steps():
    spec = PretrainSpec(learning_rate=5e-4, **PAPER)
    # lr (1 - t/H) min(1, t/W): model/optimization.py's polynomial decay times the ramp
    for step, expected in [
        (0, 0.0),
        (1, 5e-4 * (1 - 1 / 1e6) * 1 / 1e4),
        (5_000, 5e-4 * (1 - 5_000 / 1e6) * 0.5),
        (10_000, 5e-4 * (1 - 10_000 / 1e6)),
        (500_000, 5e-4 * 0.5),
        (1_000_000, 0.0),
    ]:
        assert learning_rate(plan(2_000_000), step, spec) == pytest.approx(expected, abs=1e-15)


def test_under_the_paper_shape_every_run_is_a_prefix_of_one_schedule_whatever_its_stages():
    spec = PretrainSpec(**PAPER)
    long, short, staged = plan(62_500), plan(ELECTRA_STEPS), plan(3_000, ELECTRA_STEPS - 3_000)
    for step in (0, 1, 2_999, 3_000, 3_001, 7_000, ELECTRA_STEPS - 1):
        rate = learning_rate(long, step, spec)
        assert learning_rate(short, step, spec) == rate == learning_rate(staged, step, spec)
    # a warm-up longer than the run is what the horizon asks for: no refusal, no note
    assert warmup_beyond_run(short, spec) == []
    reach = schedule_reach(short, spec)
    assert reach.peak == reach.final == learning_rate(short, ELECTRA_STEPS - 1, spec)


def test_the_paper_shape_warms_up_over_a_share_of_its_horizon_without_warmup_steps():
    spec = PretrainSpec(decay_horizon_steps=1_000_000)  # warmup_fraction 0.01 of 1,000,000
    assert learning_rate(plan(20_000), 10_000, spec) == pytest.approx(5e-4 * (1 - 0.01))
    assert learning_rate(plan(20_000), 5_000, spec) == pytest.approx(5e-4 * (1 - 0.005) * 0.5)


def test_under_the_budget_shape_both_objectives_of_one_budget_warm_up_peak_and_anneal_alike():
    spec = PretrainSpec(learning_rate=5e-4, warmup_fraction=0.1)
    for steps in (ELECTRA_STEPS, BERT_STEPS):
        run = plan(steps)
        warmup = round(0.1 * steps)
        assert learning_rate(run, warmup - 1, spec) == pytest.approx(5e-4)
        assert learning_rate(run, steps - 1, spec) == pytest.approx(5e-4 / (steps - warmup))
        reach = schedule_reach(run, spec)
        assert reach.peak == pytest.approx(5e-4) and reach.final < 1e-7
    assert spec.schedule_shape == "budget"
    assert (
        per_run_shapes([("electra", plan(ELECTRA_STEPS)), ("bert", plan(BERT_STEPS))], spec) is None
    )


def test_an_absolute_warm_up_alone_is_named_as_different_shapes_per_objective():
    spec = PretrainSpec(learning_rate=5e-4, warmup_steps=10_000)
    line = per_run_shapes([("electra", plan(ELECTRA_STEPS)), ("bert", plan(BERT_STEPS))], spec)
    # ELECTRA stops mid-ramp at 3.87e-4, BERT anneals from 5e-4 to ~0 in its last 235 steps
    assert line is not None and line.count("\n") == 0
    assert "`electra` 7,737 steps, peak 3.87e-04, final 3.87e-04" in line
    assert "`bert` 10,235 steps, peak 5.00e-04, final 2.13e-06" in line
    assert spec.schedule_shape == "per-run"


def test_the_paper_horizon_is_a_linear_decay_only():
    with pytest.raises(ValueError, match="schedule: linear"):
        PretrainSpec(decay_horizon_steps=1_000_000, schedule="cosine")


def test_unset_new_fields_stay_out_of_the_identity_and_true_names_the_same_runs():
    for spec in (PretrainSpec(), PretrainSpec(adam_bias_correction=True)):
        dumped = spec.model_dump(exclude_none=True)
        assert "decay_horizon_steps" not in dumped and "adam_bias_correction" not in dumped
    dumped = PretrainSpec(adam_bias_correction=False, **PAPER).model_dump(exclude_none=True)
    assert dumped["adam_bias_correction"] is False and dumped["decay_horizon_steps"] == 1_000_000


def test_the_original_adam_matches_a_hand_computation_over_three_steps():
    b1, b2, eps, lr, wd = 0.9, 0.999, 1e-6, 0.1, 0.01
    weight = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    bias = torch.tensor([0.25, -0.5])
    p, q = weight.clone().requires_grad_(), bias.clone().requires_grad_()
    optimizer = OriginalAdamW(
        [{"params": [p], "weight_decay": wd}, {"params": [q], "weight_decay": 0.0}],
        lr=lr,
        betas=(b1, b2),
        eps=eps,
    )
    gen = torch.Generator().manual_seed(0)
    grads = [(torch.randn(2, 2, generator=gen), torch.randn(2, generator=gen)) for _ in range(3)]
    w, b = weight.double(), bias.double()
    mw = vw = torch.zeros_like(w)
    mb = vb = torch.zeros_like(b)
    for gw, gb in grads:
        p.grad, q.grad = gw.clone(), gb.clone()
        optimizer.step()
        gw, gb = gw.double(), gb.double()
        mw, vw = b1 * mw + (1 - b1) * gw, b2 * vw + (1 - b2) * gw**2
        mb, vb = b1 * mb + (1 - b1) * gb, b2 * vb + (1 - b2) * gb**2
        w = w - lr * (mw / (vw.sqrt() + eps) + wd * w)  # no bias correction; decay in the update
        b = b - lr * (mb / (vb.sqrt() + eps))  # no decay on biases
        torch.testing.assert_close(p.detach().double(), w, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(q.detach().double(), b, rtol=1e-6, atol=1e-6)
    # the first step is (1 - b1) / sqrt(1 - b2) = 3.16x larger than bias-corrected Adam's ~lr
    first = OriginalAdamW([torch.zeros(1, requires_grad=True)], lr=1.0, eps=0.0)
    first.param_groups[0]["params"][0].grad = torch.ones(1)
    first.step()
    assert first.param_groups[0]["params"][0].item() == pytest.approx(-0.1 / 0.001**0.5)


def test_the_option_trains_with_the_original_adam_and_resumes_exactly(tmp_path):
    options = {"adam_bias_correction": False, "decay_horizon_steps": 40, "warmup_steps": 5}
    unbroken = make_trainer(tmp_path / "a", "bert_mlm", steps_of_budget=8, **options)
    unbroken.train()
    assert isinstance(unbroken.optimizer, OriginalAdamW)
    crashing = make_trainer(tmp_path / "b", "bert_mlm", steps_of_budget=8, **options)
    real_batch = crashing.run.train_batches.batch

    def crash_at_5(step: int):
        if step == 5:
            raise Crash
        return real_batch(step)

    crashing.run.train_batches.batch = crash_at_5
    with pytest.raises(Crash):
        crashing.train()
    make_trainer(tmp_path / "b", "bert_mlm", steps_of_budget=8, **options).train()
    assert_same_run(tmp_path / "a", tmp_path / "b")
