"""The results table: schema, atomic append with de-duplication, and the GLUE statistics."""

from __future__ import annotations

import polars as pl
import pytest

from electra_ablate.analysis.results import (
    RESULTS_SCHEMA,
    append_rows,
    common_tasks,
    constant_aggregates,
    family_scores,
    model_scores,
    paper_scores,
    ranking,
    read_results,
    score_intervals,
    summary_table,
    task_scores,
    with_intervals,
    write_table,
)
from electra_ablate.evaluation.glue.task import GLUE_TASKS
from electra_ablate.evaluation.task import MAJORITY_SHARE
from electra_ablate.infra.errors import AblateError

TASKS_5 = ("cola", "sst2", "mrpc", "stsb", "rte")
CLASSES = ("cola", "sst2", "mrpc", "rte")  # STS-B is a regression: no majority share


def row(
    label: str = "ELECTRA",
    task: str = "cola",
    value: float = 50.0,
    *,
    metric: str | None = None,
    headline: bool = True,
    fraction: float = 1.0,
    pretrain_seed: int = 0,
    finetune_seed: int = 0,
) -> dict[str, object]:
    default_metric = {"cola": "matthews", "stsb": "spearman"}.get(task, "accuracy")
    family = "glue" if task in GLUE_TASKS else "toy"
    return {
        "study": "unit",
        "run_id": f"{label}-{pretrain_seed}",
        "objective": label.lower(),
        "label": label,
        "pretrain_seed": pretrain_seed,
        "checkpoint_fraction": fraction,
        "pretrain_step": int(1000 * fraction),
        "flops_paper": 1e15 * fraction,
        "flops_standard": 1.5e15 * fraction,
        "family": family,
        "task": task,
        "finetune_seed": finetune_seed,
        "metric": metric or default_metric,
        "headline": headline,
        "in_aggregate": headline and task != "wnli",
        "value": value,
        "train_examples": 100,
        "wall_s": 1.0,
    }


def test_write_then_read_keeps_the_schema_and_leaves_no_temp_files(tmp_path):
    write_table(tmp_path / "results.parquet", [row(), row(task="mrpc", value=80.0)])
    table = read_results(tmp_path)
    assert table.schema == RESULTS_SCHEMA
    assert table.height == 2
    assert [p.name for p in tmp_path.iterdir()] == ["results.parquet"]


def test_rows_missing_a_column_are_rejected(tmp_path):
    incomplete = row()
    del incomplete["value"]
    with pytest.raises(ValueError, match="value"):
        write_table(tmp_path / "results.parquet", [incomplete])


def test_append_replaces_rows_with_the_same_key_and_keeps_the_others(tmp_path):
    path = tmp_path / "results.parquet"
    append_rows(path, [row(value=10.0), row(finetune_seed=1, value=20.0)])
    append_rows(path, [row(value=11.0), row(finetune_seed=2, value=30.0)])
    table = read_results(tmp_path).sort("finetune_seed")
    assert table["finetune_seed"].to_list() == [0, 1, 2]
    assert table["value"].to_list() == [11.0, 20.0, 30.0]


def test_missing_or_empty_results_are_one_line_errors(tmp_path):
    with pytest.raises(AblateError, match=r"no results in .*: run `ablate run SPEC` first"):
        read_results(tmp_path)
    write_table(tmp_path / "results.parquet", [])
    with pytest.raises(AblateError, match="is empty"):
        read_results(tmp_path)


def test_glue_score_is_the_mean_of_headline_metrics_without_wnli():
    results = pl.DataFrame(
        [
            row(task="cola", value=40.0),
            row(task="mrpc", value=80.0),
            row(task="mrpc", value=99.0, metric="f1", headline=False),
            row(task="wnli", value=10.0),
            # seed 1 lacks mrpc: a mean over fewer tasks is not a GLUE score
            row(task="cola", value=90.0, finetune_seed=1),
            row(task="wnli", value=10.0, finetune_seed=1),
        ],
        schema=RESULTS_SCHEMA,
    )
    scores = model_scores(results)
    assert scores["finetune_seed"].to_list() == [0]
    assert scores["score"].to_list() == [60.0]
    assert scores["family"].to_list() == ["glue"]


