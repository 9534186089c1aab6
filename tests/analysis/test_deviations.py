"""Every code departure in the Deviations row (issue 72, must hold 4): besides the settings'
departures, what the code does differently from the original (bias-corrected Adam, plain normal
initialisers, our own vocabulary, the generator's [MASK]-only input, the schedule's shape),
each unless its option is set, and each objective's only where the study has that objective."""

from __future__ import annotations

from electra_ablate.analysis.deviations import deviations
from electra_ablate.backbone.model import INIT_DEPARTURE
from electra_ablate.pretraining.registry import available_objectives

ORIGINAL = {
    "decay_horizon_steps": 1_000_000,
    "warmup_steps": 10_000,
    "adam_bias_correction": False,
}


def with_generator_input() -> list[str]:
    return sorted(
        name
        for name, cls in available_objectives().items()
        if "mask_token_share" in cls.Params.model_fields
    )


def test_a_default_study_names_every_code_departure():
    found = deviations({"objectives": [{"name": "electra"}, {"name": "bert_mlm"}]})
    assert (
        "learning-rate schedule, budget shape: warm-up 1% of each run, linear decay to zero at "
        "the budget's end (the paper: warm-up 10,000 steps, linear decay from step 0 to zero at "
        "step 1,000,000, each run its first steps)"
    ) in found
    assert any(d.startswith("bias-corrected AdamW (the original code: Adam without") for d in found)
    assert INIT_DEPARTURE in found
    assert any("WordPiece vocabulary" in d and "BERT's uncased" in d for d in found)
    generator = [d for d in found if "[MASK] at every selected slot" in d]
    assert generator == [
        "`electra`: the generator reads [MASK] at every selected slot (the original code: 85% "
        "[MASK], 15% the original token; mask_token_share: 0.85)"
    ]


def test_the_options_set_to_the_original_code_leave_only_what_has_no_option():
    entries = [{"name": n, "params": {"mask_token_share": 0.85}} for n in with_generator_input()]
    found = deviations(
        {
            "pretrain": ORIGINAL,
            "objectives": entries,
            "data": {"tokenizer": {"vocab_file": "bert-base-uncased-vocab.txt"}},
        }
    )
    assert found == [INIT_DEPARTURE]


def test_an_objective_without_a_generator_gets_no_generator_departure():
    found = deviations({"pretrain": ORIGINAL, "objectives": [{"name": "bert_mlm"}]})
    assert not any("generator" in d for d in found)


def test_a_per_run_warm_up_and_a_shorter_horizon_are_departures_of_the_schedule():
    per_run = deviations({"pretrain": {"warmup_steps": 10_000}})
    assert (
        "learning-rate schedule, per-run warm-up: warm-up 10,000 steps, linear decay to zero at "
        "each run's end"
    ) in per_run[0]
    short = deviations({"pretrain": {"decay_horizon_steps": 100_000, "warmup_steps": 10_000}})
    assert short[0].startswith(
        "learning-rate schedule, paper shape: warm-up 10,000 steps, linear decay from step 0 to "
        "zero at step 100,000"
    )


def test_a_variant_of_the_papers_setting_is_a_departure_of_its_label():
    """Issue 69: a mask rate or tying set away from the paper's is a row of the header's
    deviations, named by label; the defaults are none."""
    found = deviations(
        {
            "pretrain": ORIGINAL,
            "objectives": [
                {"name": "electra", "label": "e25", "params": {"mask_rate": 0.25}},
                {"name": "electra", "label": "untied", "params": {"tying": "none"}},
                {"name": "bert_mlm", "label": "paper"},
            ],
        }
    )
    assert "`e25`: mask_rate 0.25 (the paper: 0.15)" in found
    assert "`untied`: tying none (the paper: embeddings)" in found
    assert not any(d.startswith("`paper`") for d in found)


def test_a_departure_shared_by_labels_is_said_once_naming_them():
    """Issue 69: a report's Deviations row named one departure once per label."""
    found = deviations(
        {
            "objectives": [
                {"name": "electra", "label": "e1"},
                {"name": "electra", "label": "e2", "params": {"mask_rate": 0.25}},
            ]
        }
    )
    generator = [d for d in found if "[MASK] at every selected slot" in d]
    assert len(generator) == 1 and generator[0].startswith("`e1`, `e2`: the generator reads")
    assert "`e2`: mask_rate 0.25 (the paper: 0.15)" in found
