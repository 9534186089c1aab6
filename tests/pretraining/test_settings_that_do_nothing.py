"""Settings that would quietly do nothing, or something else than they say, are refused where
they are set or stated in one line (issue 68): a warm-up longer than the run, a budget no plan
can hold or one rounded far from what was asked, ``task_epochs`` overriding ``epochs``, and a
boolean where the spec wants a number."""

from __future__ import annotations

import pytest
from ablate_cli import SMOKE
from pydantic import ValidationError

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.infra.errors import SpecError
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.optim import learning_rate, warmup_beyond_run
from electra_ablate.pretraining.engine.plan import MAX_RUN_STEPS, RunPlan, budget_rounding, plan_run
from electra_ablate.pretraining.flops import training_flops
from electra_ablate.pretraining.registry import build_on_meta
from electra_ablate.spec import load_spec, read_yaml
from electra_ablate.spec.loading import parse_spec

MICRO = preset("micro")


def bert_on_meta():
    return build_on_meta("bert_mlm", MICRO, {}, Vocab.uniform(MICRO.vocab_size))


def one_stage(steps: int) -> RunPlan:
    return RunPlan((steps,), ({"paper": 1.0, "standard": 1.0},), ())


# --- booleans are not numbers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path, value",
    [
        ("pretrain.warmup_steps", True),
        ("pretrain.batch_size", True),
        ("pretrain.learning_rate", True),
        ("pretrain.adam_betas", [True, 0.999]),
        ("pretrain.seeds", [0, True]),
        ("budget.steps", True),
        ("budget.checkpoints", [0.5, True]),
        ("finetune.recipe.epochs", True),
        ("finetune.recipe.task_epochs", {"rte": True}),
        ("finetune.caps", {"rte": False}),
        ("launcher.time_min", True),
        ("schedule.beside", True),
    ],
)
def test_a_boolean_where_a_number_goes_is_refused_naming_the_field(path, value):
    with pytest.raises(SpecError) as caught:
        load_spec(SMOKE, overrides={path: value})
    assert path.split(".")[-1] in str(caught.value) and "boolean" in str(caught.value)


def test_numbers_and_real_booleans_still_read_as_before():
    spec = load_spec(
        SMOKE,
        overrides={
            "pretrain.batch_size": 100,  # --set pretrain.batch_size=100
            "pretrain.learning_rate": 1,  # a whole number is a float's value
            "pretrain.deterministic": True,
            "pretrain.compile": False,
            "finetune.baseline": False,
        },
    )
    assert spec.pretrain.batch_size == 100 and isinstance(spec.pretrain.batch_size, int)
    assert spec.pretrain.learning_rate == 1.0
    assert spec.pretrain.deterministic is True and spec.pretrain.compile is False
    with pytest.raises(ValidationError):
        PretrainSpec(warmup_steps=True)
    with pytest.raises(ValidationError):
        FinetuneRecipe(epochs=True)


def test_an_infinite_budget_is_refused():
    raw = read_yaml(SMOKE)
    with pytest.raises(SpecError, match="budget.flops"):
        parse_spec(raw, overrides={"budget.steps": None, "budget.flops": float("inf")})


# --- a warm-up longer than the run ----------------------------------------------------------


def test_a_warm_up_longer_than_the_run_is_found_with_the_rate_it_reaches():
    spec = PretrainSpec(learning_rate=5e-4, warmup_steps=100_000)
    (found,) = warmup_beyond_run(one_stage(21), spec)
    assert (found.stage, found.steps, found.warmup) == (0, 21, 100_000)
    assert found.reached == learning_rate(one_stage(21), 20, spec) == pytest.approx(5e-4 * 21e-5)
    assert "warm-up 100000 steps > the run's 21" in found.describe(spec)
    assert "1.05e-07" in found.describe(spec) and "5e-04 peak" in found.describe(spec)
    assert warmup_beyond_run(one_stage(100_000), spec) == []
    assert warmup_beyond_run(one_stage(21), PretrainSpec(warmup_fraction=0.5)) == []