def test_spread_pools_pretraining_and_finetuning_seeds():
    values = {(0, 0): 70.0, (0, 1): 72.0, (1, 0): 75.0, (1, 1): 81.0}
    results = pl.DataFrame(
        [
            row(task=task, value=v + offset, pretrain_seed=p, finetune_seed=f)
            for (p, f), v in values.items()
            for task, offset in (("cola", -5.0), ("sst2", 5.0))
        ],
        schema=RESULTS_SCHEMA,
    )
    summary = family_scores(results).row(0, named=True)
    assert summary["n"] == 4
    assert summary["median"] == pytest.approx(73.5)
    assert (summary["min"], summary["max"]) == (70.0, 81.0)
    assert summary["q1"] == pytest.approx(71.5)
    assert summary["q3"] == pytest.approx(76.5)
    assert summary["flops_paper"] == pytest.approx(1e15)


def test_ranking_orders_labels_by_median_with_the_gap_to_the_next():
    seeds = (-1.0, 0.0, 2.0)  # spread 3 for every label
    medians = {"ELECTRA": 80.0, "All-tokens": 75.0, "BERT": 74.0}
    results = pl.DataFrame(
        [
            row(label=label, value=m + d, finetune_seed=s)
            for label, m in medians.items()
            for s, d in enumerate(seeds)
        ],
        schema=RESULTS_SCHEMA,
    )
    ranked = ranking(family_scores(results), 1.0)
    assert ranked["label"].to_list() == ["ELECTRA", "All-tokens", "BERT"]
    assert ranked["rank"].to_list() == [1, 2, 3]
    assert ranked["gap_to_next"].to_list()[:2] == [5.0, 1.0]
    assert "beyond_spread" not in ranked.columns  # verdicts come from the bootstrap's CIs


def test_equal_medians_share_a_rank_and_are_listed_by_label():
    medians = {"electra": 59.2, "bert_mlm": 59.2, "replace_mlm": 50.0}
    results = pl.DataFrame(
        [row(label=label, value=m, finetune_seed=0) for label, m in medians.items()],
        schema=RESULTS_SCHEMA,
    )
    ranked = ranking(family_scores(results), 1.0)
    assert ranked["label"].to_list() == ["bert_mlm", "electra", "replace_mlm"]
    assert ranked["rank"].to_list() == [1, 1, 3]
    assert ranked["gap_to_next"].to_list()[:2] == pytest.approx([0.0, 9.2])


def test_task_scores_keep_every_metric_per_checkpoint():
    results = pl.DataFrame(
        [
            row(task="mrpc", value=v, metric=m, headline=h, finetune_seed=s, fraction=f)
            for s, v in enumerate((70.0, 80.0, 90.0))
            for m, h in (("accuracy", True), ("f1", False))
            for f in (0.5, 1.0)
        ],
        schema=RESULTS_SCHEMA,
    )
    tasks = task_scores(results)
    assert tasks.height == 4
    f1 = tasks.filter((pl.col("metric") == "f1") & (pl.col("checkpoint_fraction") == 0.5))
    assert f1.select("median", "min", "max", "n").row(0) == (80.0, 70.0, 90.0, 3)


def test_a_table_written_before_families_is_read_as_glue_with_wnli_left_out(tmp_path):
    old = [
        {k: v for k, v in row(task=t, value=v).items() if k not in ("family", "in_aggregate")}
        for t, v in (("cola", 40.0), ("mrpc", 80.0), ("wnli", 10.0))
    ]
    pl.DataFrame(old).write_parquet(tmp_path / "results.parquet")
    table = read_results(tmp_path)
    assert table.schema == RESULTS_SCHEMA
    assert set(table["family"]) == {"glue"}
    assert dict(zip(table["task"], table["in_aggregate"], strict=True)) == {
        "cola": True,
        "mrpc": True,
        "wnli": False,
    }
    assert model_scores(table)["score"].to_list() == [60.0]


