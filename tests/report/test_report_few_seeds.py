"""A verdict read from an interval that rests on fewer than ``stats.FEW_SEEDS`` seeds (issue 69:
"resolved" from 2 fine-tuning seeds with no word of caution) says so beside it, wherever the
report shows a verdict: the claims table, the ordering, every pair, the baseline comparison."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from test_report import make_study_dir

from electra_ablate.analysis import stats
from electra_ablate.report import write_report
from electra_ablate.report.verdicts import resolved_caution, verdict_words

CAUTION = "from 2 fine-tuning seeds: read with caution"


def two_seed_study(directory: Path) -> Path:
    """The synthetic study (three fine-tuning seeds per arm) cut to its first two."""
    make_study_dir(directory)
    rows = pl.read_parquet(directory / "results.parquet").filter(pl.col("finetune_seed") < 2)
    rows.write_parquet(directory / "results.parquet")
    return directory


def difference(units: int, low: float, high: float, n_pretrain: int = 1) -> stats.Difference:
    n_finetune = units if n_pretrain == 1 else 3
    return stats.Difference("a", "b", 1.0, low, high, 0.5, units - 1, n_pretrain, n_finetune, True)


def test_a_verdict_from_two_seeds_says_so_and_one_from_three_does_not():
    assert verdict_words(difference(2, 0.5, 1.5)) == f"a above b ({CAUTION})"
    assert verdict_words(difference(2, -1.5, -0.5)) == f"b above a ({CAUTION})"
    assert verdict_words(difference(3, 0.5, 1.5)) == "a above b"
    assert verdict_words(difference(2, -0.5, 1.5)) == "CI includes 0: unresolved"
    two_pretrain = difference(2, 0.5, 1.5, n_pretrain=2)
    assert resolved_caution(two_pretrain, True) == (
        " (from 2 pre-training seeds: read with caution)"
    )
    assert resolved_caution(two_pretrain, False) == ""


def test_the_report_cautions_each_verdict_resolved_from_two_seeds(tmp_path):
    text = write_report(two_seed_study(tmp_path / "two")).read_text(encoding="utf-8")
    claims = text[text.index("## The paper's claims (GLUE at 100% of the budget)") :]
    claims = claims[: claims.index("\n## ", 5)]
    supported = [line for line in claims.splitlines() if "| **supported**" in line]
    assert supported and all(CAUTION in line for line in supported)
    glue = text[text.index("## GLUE: results at the final") :]
    glue = glue[: glue.index("\n## ", 5)]
    assert "→ ELECTRA above" in glue and f"({CAUTION})" in glue
    assert "**No pre-training**" in glue
    above = glue[glue.index("Above it (95% CI") :].splitlines()[0].split("). ")[0]
    entries = above.split("): ", 1)[1].split("), ")
    assert len(entries) >= 2 and all(f"; {CAUTION}" in e for e in entries)
    lead = text[text.index("## At a glance") : text.index("## Provenance")]
    assert f"(resolved; {CAUTION})" in lead  # the first screen too


def test_every_model_at_one_score_plans_no_seeds_from_a_zero_variance(tmp_path):
    """Every model at the majority baseline (issue 69: "1 × 2 seeds, expected half-width
    0.00"): the claims it leaves unresolved get no seed plan, and the report says why."""
    directory = make_study_dir(tmp_path / "flat")
    rows = pl.read_parquet(directory / "results.parquet").with_columns(value=pl.lit(68.4))
    rows.write_parquet(directory / "results.parquet")
    text = write_report(directory).read_text(encoding="utf-8")
    claims = text[text.index("## The paper's claims (GLUE at 100% of the budget)") :]
    claims = claims[: claims.index("\n## ", 5)]
    assert "| **unresolved at this power** (fine-tuning noise only) |" in claims
    assert "so its variance is unknown (not zero) and no seed plan" in claims
    assert "half-width 0.00" not in claims and "needs 1 pre-training" not in claims
