"""Reports that lead with what they can say (issue 69): "At a glance" on the first screen,
the compute-efficiency section's headline pairs and a figure of bounded height, task headers
that name their checkpoint, no published number beside a variant of the paper's setting, and
table headers that say what their cells hold."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from matplotlib.image import imread
from test_report import make_study_dir, table_row

from electra_ablate.analysis import paper
from electra_ablate.analysis.efficiency import Curve, Efficiency, Multiplier
from electra_ablate.evaluation.task import describe_family
from electra_ablate.pretraining.registry import available_objectives
from electra_ablate.report import write_report
from electra_ablate.report.efficiency import MAX_HEIGHT, efficiency_figure
from electra_ablate.report.plots import objective_colors, save_figure
from electra_ablate.report.pretraining import one_class_note


@pytest.fixture(scope="module")
def text(synthetic) -> str:
    """The synthetic study's report (``conftest.synthetic``)."""
    return synthetic.text


@pytest.fixture(scope="module")
def one_seed_text(one_seed) -> str:
    """The synthetic study's report with one fine-tuning seed (``conftest.one_seed``)."""
    return one_seed.text


def glance(text: str) -> str:
    return text.split("## At a glance", 1)[1].split("\n## ", 1)[0]


def test_the_first_screen_holds_the_outcome_the_headline_and_what_is_unresolved(text):
    # before the provenance table, so before everything else
    assert text.index("## At a glance") < text.index("## Provenance") < text.index("| Command |")
    lead = glance(text)
    assert "**Plan**: 4 pre-training runs: 3 done, 1 failed; wall time 2 h 02 min." in lead
    # each objective against BERT's MLM (the paper's baseline), with its interval
    headline = next(x for x in lead.splitlines() if x.startswith("- **Headline**"))
    assert "each label minus BERT [95% CI]" in headline
    assert "ELECTRA +6.0 [+6.0, +6.0] (resolved)" in headline
    assert "All-tokens +1.0 [+1.0, +1.0] (resolved)" in headline
    assert "no pre-training" not in headline and "BERT +" not in headline
    assert "- **No score** at 100% of the budget: Replace MLM" in lead  # its run failed
    assert len(text[: text.index("## Provenance")].splitlines()) < 15


def test_one_seed_says_once_on_the_first_screen_why_nothing_is_resolved(one_seed_text):
    lead = glance(one_seed_text)
    assert "- **Unresolved**: every difference. One model per label" in lead
    assert lead.count("no interval") == 1  # said once, not per label


def test_reused_runs_are_counted_on_the_first_screen(tmp_path):
    folder = make_study_dir(tmp_path / "reused")
    runs = pl.read_parquet(folder / "runs.parquet")
    runs.with_columns(
        pl.when(pl.col("label") == "BERT")
        .then(pl.lit("identical run reused from smoke"))
        .otherwise(pl.col("message"))
        .alias("message")
    ).write_parquet(folder / "runs.parquet")
    text = write_report(folder).read_text(encoding="utf-8")
    assert "3 done (1 reused from an identical finished run), 1 failed" in glance(text)
    # the runs table says it once, not in a message per row
    assert "(1 reused: identical runs from `smoke`)" in text
    assert "identical run reused from smoke" not in text


def test_the_efficiency_section_shows_the_headline_pairs_and_says_where_the_rest_are(text):
    section = text.split("## Compute efficiency", 1)[1].split("\n## ", 1)[0]
    assert "Each objective against BERT here; every other pair is in" in section
    rows = [x for x in section.splitlines() if x.startswith("| ") and " | " in x[2:]]
    pairs = {tuple(x.split(" | ")[:2]) for x in rows if not x.startswith("| A |")}
    assert ("| ELECTRA", "BERT") in pairs and ("| BERT", "ELECTRA") in pairs
    assert ("| ELECTRA", "All-tokens") not in pairs and ("| All-tokens", "ELECTRA") not in pairs
    # a reference evaluated without pre-training keeps its crossovers
    assert ("| Replace MLM", "no pre-training") in pairs


