"""The report's "Compute efficiency" section, ``compute_efficiency.csv`` and ``crossovers.csv``
on the synthetic study of ``test_report`` (scores known in advance), on a study with one
budget, and on the committed studies.

In the synthetic study every model's GLUE score is ``base + 10 + 10 * fraction + seed offset``
at ``4e15 * fraction`` FLOPs, every label with the same seed offsets: medians are ELECTRA
``70 + 10f``, BERT ``64 + 10f``, All-tokens ``65 + 10f``, Replace MLM ``60 + 10f`` (up to
``f = 0.25``), no pre-training 62. Shared offsets make every paired resample move both arms
alike, so each interval collapses onto its estimate and the numbers below are exact.
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from test_report import make_study_dir

from electra_ablate.analysis.efficiency import (
    CROSSOVER_COLUMNS,
    MULTIPLIER_COLUMNS,
    Efficiency,
    Multiplier,
    crossover_table,
    multiplier_table,
)
from electra_ablate.analysis.results import families_in_order, of_family, read_results
from electra_ablate.analysis.stats import SUPPORTED
from electra_ablate.evaluation.task import describe_family
from electra_ablate.report import write_report
from electra_ablate.report.document import write_csv
from electra_ablate.report.efficiency import family_efficiency, multiplier_table_md

FLOPS = 4e15
REPORTS = Path(__file__).resolve().parents[2] / "reports"


@pytest.fixture(scope="module")
def report(synthetic) -> Path:
    """The synthetic study's report (``conftest.synthetic``)."""
    return synthetic.report / "report.md"


def multiplier(table: pl.DataFrame, a: str, b: str, fraction: float) -> dict:
    rows = table.filter(
        (pl.col("score") == "glue")
        & (pl.col("a") == a)
        & (pl.col("b") == b)
        & ((pl.col("flops") - FLOPS * fraction).abs() < 1)
    )
    assert rows.height == 1
    return rows.row(0, named=True)


def test_the_tables_have_the_documented_columns(report):
    multipliers = pl.read_csv(report.parent / "compute_efficiency.csv")
    crossovers = pl.read_csv(report.parent / "crossovers.csv")
    assert multipliers.columns == list(MULTIPLIER_COLUMNS)
    assert crossovers.columns == list(CROSSOVER_COLUMNS)
    assert set(multipliers["kind"]) <= {"estimate", "lower_bound", "upper_bound", "unresolved"}


def test_a_multiplier_is_read_on_the_other_curve_in_log_flops(report):
    table = pl.read_csv(report.parent / "compute_efficiency.csv")
    # ELECTRA's 71.25 at 1/8 of the budget: BERT reaches it 45% of the way (in log-FLOPs)
    # from 1/2 (69) to the full budget (74)
    m = multiplier(table, "ELECTRA", "BERT", 0.125)
    assert m["kind"] == "estimate"
    assert m["multiplier"] == pytest.approx(0.5 * 2**0.45 / 0.125, rel=1e-3)
    assert m["ci_low"] == pytest.approx(m["multiplier"], rel=1e-3)
    assert m["ci_high"] == pytest.approx(m["multiplier"], rel=1e-3)
    # ELECTRA's 75 at half the budget is above all of BERT's curve: a bound, never more
    m = multiplier(table, "ELECTRA", "BERT", 0.5)
    assert (m["kind"], m["multiplier"]) == ("lower_bound", pytest.approx(2.0, rel=1e-3))
    assert m["ci_low"] == pytest.approx(2.0, rel=1e-3) and math.isinf(m["ci_high"])
    # and BERT's 69 at half the budget is below all of ELECTRA's: at most 1/4 of the compute
    m = multiplier(table, "BERT", "ELECTRA", 0.5)
    assert (m["kind"], m["multiplier"]) == ("upper_bound", pytest.approx(0.25, rel=1e-3))
    assert m["ci_low"] == 0


def test_a_curve_with_two_budgets_is_a_curve_and_one_that_failed_early_is_read_as_far_as_it_goes(
    report,
):
    table = pl.read_csv(report.parent / "compute_efficiency.csv")
    # Replace MLM reached 1/4 of the budget: its 62.5 there is All-tokens' score at 1/4 less
    # 2.5 points, which All-tokens passed before its first budget
    m = multiplier(table, "Replace MLM", "All-tokens", 0.25)
    assert m["kind"] == "upper_bound"
    # All-tokens over Replace MLM at 1/8 (66.25) lies beyond Replace MLM's last budget
    m = multiplier(table, "All-tokens", "Replace MLM", 0.125)
    assert m["kind"] == "lower_bound" and m["multiplier"] == pytest.approx(2.0, rel=1e-3)


