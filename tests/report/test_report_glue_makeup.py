"""Reports show what GLUE is made of (issue 72): each task's majority share and majority-class
baseline beside its score, an aggregate of constant predictions flagged, a like-for-like
aggregate where labels miss tasks, and records older than the share still reported."""

from __future__ import annotations

import polars as pl
from test_report import make_study_dir, result_rows

from electra_ablate.analysis.results import write_table
from electra_ablate.evaluation.task import MAJORITY_BASELINE, MAJORITY_SHARE
from electra_ablate.report import write_report


def with_facts(rows: list[dict], constant_label: str) -> list[dict]:
    """The synthetic study's rows plus a share and baseline row beside each headline row:
    ``constant_label``'s fine-tunes predict one class everywhere, the others 60%."""
    facts = []
    for r in rows:
        if not r["headline"]:
            continue
        share = 100.0 if r["label"] == constant_label else 60.0
        for metric, value in ((MAJORITY_SHARE, share), (MAJORITY_BASELINE, 56.5)):
            facts.append({**r, "metric": metric, "headline": False, "value": value})
    return rows + facts


def test_shares_baselines_and_a_constant_aggregate_are_in_the_report(tmp_path):
    directory = make_study_dir(tmp_path / "made_of")
    write_table(directory / "results.parquet", with_facts(result_rows(), "BERT"))
    text = write_report(directory).read_text(encoding="utf-8")
    assert "| Label | cola (baseline 56.5) | mrpc (baseline 56.5) | wnli (baseline 56.5) |" in text
    assert "| BERT | 100% | 100% | 100% |" in text
    assert "| ELECTRA | 60% | 60% | 60% |" in text
    assert "**Constant predictions**: the GLUE score of BERT is made of constant" in text
    assert "f1" in text and f"({MAJORITY_SHARE})" not in text  # not an "other metric"


def test_older_records_show_no_share_and_a_label_missing_a_task_gets_a_like_for_like_row(tmp_path):
    directory = make_study_dir(tmp_path / "older")
    rows = [r for r in result_rows() if not (r["label"] == "BERT" and r["task"] == "mrpc")]
    write_table(directory / "results.parquet", rows)
    text = write_report(directory).read_text(encoding="utf-8")
    assert "*Majority shares*: —" in text
    assert "**Constant predictions**" not in text
    assert "here is the mean over the tasks every label has: GLUE over cola." in text
    like = next(line for line in text.splitlines() if line.startswith("| BERT | "))
    assert like.startswith("| BERT | ")
    assert "| Label | GLUE over cola: per model median (min–max) |" in text
    frame = pl.read_parquet(directory / "results.parquet")
    assert MAJORITY_SHARE not in frame["metric"].to_list()