def test_the_efficiency_figure_stays_short_with_many_objectives(tmp_path):
    labels = [f"objective {i:02d}" for i in range(20)]
    flops = (1e14, 2e14, 4e14, 8e14)
    curves = {x: Curve(x, flops, ()) for x in ["BERT", *labels]}
    multipliers = [
        Multiplier(a, b, f, 2.0, 1.5, 3.0, "estimate", 3, 3, "estimate")
        for x in labels
        for a, b in ((x, "BERT"), ("BERT", x))
        for f in flops
    ]
    found = Efficiency("glue", curves, multipliers, [])
    colors = objective_colors({x: x for x in curves})
    fig = efficiency_figure(found, describe_family("glue"), pl.DataFrame(), colors, "BERT")
    (png, _) = save_figure(fig, tmp_path, "glue_efficiency")
    height, width = imread(png).shape[:2]
    assert height <= round(MAX_HEIGHT * 120) <= 2000 and width <= 1100
    # tick labels: no two of a panel's x labels overlap
    for ax in fig.axes:
        boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
        assert boxes and not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:], strict=False))


def test_a_variant_of_the_papers_setting_gets_no_paper_number_and_a_deviation(tmp_path):
    folder = make_study_dir(tmp_path / "variant")
    runs = pl.read_parquet(folder / "runs.parquet")
    runs.with_columns(
        pl.when(pl.col("label") == "ELECTRA")
        .then(pl.lit(json.dumps({"mask_rate": 0.25})))
        .otherwise(pl.col("params_json"))
        .alias("params_json")
    ).write_parquet(folder / "runs.parquet")
    study = json.loads((folder / "study.json").read_text())
    study["spec"]["objectives"] = [
        {"name": "electra", "label": "ELECTRA", "params": {"mask_rate": 0.25}}
    ]
    (folder / "study.json").write_text(json.dumps(study))
    text = write_report(folder).read_text(encoding="utf-8")
    assert table_row(text, "1 | ELECTRA").endswith("| 99.0 (99.0–99.0) |  |")  # no 85.0
    assert table_row(text, "3 | BERT").endswith("| 82.2 |")
    assert "*No Paper Table 5 value* beside ELECTRA (mask_rate 0.25 (the paper: 0.15))" in text
    deviations = table_row(text, "Deviations from the paper")
    assert "`ELECTRA`: mask_rate 0.25 (the paper: 0.15)" in deviations


@pytest.mark.parametrize("objective", sorted(available_objectives()))
def test_an_objective_at_its_defaults_is_the_papers_setting(objective):
    """Every installed objective's defaults are the paper's (the departures declared with its
    params), so a default arm keeps its published number."""
    runs = pl.DataFrame(
        {"label": ["x"], "objective": [objective], "params_json": ["{}"], "variant": [None]}
    )
    assert paper.setting_departures(runs) == {}


def test_the_claims_table_headers_say_what_their_cells_hold(one_seed_text):
    head = next(x for x in one_seed_text.splitlines() if x.startswith("| Claim |"))
    assert "| Our labels: A − B | Ours: A − B |" in head
    assert "Ours (A − B)" not in one_seed_text


REPORTS = Path(__file__).resolve().parents[2] / "reports"


def test_the_committed_reports_lead_with_a_glance():
    """Those that regenerate (a ``study.json`` beside them) were regenerated."""
    for report in sorted(p.parent / "report.md" for p in REPORTS.glob("*/study.json")):
        text = report.read_text(encoding="utf-8")
        assert "## At a glance" in text.split("## Provenance", 1)[0], report.parent.name


def test_a_one_class_detector_accuracy_is_named_not_read_as_learning():
    rows = [
        {"label": x, "pretrain_seed": 0, "step": s, "split": split, "disc_acc": acc,
         "disc_auc": auc}
        for x, acc, auc in (("ELECTRA 15%", 1.0, 0.5), ("ELECTRA", 0.91, 0.74))
        for s in (10, 20)
        for split in ("train", "heldout")
    ]  # fmt: skip
    note = one_class_note(pl.DataFrame(rows), ["ELECTRA 15%", "ELECTRA"])
    assert note.startswith("*One class at the scored positions*: ELECTRA 15% (1.00 beside AUC")
    assert "ELECTRA (" not in note
    assert one_class_note(pl.DataFrame(rows[4:]), ["ELECTRA"]) == ""