def test_crossovers_say_who_leads_and_where_the_lead_changes(report):
    table = pl.read_csv(report.parent / "crossovers.csv").filter(pl.col("score") == "glue")
    row = table.filter((pl.col("a") == "ELECTRA") & (pl.col("b") == "BERT")).row(0, named=True)
    assert row["kind"] == "a_ahead" and row["crossings"] == 0
    assert row["a_minus_b_start"] == pytest.approx(6.0) and row["verdict_start"] == SUPPORTED
    assert row["verdict_end"] == SUPPORTED
    # Replace MLM passes no pre-training (62) between 1/8 (61.25) and 1/4 (62.5) of the budget
    row = (table.filter((pl.col("a") == "Replace MLM") & (pl.col("b") == "no pre-training"))).row(
        0, named=True
    )
    assert row["kind"] == "crossover" and row["crossings"] == 1
    assert row["crossover"] == pytest.approx(FLOPS * 0.125 * 2**0.6, rel=1e-3)
    assert row["ci_low"] <= row["crossover"] <= row["ci_high"]


def test_the_section_reads_the_numbers_and_draws_the_figure(report):
    text = report.read_text(encoding="utf-8")
    section = text.split("## Compute efficiency", 1)[1].split("\n## ", 1)[0]
    assert "`compute_efficiency.csv`" in section
    electra = next(s for s in section.splitlines() if s.startswith("| ELECTRA | BERT |"))
    assert "| 5.5× [5.5×, 5.5×] |" in electra and "| > 2.0× [≥ 2.0×] |" in electra
    crossing = next(s for s in section.splitlines() if s.startswith("| Replace MLM | no pre"))
    assert (
        "at 7.58e14" in crossing and "no pre-training ahead before, Replace MLM after" in crossing
    )
    assert "![GLUE: compute efficiency](glue_efficiency.png)" in section
    for suffix in ("png", "svg"):
        assert (report.parent / f"glue_efficiency.{suffix}").stat().st_size > 1000


def test_a_study_with_one_budget_says_why_it_has_no_multiplier(tmp_path):
    folder = make_study_dir(tmp_path / "one_budget")
    results = pl.read_parquet(folder / "results.parquet")
    results.filter(pl.col("checkpoint_fraction").is_in([0.0, 1.0])).write_parquet(
        folder / "results.parquet"
    )
    report = write_report(folder)
    section = report.read_text(encoding="utf-8").split("## Compute efficiency", 1)[1]
    assert "One budget per objective: a multiplier or a crossover needs" in section
    assert pl.read_csv(report.parent / "compute_efficiency.csv").height == 0
    assert not (report.parent / "glue_efficiency.png").exists()


@pytest.mark.parametrize("study", ["long_budget", "objectives"])
def test_committed_efficiency_tables_are_what_their_committed_results_give(study, tmp_path):
    """``reports/<study>/compute_efficiency.csv`` and ``crossovers.csv`` are what the report
    makes of the results kept beside them (figures and markdown left out, for speed)."""
    folder = REPORTS / study
    results = read_results(folder)
    found = [
        family_efficiency(of_family(results, name).filter(pl.col("in_aggregate")), family)
        for name in families_in_order(results)
        if (family := describe_family(name)).aggregate is not None
    ]
    for name, table in (
        ("compute_efficiency.csv", multiplier_table(found)),
        ("crossovers.csv", crossover_table(found)),
    ):
        write_csv(table, tmp_path / name)
        assert (tmp_path / name).read_text() == (folder / name).read_text(), name


def test_long_budget_rtd_probe_multiplier_is_in_berts_favour():
    """At 3e14 FLOPs BERT's frozen features detect replacements far better than ELECTRA's
    (``reports/long_budget``): BERT reaches ELECTRA's final RTD-probe score with a resolved
    fraction of its compute, and ELECTRA never reaches BERT's in the budgets measured."""
    table = pl.read_csv(REPORTS / "long_budget" / "compute_efficiency.csv").filter(
        pl.col("score") == "rtd_probe"
    )
    final = table["flops"].max()
    electra = table.filter((pl.col("a") == "electra") & (pl.col("flops") > 0.99 * final)).row(
        0, named=True
    )
    assert electra["b"] == "bert_mlm" and electra["kind"] == "estimate"
    assert 0 < electra["ci_low"] <= electra["multiplier"] <= electra["ci_high"] < 1
    bert = table.filter((pl.col("a") == "bert_mlm") & (pl.col("flops") > 0.99 * final)).row(
        0, named=True
    )
    assert bert["kind"] == "lower_bound" and bert["ci_low"] >= 1


def test_a_pair_missing_a_budget_leaves_that_column_empty_not_shifted():
    def m(a: str, flops: float) -> Multiplier:
        return Multiplier(a, "B", flops, 2.0, 1.5, 3.0, "estimate", 1, 3, "estimate")

    found = Efficiency(
        "glue",
        {},
        [m("A", 1e14), m("A", 2e14), m("A", 4e14), m("C", 1.001e14), m("C", 4.002e14)],
        [],
    )
    rows = multiplier_table_md(found, mark=False).splitlines()
    assert rows[0] == "| A | B | at 1.00e14 | at 2.00e14 | at 4.00e14 |"
    assert rows[3] == "| C | B | 2.0× [1.5×, 3.0×] | — | 2.0× [1.5×, 3.0×] |"
