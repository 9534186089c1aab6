"""``ablate compare`` through the installed CLI: two studies (a study folder and a report folder)
on one table and one figure, and one line with exit 2 for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from ablate_cli import ablate
from test_report import make_study_dir

from electra_ablate.report import write_report
from electra_ablate.report.compare import write_comparison


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> tuple[Path, Path]:
    """The synthetic study, and the same at 12x the FLOPs where BERT gains 8 points (a
    crossover with All-tokens and ELECTRA's lead shrinking), given as a report folder."""
    root = tmp_path_factory.mktemp("compare")
    short = make_study_dir(root / "short")
    long = make_study_dir(root / "long")
    results = pl.read_parquet(long / "results.parquet").with_columns(
        pl.col("flops_paper") * 12,
        pl.col("flops_standard") * 12,
        pl.when(pl.col("label") == "BERT")
        .then(pl.col("value") + 8)
        .otherwise(pl.col("value"))
        .alias("value"),
    )
    results.write_parquet(long / "results.parquet")
    study = json.loads((long / "study.json").read_text())
    (long / "study.json").write_text(json.dumps({**study, "name": "synthetic_long"}))
    return short, write_report(long, root / "long-report").parent


@pytest.fixture(scope="module")
def compared(studies, tmp_path_factory) -> tuple[Path, str]:
    """``ablate compare`` of the two studies, run once for the tests that read its output:
    the folder it wrote and what it printed."""
    short, long_report = studies
    out = tmp_path_factory.mktemp("compared") / "c"
    done = ablate("compare", str(short), str(long_report), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_compare_puts_the_same_objectives_of_two_studies_on_one_table_and_figure(compared):
    out, stdout = compared
    assert stdout.strip() == str(out / "compare.md")
    text = (out / "compare.md").read_text(encoding="utf-8")
    assert text.startswith("# Comparison: `synthetic`, `synthetic_long`")
    bert = next(line for line in text.splitlines() if line.startswith("| BERT |"))
    # 74 at 4e15 FLOPs in one study, 82 at 4.8e16 in the other, each with its CI and seeds
    assert "| 74.0 [" in bert and "], 1 × 3 | 4.00e15 | 82.0 [" in bert and "| 4.80e16 |" in bert
    assert "| no pre-training | 62.0 [" in text
    for suffix in ("png", "svg"):
        assert (out / f"glue_compare_vs_flops.{suffix}").stat().st_size > 1000
    table = pl.read_csv(out / "compare.csv")
    assert set(table["study"].to_list()) == {"synthetic", "synthetic_long"}
    final = table.filter((pl.col("label") == "BERT") & (pl.col("checkpoint_fraction") == 1.0))
    assert sorted(final["median"].to_list()) == [74.0, 82.0]
    assert final["n_finetune"].to_list() == [3, 3]


def test_compare_puts_each_studys_multipliers_and_crossovers_side_by_side(compared):
    """BERT gains 8 points in the long study: ELECTRA leads it in one study and trails it in
    the other, and the comparison shows both, study by study."""
    out, _ = compared
    text = (out / "compare.md").read_text(encoding="utf-8")
    part = text.split("### GLUE: compute efficiency", 1)[1]
    rows = [line for line in part.splitlines() if line.startswith("| ELECTRA | BERT |")]
    assert [r.split(" | ")[2] for r in rows[:2]] == ["synthetic", "synthetic_long"]
    crossovers = pl.read_csv(out / "crossovers.csv").filter(
        (pl.col("a") == "ELECTRA") & (pl.col("b") == "BERT") & (pl.col("score") == "glue")
    )
    assert dict(crossovers.select("study", "kind").iter_rows()) == {
        "synthetic": "a_ahead",
        "synthetic_long": "b_ahead",
    }
    multipliers = pl.read_csv(out / "compute_efficiency.csv")
    assert set(multipliers["study"]) == {"synthetic", "synthetic_long"}


def test_each_objective_keeps_its_colour_in_reports_and_comparisons():
    from electra_ablate.report.plots import objective_colors

    alone = objective_colors({"BERT": "bert_mlm"})
    many = objective_colors({"ELECTRA": "electra", "x": "all_tokens_mlm", "BERT": "bert_mlm"})
    reordered = objective_colors({"BERT": "bert_mlm", "ELECTRA": "electra"})
    assert alone["BERT"] == many["BERT"] == reordered["BERT"]
    assert many["ELECTRA"] == reordered["ELECTRA"] != many["BERT"]
    # several arms of one objective (a generator-size study) get colours of their own, none
    # of them another objective's
    sizes = objective_colors({"g1/4": "electra", "g1/2": "electra", "BERT": "bert_mlm"})
    assert len(set(sizes.values())) == 3 and sizes["BERT"] == alone["BERT"]


@pytest.mark.parametrize(
    "case",
    [
        "missing folder",
        "one study",
        "same study twice",
        "no results",
        "no common objectives",
        "old report folder",
    ],
)
def test_bad_input_is_one_line_and_exit_2(studies, tmp_path, case):
    short, long_report = studies
    if case == "missing folder":
        args, expected = [str(short), str(tmp_path / "nope")], "(no such folder)"
    elif case == "one study":
        args, expected = [str(short)], "needs at least two study or report folders"
    elif case == "same study twice":
        args, expected = [str(short), f"{short}/"], f"{short} is given twice"
    elif case == "no results":
        bare = tmp_path / "bare"
        bare.mkdir()
        (bare / "study.json").write_text("{}")
        args, expected = [str(short), str(bare)], "no results in"
    elif case == "no common objectives":
        other = make_study_dir(tmp_path / "other")
        renamed = pl.read_parquet(other / "results.parquet").with_columns(
            (pl.col("label") + " v2").alias("label")
        )
        renamed.write_parquet(other / "results.parquet")
        args, expected = [str(short), str(other)], "no common objectives: short has"
    else:
        old = tmp_path / "old-report"
        old.mkdir()
        (old / "report.md").write_text("# old\n")
        args, expected = [str(short), str(old)], "is a report folder without its tables"
    done = ablate("compare", *args, "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]
    assert "Traceback" not in done.stderr


def test_a_label_missing_a_task_somewhere_is_compared_like_for_like(tmp_path):
    """BERT's final MRPC fine-tune is missing in one study (a deadline cut it): it has no GLUE
    score there, so beside the usual section a like-for-like one averages the task every
    objective has in every study, labelled with it (issue 72)."""
    first, second = make_study_dir(tmp_path / "a"), make_study_dir(tmp_path / "b")
    cut = (
        (pl.col("label") == "BERT")
        & (pl.col("task") == "mrpc")
        & (pl.col("checkpoint_fraction") == 1)
    )
    rows = pl.read_parquet(second / "results.parquet").filter(~cut)
    rows.write_parquet(second / "results.parquet")
    text = write_comparison([first, second], tmp_path / "c").read_text(encoding="utf-8")
    usual = text.split("## GLUE\n", 1)[1].split("\n## ", 1)[0]
    bert = next(line for line in usual.splitlines() if line.startswith("| BERT |"))
    assert bert.endswith("| — | — |")  # no GLUE score at b's final checkpoint
    like = text.split("## GLUE, like for like\n", 1)[1].split("\n## ", 1)[0]
    assert like.startswith(
        "\nGLUE score like for like, over the task every objective has in every study: cola."
    )
    bert = next(line for line in like.splitlines() if line.startswith("| BERT |"))
    assert "—" not in bert and bert.count("1 × 3") == 2
    assert (tmp_path / "c" / "glue_like_for_like_compare_vs_flops.png").is_file()
    assert text.count("### GLUE: compute efficiency") == 1