def test_another_familys_scores_never_enter_the_glue_score():
    """A toy family's task sits beside GLUE's: GLUE's score and the toy family's are each
    their own tasks' mean, per model and the paper's way, and summary.csv keeps GLUE's columns
    first with the other family's after them."""
    rows = [
        row(task="cola", value=40.0),
        row(task="mrpc", value=80.0),
        row(task="parity", value=0.0, metric="accuracy"),
        row(task="parity", value=10.0, metric="accuracy", finetune_seed=1),
        row(task="cola", value=50.0, finetune_seed=1),
        row(task="mrpc", value=90.0, finetune_seed=1),
    ]
    results = pl.DataFrame(rows, schema=RESULTS_SCHEMA)
    scores = model_scores(results)
    glue = scores.filter(pl.col("family") == "glue")["score"].to_list()
    toy = scores.filter(pl.col("family") == "toy")["score"].to_list()
    assert (glue, toy) == ([60.0, 70.0], [0.0, 10.0])
    papers = dict(paper_scores(results).select("family", "score_paper").iter_rows())
    assert papers == {"glue": 65.0, "toy": 5.0}
    summary = summary_table(family_scores(results))
    assert summary.columns == [
        "objective",
        "label",
        "budget_fraction",
        "glue_median",
        "glue_min",
        "glue_max",
        "n",
        "toy_median",
        "toy_min",
        "toy_max",
        "toy_n",
    ]
    assert summary.row(0, named=True)["glue_median"] == 65.0
    assert summary.row(0, named=True)["toy_median"] == 5.0
    # with intervals: the first family's unprefixed, the others' prefixed, each its own
    with_ci = summary_table(with_intervals(family_scores(results), score_intervals(results)))
    assert with_ci.columns[3:] == [
        "glue_median",
        "glue_min",
        "glue_max",
        "n",
        "ci_low",
        "ci_high",
        "n_pretrain",
        "n_finetune",
        "toy_median",
        "toy_min",
        "toy_max",
        "toy_n",
        "toy_ci_low",
        "toy_ci_high",
        "toy_n_pretrain",
        "toy_n_finetune",
    ]
    first = with_ci.row(0, named=True)
    assert (first["n_pretrain"], first["n_finetune"], first["toy_n_finetune"]) == (1, 2, 2)
    assert first["ci_low"] < 65.0 < first["ci_high"]
    assert first["toy_ci_low"] < 5.0 < first["toy_ci_high"]


def test_score_intervals_count_seeds_and_match_the_stats_module():
    """The summary's interval is ``stats.score`` of the family's aggregated rows at that
    checkpoint (the rows ``in_aggregate``; WNLI's never enter)."""
    from electra_ablate.analysis import stats

    values = {(0, 0): 70.0, (0, 1): 72.0, (1, 0): 75.0, (1, 1): 81.0, (2, 0): 74.0, (2, 1): 77.0}
    results = pl.DataFrame(
        [
            row(task=task, value=v + offset, pretrain_seed=p, finetune_seed=f)
            for (p, f), v in values.items()
            for task, offset in (("cola", -5.0), ("sst2", 5.0))
        ]
        + [row(task="wnli", value=99.0, pretrain_seed=p, finetune_seed=f) for p, f in values],
        schema=RESULTS_SCHEMA,
    ).with_columns((pl.col("task") != "wnli").alias("in_aggregate"))
    found = score_intervals(results).row(0, named=True)
    expected = stats.arm_scores(
        results.filter(pl.col("in_aggregate")), stats.MEDIAN_OF_MODEL_MEANS
    )[0]
    assert (found["n_pretrain"], found["n_finetune"]) == (3, 2)
    assert (found["ci_low"], found["ci_high"]) == (expected.ci_low, expected.ci_high)
    assert found["ci_low"] < family_scores(results)["median"][0] < found["ci_high"]


def share_row(label: str, task: str, value: float, **kw) -> dict[str, object]:
    """A fine-tune's majority-share row (``PREDICTION_FACTS``): never a headline."""
    return {**row(label, task, value, metric=MAJORITY_SHARE, headline=False, **kw)}


def test_an_aggregate_of_constant_predictions_is_flagged_with_what_still_varies():
    rows = [
        *(row(label, task, 50.0) for label in ("ELECTRA", "BERT") for task in TASKS_5),
        *(share_row("ELECTRA", task, 100.0, finetune_seed=s) for task in CLASSES for s in (0, 1)),
        share_row("BERT", "cola", 100.0),
        share_row("BERT", "rte", 93.5),  # one class not quite always: learnt something
    ]
    scored = task_scores(pl.DataFrame(rows))
    assert constant_aggregates(scored, 1.0) == {"ELECTRA": ["stsb"]}
    older = task_scores(
        pl.DataFrame([row(label, t, 50.0) for label in ("A", "B") for t in TASKS_5])
    )
    assert constant_aggregates(older, 1.0) == {}  # no shares recorded: nothing said


def test_labels_missing_tasks_get_the_tasks_every_label_has():
    full = [row("ELECTRA", t, 50.0) for t in TASKS_5]
    cut = [row("BERT", t, 50.0) for t in TASKS_5 if t != "sst2"]
    baseline = [row("none", t, 40.0, fraction=0.0) for t in ("cola", "rte", "stsb", "sst2")]
    frame = pl.DataFrame([*full, *cut, *baseline])
    assert common_tasks(frame, 1.0) == ["cola", "stsb", "rte"]
    assert common_tasks(pl.DataFrame([*full, *(row("BERT", t, 1.0) for t in TASKS_5)]), 1.0) is None