def test_the_allowance_is_in_no_id_and_the_gpu_specs_need_none():
    allowed = PretrainSpec(warmup_steps=10_000, warmup_beyond_run=True)
    from electra_ablate.infra.identity import IDENTITY_EXCLUDED

    assert "warmup_beyond_run" in IDENTITY_EXCLUDED
    assert allowed.model_dump(exclude=set(IDENTITY_EXCLUDED), exclude_none=True) == (
        PretrainSpec(warmup_steps=10_000).model_dump(
            exclude=set(IDENTITY_EXCLUDED), exclude_none=True
        )
    )
    # the GPU specs follow one shape for both objectives (issue 72): the budget shape, with no
    # warm-up longer than a run to allow
    for name in ("gpu_session.yaml", "small_gpu.yaml"):
        pretrain = load_spec(SMOKE.parent / name).pretrain
        assert pretrain.schedule_shape == "budget" and not pretrain.warmup_beyond_run


# --- budgets the plan cannot hold, or rounds ------------------------------------------------


def test_a_budget_past_the_step_ceiling_is_refused_before_any_step_is_listed():
    with pytest.raises(SpecError) as caught:
        plan_run(bert_on_meta(), 1e40, "paper", 16, MICRO.max_seq_len, [0.5, 1.0])
    assert f"{MAX_RUN_STEPS:,}" in str(caught.value) and "budget" in str(caught.value)


def test_checkpoints_are_placed_as_before_without_a_list_per_step():
    objective = bert_on_meta()
    one = training_flops(objective, MICRO.max_seq_len, 16, 1, "paper")
    plan = plan_run(objective, 1000.4 * one, "paper", 16, MICRO.max_seq_len, [0.3, 0.5, 1.0])
    assert plan.total_steps == 1000
    assert dict(plan.checkpoints) == {0.3: 300, 0.5: 500, 1.0: 1000}
    big = plan_run(objective, 1e8 * one, "paper", 16, MICRO.max_seq_len, [0.125, 1.0])
    assert dict(big.checkpoints) == {0.125: 12_500_000, 1.0: 100_000_000}


def test_a_budget_rounded_far_from_what_was_asked_says_so():
    objective = bert_on_meta()
    one = training_flops(objective, MICRO.max_seq_len, 16, 1, "paper")
    tiny = plan_run(objective, 1e3, "paper", 16, MICRO.max_seq_len, [1.0])
    assert tiny.total_steps == 1
    line = budget_rounding(tiny, 1e3, "paper")
    assert line is not None and "rounded to 1 step" in line and "1e+03 FLOPs" in line
    close = plan_run(objective, 40.4 * one, "paper", 16, MICRO.max_seq_len, [1.0])
    assert budget_rounding(close, 40.4 * one, "paper") is None  # 1% off: nothing to say


# --- task_epochs over epochs ----------------------------------------------------------------


def test_task_epochs_overriding_epochs_is_named():
    recipe = FinetuneRecipe(epochs=1)
    assert recipe.epochs_overridden(["cola", "rte", "stsb"]) == {"rte": 10, "stsb": 10}
    assert FinetuneRecipe(epochs=1, task_epochs={}).epochs_overridden(["rte"]) == {}
    assert FinetuneRecipe(epochs=10).epochs_overridden(["rte"]) == {}
    spec = load_spec(SMOKE, overrides={"finetune.recipe.task_epochs": {"rte": 10, "stsb": 10}})
    (line,) = spec.plan_notes()
    assert line == "rte, stsb: 10 epochs by finetune.recipe.task_epochs, not epochs 1"
    assert load_spec(SMOKE).plan_notes() == []


def test_the_report_first_lines_say_the_rate_a_run_shorter_than_its_warm_up_reached():
    import polars as pl

    from electra_ablate.report.header import warmup_beyond_text

    runs = pl.DataFrame(
        {
            "variant": [None, None, None],
            "label": ["bert", "bert", "none"],
            "objective": ["bert_mlm", "bert_mlm", "none"],
            "status": ["done", "done", "done"],
            "steps": [21, 21, 0],
        }
    )
    study = {"pretrain": {"learning_rate": 5e-4, "warmup_steps": 100_000, "tensorboard": False}}
    text = warmup_beyond_text(study, runs)
    assert "`bert`: warm-up 100000 steps > the run's 21: the rate reaches 1.05e-07" in text
    assert warmup_beyond_text({"pretrain": {"warmup_steps": 20}}, runs) == ""
    assert warmup_beyond_text({"pretrain": {}}, runs) == ""
