"""Every report's recipe says which learning-rate schedule each run followed, the peak it
reached and its final rate, per objective where they differ (issue 72, must hold 1)."""

from __future__ import annotations

import polars as pl

from electra_ablate.report.header import schedule_row

# ELECTRA-Small and BERT-Small at 1e16 FLOPs on the GPU: one budget, two step counts
RUNS = pl.DataFrame(
    {
        "variant": [None, None, None, None],
        "label": ["ELECTRA", "BERT", "Two-stage", "none"],
        "objective": ["electra", "bert_mlm", "two_stage", "none"],
        "status": ["done", "done", "done", "done"],
        "steps": [7_737, 10_235, 9_000, 0],
    }
)


def row(pretrain: dict, runs: pl.DataFrame | None = RUNS) -> str:
    return schedule_row({"pretrain": pretrain}, runs)


def test_the_budget_shape_is_named_with_each_runs_peak_and_final_rate():
    text = row({"warmup_fraction": 0.1})
    assert text.startswith(
        "budget shape: warm-up 10% of each run, linear decay to zero at the budget's end; "
    )
    assert "`ELECTRA`: peak 5.00e-04, final 7.18e-08" in text
    assert "`BERT`: peak 5.00e-04, final 5.43e-08" in text
    assert "`Two-stage`: restarted at each stage" in text  # its stages' steps are not in the table
    assert "none" not in text.split(";", 1)[1]  # the baseline trains nothing


def test_a_per_run_warm_up_shows_the_objectives_different_shapes():
    text = row({"warmup_steps": 10_000}, RUNS.head(2))
    assert text == (
        "per-run warm-up: warm-up 10,000 steps, linear decay to zero at each run's end; "
        "`BERT`: peak 5.00e-04, final 2.13e-06; `ELECTRA`: peak 3.87e-04, final 3.87e-04"
    )


def test_the_paper_shape_is_one_schedule_whose_prefix_each_run_is():
    text = row({"decay_horizon_steps": 1_000_000, "warmup_steps": 10_000})
    assert text.startswith("paper shape: warm-up 10,000 steps, linear decay from step 0 to zero")
    assert "`Two-stage`: peak" in text  # not restarted for a stage: its rates are known
    # lr (1 - t/H) t/W at its last step t = 7,736: still climbing, never annealed
    assert "`ELECTRA`: peak 3.84e-04, final 3.84e-04" in text


def test_identical_runs_are_stated_once_and_no_runs_state_the_shape_alone():
    assert row({}, RUNS.head(1)) == (
        "budget shape: warm-up 1% of each run, linear decay to zero at the budget's end; "
        "every run: peak 5.00e-04, final 6.53e-08"
    )
    assert row({}, None) == (
        "budget shape: warm-up 1% of each run, linear decay to zero at the budget's end"
    )
