"""The paper's claims as data: their numbers, which study arms cover them, and their verdicts
on study-shaped results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from electra_ablate.analysis import paper, stats
from electra_ablate.analysis.results import (
    RESULTS_SCHEMA,
    RUNS_SCHEMA,
    final_fraction,
    read_results,
    write_table,
)

OBJECTIVES_STUDY = {  # studies/objectives.yaml
    "bert_mlm": ("bert_mlm", {}),
    "replace_mlm": ("replace_mlm", {"generator_size": 0.5}),
    "all_tokens_mlm": ("all_tokens_mlm", {"generator_size": 0.5}),
    "electra_15": ("electra_15", {"generator_size": 0.5}),
    "electra": ("electra", {"generator_size": 0.5}),
    "no pre-training": ("none", {}),
}
TYING_STUDY = {  # studies/weight_tying.yaml
    "tie_none": ("electra", {"generator_size": 1.0, "tying": "none"}),
    "tie_embeddings": ("electra", {"generator_size": 1.0, "tying": "embeddings"}),
    "tie_all": ("electra", {"generator_size": 1.0, "tying": "all"}),
    "tie_gdes": ("electra", {"generator_size": 1.0, "tying": "gdes"}),  # not in the paper
}
GENERATOR_SIZE_STUDY = {  # studies/generator_size.yaml
    "gen_unigram": ("electra", {"generator": "unigram"}),
    "gen_1_8": ("electra", {"generator_size": 0.125}),
    "gen_1_4": ("electra", {"generator_size": 0.25}),
    "gen_1_2": ("electra", {"generator_size": 0.5}),
    "gen_1_1": ("electra", {"generator_size": 1.0}),
}
TRAINING_ALGORITHMS_STUDY = {  # studies/training_algorithms.yaml
    "bert_mlm": ("bert_mlm", {}),
    "electra_joint": ("electra", {"generator_size": 0.5}),
    "two_stage": ("two_stage", {"split_by": "steps"}),
    "adversarial": ("adversarial", {"generator_size": 0.5}),
}


def pairs(bindings):
    return {(b.claim.id, b.label_a, b.label_b) for b in bindings}


# --- the claims themselves ------------------------------------------------------------------


def test_claim_numbers_are_the_papers():
    ids = [c.id for c in paper.CLAIMS]
    assert len(ids) == len(set(ids))
    table5 = [c for c in paper.CLAIMS if c.id.startswith("table5:")]
    assert len(table5) == 10  # every pair of Table 5's five columns
    for claim in table5:
        assert claim.paper_a == paper.TABLE5_GLUE[claim.a.objective]
        assert claim.paper_b == paper.TABLE5_GLUE[claim.b.objective]
    by_id = paper.CLAIMS_BY_ID
    assert by_id["table5:electra>all_tokens_mlm"].gap == 0.7
    assert by_id["table5:electra>bert_mlm"].gap == 2.8
    # the ties: equal numbers, and BERT 0.2 below ELECTRA 15% with nothing said of it
    assert by_id["table5:replace_mlm~electra_15"].relation == "≈"
    assert by_id["table5:electra_15~bert_mlm"].relation == "≈"
    # the same 0.2 is an order where the text states one: "Replace MLM slightly outperforms BERT"
    assert by_id["table5:replace_mlm>bert_mlm"].relation == ">"
    assert by_id["table5:replace_mlm>bert_mlm"].gap == 0.2
    assert (by_id["tying:embeddings>none"].paper_a, by_id["tying:embeddings>none"].paper_b) == (
        84.3,
        83.6,
    )
    assert by_id["tying:all>none"].gap == 0.8
    assert by_id["tying:all~embeddings"].relation == "≈"
    assert by_id["small:electra>bert"].gap == 4.8
    assert by_id["small:electra>bert"].backbone == "small"
    figure_only = [c for c in paper.CLAIMS if c.gap is None]
    assert {c.id.split(":")[0] for c in figure_only} == {
        "generator_size",
        "two_stage",
        "adversarial",
    }
    assert all(c.gap_note == paper.FIGURE_ONLY for c in figure_only)
    assert all(c.gap > 0 for c in paper.CLAIMS if c.relation == ">" and c.gap is not None)
    assert all(abs(c.gap) <= c.margin for c in paper.CLAIMS if c.relation == "≈")


# --- which claims a study covers ------------------------------------------------------------


def test_bert_and_electra_cover_the_table5_pair_between_them():
    arms = {"bert": ("bert_mlm", {}), "electra": ("electra", {"generator_size": 0.5})}
    assert pairs(paper.covered_claims(arms)) == {("table5:electra>bert_mlm", "electra", "bert")}


def test_the_objectives_study_covers_every_table5_pair_and_nothing_else():
    found = pairs(paper.covered_claims(OBJECTIVES_STUDY))
    assert {claim for claim, _, _ in found} == {
        c.id for c in paper.CLAIMS if c.id.startswith("table5:")
    }
    assert len(found) == 10
    assert ("table5:all_tokens_mlm>replace_mlm", "all_tokens_mlm", "replace_mlm") in found
    # ELECTRA-Small > BERT-Small only on the small backbone
    small = pairs(paper.covered_claims(OBJECTIVES_STUDY, backbone="small"))
    assert small - found == {("small:electra>bert", "electra", "bert_mlm")}


def test_the_weight_tying_study_covers_the_tying_claims():
    assert pairs(paper.covered_claims(TYING_STUDY)) == {
        ("tying:embeddings>none", "tie_embeddings", "tie_none"),
        ("tying:all>none", "tie_all", "tie_none"),
        ("tying:all~embeddings", "tie_all", "tie_embeddings"),
    }


def test_the_generator_size_study_covers_the_generator_claims():
    found = pairs(paper.covered_claims(GENERATOR_SIZE_STUDY))
    assert found == {
        ("generator_size:best", "gen_1_4", "gen_1_8"),
        ("generator_size:best", "gen_1_4", "gen_1_1"),
        ("generator_size:best", "gen_1_2", "gen_1_8"),
        ("generator_size:best", "gen_1_2", "gen_1_1"),
        ("generator_size:smaller>same", "gen_1_8", "gen_1_1"),
        ("generator_size:smaller>same", "gen_1_4", "gen_1_1"),
        ("generator_size:smaller>same", "gen_1_2", "gen_1_1"),
        ("generator_size:trained>unigram", "gen_1_4", "gen_unigram"),
        ("generator_size:trained>unigram", "gen_1_2", "gen_unigram"),
    }


def test_the_training_algorithms_study_covers_two_stage_and_adversarial():
    assert pairs(paper.covered_claims(TRAINING_ALGORITHMS_STUDY)) == {
        ("table5:electra>bert_mlm", "electra_joint", "bert_mlm"),
        ("two_stage:joint>two_stage", "electra_joint", "two_stage"),
        ("adversarial:adversarial>bert", "adversarial", "bert_mlm"),
        ("adversarial:mle>adversarial", "electra_joint", "adversarial"),
    }
    without_init = {
        **TRAINING_ALGORITHMS_STUDY,
        "two_stage": ("two_stage", {"init_from_generator": False}),
    }
    assert "two_stage:joint>two_stage" not in {
        c for c, _, _ in pairs(paper.covered_claims(without_init))
    }


def test_params_a_claim_does_not_constrain_do_not_matter():
    # the same temperature and λ on every arm, neither the paper's: the tying claims still hold
    changed = {
        label: (objective, {**params, "temperature": 0.5, "disc_weight": 10.0})
        for label, (objective, params) in TYING_STUDY.items()
    }
    assert pairs(paper.covered_claims(changed)) == pairs(paper.covered_claims(TYING_STUDY))
    # and params of one objective never stop a claim about another
    arms = {
        "bert": ("bert_mlm", {"mask_token_prob": 1.0, "random_token_prob": 0.0}),
        "electra": ("electra", {"generator_size": 0.5, "temperature": 0.7}),
    }
    assert pairs(paper.covered_claims(arms)) == {("table5:electra>bert_mlm", "electra", "bert")}


def test_arms_that_differ_in_something_else_are_not_compared():
    # tie_none at a different λ: the tying comparison would confound λ with tying
    confounded = {**TYING_STUDY, "tie_none": ("electra", {**TYING_STUDY["tie_none"][1]})}
    confounded["tie_none"][1]["disc_weight"] = 10.0
    assert {c for c, _, _ in pairs(paper.covered_claims(confounded))} == {"tying:all~embeddings"}
    # nor arms of different study variants
    variants = {
        "bert@pre_ln": ("bert_mlm", {}, "pre_ln"),
        "electra@post_ln": ("electra", {"generator_size": 0.5}, "post_ln"),
        "electra@pre_ln": ("electra", {"generator_size": 0.5}, "pre_ln"),
    }
    assert pairs(paper.covered_claims(variants)) == {
        ("table5:electra>bert_mlm", "electra@pre_ln", "bert@pre_ln")
    }


def test_arms_from_runs_read_the_resolved_params():
    full = paper.resolved_params("electra", {"generator_size": 0.5})
    assert full["generator"] == "mlm" and full["tying"] == "embeddings"
    assert paper.resolved_params("none", {}) == {}
    runs = pl.DataFrame(
        [
            {"run_id": "a", "label": "electra", "objective": "electra", "variant": None,
             "pretrain_seed": 0, "params_json": json.dumps(full)},
            {"run_id": "b", "label": "electra", "objective": "electra", "variant": None,
             "pretrain_seed": 1, "params_json": json.dumps(full)},
            {"run_id": "c", "label": "bert_mlm", "objective": "bert_mlm", "variant": None,
             "pretrain_seed": 0, "params_json": "{}"},
        ]
    )  # fmt: skip
    arms = paper.arms_from_runs(runs)
    assert arms == {
        "electra": paper.Arm("electra", full, None),
        "bert_mlm": paper.Arm("bert_mlm", {}, None),
    }
    assert pairs(paper.covered_claims(arms)) == {("table5:electra>bert_mlm", "electra", "bert_mlm")}


# --- verdicts on study-shaped results -------------------------------------------------------

TASKS = ("cola", "sst2", "mrpc", "stsb", "rte", "wnli")


def results_rows(means, *, pretrain_seeds=(0,), finetune_seeds=(0, 1, 2), noise=0.3, seed=0):
    """Rows shaped like ``results.parquet``: every label at its last checkpoint (the baseline
    at 0), headline and non-headline metrics, WNLI too (a family leaves it out)."""
    rng = np.random.default_rng(seed)
    rows = []
    for label, mean in means.items():
        objective = OBJECTIVES_STUDY[label][0]
        baseline = objective == "none"
        for p in (0,) if baseline else pretrain_seeds:
            shift = rng.normal(0, noise)
            for f in finetune_seeds:
                for task in TASKS:
                    value = mean + shift + rng.normal(0, noise)
                    for metric, headline in (("headline", True), ("other", False)):
                        rows.append(
                            {
                                "study": "objectives", "run_id": f"{label}-s{p}",
                                "variant": None, "objective": objective, "label": label,
                                "pretrain_seed": p,
                                "checkpoint_fraction": 0.0 if baseline else 1.0,
                                "pretrain_step": 0 if baseline else 600, "flops_paper": 2.5e13,
                                "flops_standard": 2.2e13, "task": task, "finetune_seed": f,
                                "family": "glue", "metric": metric, "headline": headline,
                                "in_aggregate": headline and task != "wnli",
                                "value": value if headline else -value, "train_examples": 100,
                                "wall_s": 1.0,
                            }
                        )  # fmt: skip
    return rows


def family_values(results: pl.DataFrame) -> pl.DataFrame:
    """What a GLUE family hands to ``stats``: headline metrics of the last checkpoint (the
    baseline's only one), WNLI out."""
    final = final_fraction(results)
    return results.filter(
        pl.col("in_aggregate")
        & (pl.col("family") == "glue")
        & ((pl.col("checkpoint_fraction") == final) | (pl.col("objective") == "none"))
    )


def test_the_example_runs_on_the_tables_a_study_writes(tmp_path: Path):
    means = {"electra": 40.0, "bert_mlm": 36.0, "replace_mlm": 36.1, "no pre-training": 34.0}
    write_table(tmp_path / "results.parquet", results_rows(means))
    results = read_results(tmp_path)
    assert set(RESULTS_SCHEMA) <= set(results.columns)
    values = family_values(results)
    scores = {s.label: s for s in stats.arm_scores(values, stats.MEDIAN_OF_MODEL_MEANS)}
    assert set(scores) == set(means)
    assert scores["electra"].value == pytest.approx(40.0, abs=0.5)
    assert scores["no pre-training"].caveat == stats.FINETUNE_NOISE_ONLY
    diffs = stats.pair_differences(values, stats.MEAN_OF_TASK_MEDIANS)
    assert len(diffs) == 6 and all(d.n_finetune == 3 for d in diffs)
    runs = pl.DataFrame(
        [
            {"run_id": f"{label}-s0", "variant": None, "objective": objective, "label": label,
             "pretrain_seed": 0, "params_json": json.dumps(params), "status": "done",
             "message": "", "steps": 600, "flops_paper": 2.5e13, "flops_standard": 2.2e13,
             "wall_s": 1.0}
            for label, (objective, params) in OBJECTIVES_STUDY.items()
            if label in means
        ],
        schema=RUNS_SCHEMA,
    )  # fmt: skip
    verdicts = paper.evaluate_claims(values, paper.arms_from_runs(runs))
    by_id = {v.binding.claim.id: v for v in verdicts}
    assert set(by_id) == {
        "table5:electra>bert_mlm",
        "table5:electra>replace_mlm",
        "table5:replace_mlm>bert_mlm",
    }
    assert by_id["table5:electra>bert_mlm"].verdict == stats.SUPPORTED
    assert by_id["table5:electra>bert_mlm"].power == ""
    tiny = by_id["table5:replace_mlm>bert_mlm"]
    assert tiny.verdict == stats.UNRESOLVED and tiny.caveat == stats.FINETUNE_NOISE_ONLY
    assert "a gap of 0.20" in tiny.power and "fine-tuning noise only" in tiny.power


def test_verdicts_follow_the_difference():
    values = family_values(
        pl.DataFrame(
            results_rows(
                {"electra": 30.0, "bert_mlm": 36.0, "replace_mlm": 33.0, "electra_15": 33.0},
                pretrain_seeds=(0, 1, 2),
                noise=0.02,
            )
        )
    )
    verdicts = {v.binding.claim.id: v for v in paper.evaluate_claims(values, OBJECTIVES_STUDY)}
    assert verdicts["table5:electra>bert_mlm"].verdict == stats.CONTRADICTED
    assert verdicts["table5:electra>bert_mlm"].difference.value == pytest.approx(-6, abs=0.3)
    tie = verdicts["table5:replace_mlm~electra_15"]
    assert tie.verdict == stats.SUPPORTED and tie.caveat == ""
    assert tie.difference.paired and tie.difference.n_pretrain == 3


def test_unresolved_claims_get_a_seed_plan():
    values = family_values(
        pl.DataFrame(
            results_rows({"electra": 35.0, "bert_mlm": 35.0}, pretrain_seeds=(0, 1, 2), noise=1.0)
        )
    )
    (v,) = paper.evaluate_claims(values, OBJECTIVES_STUDY)
    assert v.verdict == stats.UNRESOLVED
    assert v.plan is not None and v.plan.gap == 2.8
    assert v.plan.components.between_measured and not v.plan.finetune_noise_only
    assert v.power == v.plan.describe()


def test_figure_only_claims_state_the_detectable_difference():
    rng = np.random.default_rng(0)
    rows = []
    for label in GENERATOR_SIZE_STUDY:
        for f in range(3):
            for task in TASKS[:5]:
                rows.append(
                    {"label": label, "pretrain_seed": 0, "finetune_seed": f, "task": task,
                     "value": 35 + rng.normal(0, 1)}
                )  # fmt: skip
    verdicts = paper.evaluate_claims(
        pl.DataFrame(rows),
        GENERATOR_SIZE_STUDY,
        external_between=stats.between_pretrain_from_scores([34.1, 35.5, 35.1]),
    )
    assert len(verdicts) == 9
    for v in verdicts:
        if v.verdict == stats.UNRESOLVED:
            assert v.plan is None
            assert v.power.startswith("the paper's gap is not stated: figure only; these 1 × 3")
            assert v.power.endswith("(fine-tuning noise only: one pre-training seed)")


def test_a_difference_that_never_varies_states_no_detectable_difference():
    # every model at one score (each predicting one class): no spread to size anything from
    rows = [
        {"label": label, "pretrain_seed": 0, "finetune_seed": f, "task": task, "value": 68.4}
        for label in GENERATOR_SIZE_STUDY
        for f in range(3)
        for task in TASKS[:5]
    ]
    unresolved = [
        v
        for v in paper.evaluate_claims(pl.DataFrame(rows), GENERATOR_SIZE_STUDY)
        if v.verdict == stats.UNRESOLVED
    ]
    assert unresolved
    for v in unresolved:
        assert v.plan is None or v.plan.variance_unknown
        assert "its variance is unknown (not zero)" in v.power and "0.00" not in v.power
