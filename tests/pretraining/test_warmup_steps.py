"""``pretrain.warmup_steps``: the paper's absolute warm-up (10,000 steps), whatever the budget.

A short run never finishes it, so its rate never reaches the peak (the paper's first steps);
unset, the warm-up is ``warmup_fraction`` of each stage as before, and run ids do not change."""

from __future__ import annotations

import pytest

from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.optim import learning_rate, warmup_steps
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.report.header import deviations


def plan(steps: int) -> RunPlan:
    return RunPlan((steps,), ({"paper": 1.0, "standard": 1.0},), ())


def test_absolute_warm_up_replaces_the_fraction_whatever_the_steps():
    spec = PretrainSpec(learning_rate=5e-4, warmup_fraction=0.01, warmup_steps=10_000)
    assert warmup_steps(spec, 7_737) == 10_000
    assert warmup_steps(PretrainSpec(warmup_fraction=0.01), 7_737) == 77


def test_a_run_shorter_than_the_warm_up_climbs_all_the_way_and_never_decays():
    spec = PretrainSpec(learning_rate=5e-4, warmup_steps=10_000)
    rates = [learning_rate(plan(7_737), step, spec) for step in range(7_737)]
    assert rates[0] == pytest.approx(5e-4 / 10_000)
    assert rates[-1] == pytest.approx(5e-4 * 7_737 / 10_000)
    assert all(b > a for a, b in zip(rates, rates[1:], strict=False))


def test_a_run_longer_than_the_warm_up_peaks_there_then_decays_to_zero():
    spec = PretrainSpec(learning_rate=5e-4, warmup_steps=100)
    assert learning_rate(plan(1_000), 99, spec) == pytest.approx(5e-4)
    assert learning_rate(plan(1_000), 550, spec) == pytest.approx(5e-4 * 450 / 900)
    assert learning_rate(plan(1_000), 999, spec) == pytest.approx(5e-4 / 900)


def test_unset_it_stays_out_of_the_identity_and_set_it_enters():
    unset = PretrainSpec().model_dump(exclude_none=True)
    assert "warmup_steps" not in unset
    assert PretrainSpec(warmup_steps=10_000).model_dump(exclude_none=True)["warmup_steps"] == 10_000


def test_every_report_names_the_warm_up_it_used_against_the_paper():
    def warm_up(pretrain: dict) -> list[str]:
        return [d for d in deviations({"pretrain": pretrain}) if "warm-up" in d]

    paper = (
        "(the paper: warm-up 10,000 steps, linear decay from step 0 to zero at step 1,000,000, "
        "each run its first steps)"
    )
    assert warm_up({"warmup_fraction": 0.01}) == [
        "learning-rate schedule, budget shape: warm-up 1% of each run, linear decay to zero at "
        f"the budget's end {paper}"
    ]
    assert warm_up({"warmup_steps": 2_000}) == [
        "learning-rate schedule, per-run warm-up: warm-up 2,000 steps, linear decay to zero at "
        f"each run's end {paper}"
    ]
    # the paper's warm-up alone decays at each run's end, not over the paper's horizon
    assert warm_up({"warmup_steps": 10_000})[0].startswith(
        "learning-rate schedule, per-run warm-up: warm-up 10,000 steps"
    )
    assert warm_up({"warmup_steps": 10_000, "decay_horizon_steps": 1_000_000}) == []
