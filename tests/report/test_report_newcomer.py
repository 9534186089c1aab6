"""Reports that say what they are (issue 43): the spec's description in the header, one pilot
sentence when nothing has a variance, no table of unresolved pairs, tasks every model scores
alike marked, figure subtitles and legends that describe what is drawn."""

from __future__ import annotations

import polars as pl
import pytest
from shared_reports import Drawn, smoke_description

from electra_ablate.analysis.results import constant_tasks, task_scores


@pytest.fixture(scope="module")
def three_seeds(synthetic) -> Drawn:
    """The synthetic study's report: three fine-tuning seeds per label (``conftest``)."""
    return synthetic


def test_the_header_shows_the_specs_description_under_the_title(plumbing):
    """The synthetic study described as the smoke study is (``conftest.plumbing``)."""
    description = smoke_description()
    assert description.strip()
    text = plumbing.text
    assert text.startswith(f"# Study `synthetic`\n\n*{description}*\n\n## At a glance\n\n")


def test_no_description_adds_nothing(three_seeds):
    text = three_seeds.text
    assert text.startswith("# Study `synthetic`\n\n## At a glance\n\n")
    assert "## Provenance\n\n|  |  |" in text


def test_with_one_model_per_arm_the_pairs_are_one_line_and_the_pilot_is_said_once(one_seed):
    text = one_seed.text
    assert "no interval: unresolved |" not in text  # no table row of them
    assert "none of the 6 pairs has an interval" in text
    assert text.count("A pilot with 3 pre-training × 3 fine-tuning seeds") == 1
    assert text.count("--dry-run --set") == 1
    # one seed: no measured noise floor, so one line and no multiplier table (issue 72)
    assert "there is no measured noise floor, so no multiplier or crossover is drawn" in text
    assert "Multipliers (B's compute" not in text


def test_a_rewritten_report_removes_an_efficiency_figure_it_no_longer_draws(one_seed):
    assert "glue_efficiency" not in one_seed.text
    assert not list(one_seed.report.glob("glue_efficiency.*"))


def test_pairs_with_intervals_keep_their_table(three_seeds):
    text = three_seeds.text
    assert "| A | B | A − B | 95% CI |" in text


def test_a_task_every_model_scores_alike_is_marked_in_the_table_and_figure(three_seeds):
    text, figures = three_seeds.text, three_seeds.figures
    # the synthetic study's wnli is 99.0 for every model, the baseline included
    # at the checkpoint it holds (issue 69: an earlier one may differ)
    assert "wnli (accuracy, not in GLUE; every model 99.0 at 100%)" in text
    assert "*Every model gives one value at 100% of the budget*, the no-pre-training" in text
    titles = [ax.get_title() for ax in figures["glue_tasks_vs_flops"].axes]
    assert any(t.startswith("wnli") and "every model 99.0 at 100%" in t for t in titles)
    assert not any(t.startswith("cola") and "every model" in t for t in titles)


def test_constant_tasks_needs_every_model_baseline_included():
    rows = [
        {"label": "a", "objective": "electra", "checkpoint_fraction": 1.0, "value": 44.5},
        {"label": "b", "objective": "bert_mlm", "checkpoint_fraction": 1.0, "value": 44.5},
        {"label": "none", "objective": "none", "checkpoint_fraction": 0.0, "value": 44.5},
        {"label": "bigram", "objective": "bigram", "checkpoint_fraction": 0.0, "value": 60.0},
    ]
    tasks = pl.DataFrame(rows).with_columns(
        family=pl.lit("glue"),
        task=pl.lit("rte"),
        metric=pl.lit("accuracy"),
        headline=pl.lit(True),
        in_aggregate=pl.lit(True),
        flops_paper=pl.lit(1.0),
        flops_standard=pl.lit(1.0),
    )
    scored = task_scores(tasks)
    assert constant_tasks(scored, 1.0) == {"rte": 44.5}  # the reference scorer does not count
    baseline_differs = tasks.with_columns(
        value=pl.when(pl.col("label") == "none").then(50.0).otherwise(pl.col("value"))
    )
    assert constant_tasks(task_scores(baseline_differs), 1.0) == {}


@pytest.mark.parametrize(("seeds", "band"), [(3, True), (1, False)])
def test_the_subtitle_names_a_band_only_when_seeds_draw_one(request, seeds, band):
    drawn = request.getfixturevalue("three_seeds" if seeds > 1 else "one_seed")
    subtitle = drawn.figures["glue_tasks_vs_flops"].get_suptitle()
    assert ("band: min–max over seeds" in subtitle) is band


def test_the_probe_legend_draws_reference_rows_dotted_as_plotted(probed):
    figures = probed.figures
    legend = figures["rtd_probe_tasks_vs_flops"].legends[0]
    styles = {h.get_label(): (h.get_linestyle(), h.get_marker()) for h in legend.legend_handles}
    assert styles["bigram"] == (":", "None") and styles["token_identity"] == (":", "None")
    assert styles["ELECTRA"] == ("-", "o")
    glue = {h.get_label() for h in figures["glue_tasks_vs_flops"].legends[0].legend_handles}
    assert "bigram" not in glue  # not drawn there, so not in its legend
