"""Settings that would quietly do nothing, through the installed ``ablate`` (issue 68): a
warm-up longer than the run and a boolean where a number goes exit 2 in one line; a budget
rounded to one step and ``task_epochs`` overriding ``epochs`` are stated in the dry run."""

from __future__ import annotations

from ablate_cli import E2E, SMOKE, ablate, one_line_error

pytestmark = E2E


def test_a_warm_up_longer_than_the_run_and_a_boolean_step_count_are_refused(smoke_env, tmp_path):
    out = tmp_path / "out"
    longer = ablate(
        "run",
        SMOKE,
        "--dry-run",
        "--out",
        out,
        "--set",
        "pretrain.warmup_steps=100000",
        env=smoke_env,
    )
    one_line_error(longer, 2, "warm-up 100000 steps > the run's", "pretrain.warmup_beyond_run")
    boolean = ablate("validate", SMOKE, "--no-data-check", "--set", "pretrain.warmup_steps=true")
    one_line_error(boolean, 2, "pretrain.warmup_steps", "boolean")
    assert not out.exists()


def test_the_dry_run_states_a_rounded_budget_and_task_epochs_over_epochs(smoke_env, tmp_path):
    result = ablate(
        "run",
        SMOKE,
        "--dry-run",
        "--no-progress",
        "--out",
        tmp_path / "out",
        "--set",
        "objectives=[{name: bert_mlm}]",
        "--set",
        "budget={flops: 1.0e+3, checkpoints: [1.0]}",
        "--set",
        "finetune.tasks=[rte]",
        "--set",
        "finetune.recipe={epochs: 1}",
        env=smoke_env,
    )
    assert result.returncode == 0, result.stderr
    assert "bert_mlm: budget 1e+03 FLOPs is" in result.stdout
    assert "rounded to 1 step" in result.stdout
    assert "rte: 10 epochs by finetune.recipe.task_epochs, not epochs 1" in result.stdout
