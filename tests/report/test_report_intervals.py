"""A figure without a confidence interval in a report (issue 43): where no arm has one (one model
per arm), the figures are shown bare and the report says once why; where some arms have one
and others do not, each bare figure carries ``NO_INTERVAL`` and the mark is explained under
its table, so the two can never be read alike."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from test_report import make_study_dir, one_seed_study

from electra_ablate.report import write_report
from electra_ablate.report.compare import write_comparison
from electra_ablate.report.verdicts import NO_INTERVAL, NO_INTERVAL_NOTE


def row(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def sections(text: str) -> list[str]:
    """The report's ``## `` sections, each with its body."""
    return ["## " + part for part in text.split("\n## ")[1:]]


def bert_with_one_model(directory: Path) -> Path:
    """The synthetic study (three fine-tuning seeds per arm) with BERT's seeds 1 and 2 lost:
    BERT has one model, so no interval, and every other arm keeps its own."""
    make_study_dir(directory)
    rows = pl.read_parquet(directory / "results.parquet")
    rows = rows.filter((pl.col("label") != "BERT") | (pl.col("finetune_seed") == 0))
    rows.write_parquet(directory / "results.parquet")
    return directory


def test_with_no_interval_anywhere_figures_are_bare_and_the_reason_is_said_once(one_seed):
    text = one_seed.text  # the report of ``one_seed_study`` (``conftest.one_seed``)
    assert "no CI" not in text and NO_INTERVAL not in text
    glue = next(s for s in sections(text) if s.startswith("## GLUE: results at the final"))
    # no column promises an interval that no cell has
    assert "| GLUE per model | vs none |" in glue  # no seeds column either: one model each
    assert row(glue, "| 3 | BERT |").startswith("| 3 | BERT | `bert_mlm` | 73.0 | +12.0 |")
    assert "**No pre-training**: 61.0. Not resolved from it: ELECTRA (+18.0)," in glue
    assert glue.count("*One model per objective*") == 1
    claims = next(s for s in sections(text) if s.startswith("## The paper's claims"))
    assert "| ELECTRA − BERT | +6.00 |" in claims and "Seeds, draw: 1 × 1, paired." in claims
    diagnostics = next(s for s in sections(text) if s.startswith("## Pre-training: did"))
    assert "| Label | GLUE per model (final) |" in diagnostics
    assert row(diagnostics, "| BERT |").startswith("| BERT | 73.0 |")


def test_with_some_arms_without_an_interval_those_are_marked_and_the_mark_explained(tmp_path):
    text = write_report(bert_with_one_model(tmp_path / "mixed")).read_text(encoding="utf-8")
    assert "no CI" not in text
    glue = next(s for s in sections(text) if s.startswith("## GLUE: results at the final"))
    bert, electra = row(glue, "| 3 | BERT |"), row(glue, "| 1 | ELECTRA |")
    assert bert.startswith(f"| 3 | BERT | `bert_mlm` | 73.0{NO_INTERVAL} | 1 × 1 | 73.0 | +11.0†")
    assert electra.startswith("| 1 | ELECTRA | `electra` | 80.0 [74.2, 85.8] | 1 × 3 |")
    assert NO_INTERVAL not in electra
    assert f"> BERT 73.0{NO_INTERVAL}." in glue  # the ordering line too
    # each section with a mark explains it once, under its table
    marked = [s for s in sections(text) if NO_INTERVAL in s]
    assert {s.split("\n")[0] for s in marked} == {
        "## GLUE: results at the final budget (100%)",
        "## The paper's claims (GLUE at 100% of the budget)",
        "## Pre-training: did each model learn, and when?",
    }
    # BERT's one model gives its pairs no measured noise floor: their multipliers are not
    # drawn, so nothing in the efficiency section is bare (issue 72)
    efficiency = next(s for s in sections(text) if s.startswith("## Compute efficiency"))
    assert "*Inside the noise floor*" in efficiency and "ELECTRA over BERT" in efficiency
    assert "| ELECTRA | BERT |" not in efficiency
    for section in marked:
        assert section.count(NO_INTERVAL_NOTE) == 1, section.split("\n")[0]
        assert section.index("\n| ") < section.index(NO_INTERVAL_NOTE)
    claims = next(s for s in marked if s.startswith("## The paper's claims"))
    assert f"| ELECTRA − BERT | +7.00{NO_INTERVAL} | 1 × 1, unpaired |" in claims
    assert "| ELECTRA − All-tokens | +5.00 [+5.0, +5.0] |" in claims


def test_a_comparison_marks_only_where_another_study_has_an_interval(tmp_path):
    three, one = make_study_dir(tmp_path / "three"), one_seed_study(tmp_path / "one")
    mixed = write_comparison([three, one], tmp_path / "mixed").read_text(encoding="utf-8")
    bert = row(mixed, "| BERT |")
    assert "| 74.0 [" in bert and f"| 73.0{NO_INTERVAL}, 1 × 1 |" in bert
    assert mixed.count(NO_INTERVAL_NOTE) == 1 and "no CI" not in mixed
    bare = write_comparison([one, one_seed_study(tmp_path / "again")], tmp_path / "bare")
    text = bare.read_text(encoding="utf-8")
    assert NO_INTERVAL not in text and "no CI" not in text
    assert "final checkpoint; one model each, so no interval." in text
    assert "| 73.0, 1 × 1 |" in row(text, "| BERT |")
