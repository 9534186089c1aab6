"""``electra_ablate.api``, the notebook face, on the committed ``reports/long_budget`` (its
tables kept beside ``report.md``; nothing is trained):

- its numbers are the report's: scores as ``summary.csv`` holds them, differences and claims as
  ``report.md`` prints them, multipliers and crossovers as the committed CSVs;
- its figures are the report's, byte for byte (both drawn here, so fonts cannot differ);
- its names and signatures are the promised ones (a change to the face fails here first);
- ``docs/notebook.md`` runs: every ```python block in order, in one namespace, from the
  repository's root; each value its comments show is the one computed, and the numbers it says
  come from the report are in ``report.md``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import re
from pathlib import Path

import matplotlib
import polars as pl
import pytest

from electra_ablate import api
from electra_ablate.analysis.results import summary_table
from electra_ablate.analysis.stats import Difference
from electra_ablate.infra.errors import InputError
from electra_ablate.report import plots, write_report
from electra_ablate.report.document import write_csv
from electra_ablate.report.efficiency import times
from electra_ablate.report.verdicts import difference_text, interval, signed

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "long_budget"
PAGE = ROOT / "docs" / "notebook.md"
FAMILIES = ["glue", "rtd_probe", "glue_probe"]


@pytest.fixture(scope="module")
def tables() -> api.Tables:
    return api.load(REPORT)


@pytest.fixture(scope="module")
def report_md() -> str:
    return (REPORT / "report.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ the numbers


def test_load_gives_the_folders_tables(tables):
    assert tables.name == "long_budget" and tables.folder == REPORT
    assert tables.study == json.loads((REPORT / "study.json").read_text())
    assert tables.runs.height == pl.read_parquet(REPORT / "runs.parquet").height
    assert tables.pretrain_metrics.equals(pl.read_parquet(REPORT / "pretrain_metrics.parquet"))
    assert tables.results.height == pl.read_parquet(REPORT / "results.parquet").height
    assert api.families(tables) == FAMILIES and api.final_fraction(tables) == 1.0


def test_scores_are_the_reports_summary(tables, tmp_path):
    """Every family's scores, with their intervals, make the committed ``summary.csv``."""
    scores = pl.concat([api.scores(tables, family) for family in FAMILIES])
    write_csv(summary_table(scores, FAMILIES), tmp_path / "summary.csv")
    assert (tmp_path / "summary.csv").read_text() == (REPORT / "summary.csv").read_text()


@pytest.mark.parametrize("family", ["glue", "rtd_probe"])
def test_differences_are_the_reports_pairs_table(tables, report_md, family):
    found = api.differences(tables, family)
    assert found.height == 3
    for d in found.iter_rows(named=True):
        row = (
            f"| {d['a']} | {d['b']} | {signed(d['difference'])} | "
            f"{interval(d['ci_low'], d['ci_high'], sign=True)} | "
            f"{'paired' if d['paired'] else 'unpaired'} | {d['n_pretrain']} × {d['n_finetune']} "
            f"| {d['verdict']} |"
        )
        assert row in report_md


def test_the_measured_ordering_line_is_a_difference(tables, report_md):
    """The GLUE ordering's step, as the report words it, from the frame's numbers."""
    d = api.differences(tables, "glue", pairs=[("electra", "bert_mlm")]).row(0, named=True)
    step = f"{d['a']} − {d['b']}: {difference_text(_difference(d))} → {d['verdict']}"
    assert f"- {step}" in report_md  # electra − bert_mlm: +1.29 [−1.63, +4.22], paired, ...


def test_differences_without_an_interval_say_so(tables, report_md):
    """The GLUE probes ran one model per arm: no pair has an interval, as the report says."""
    found = api.differences(tables, "glue_probe")
    assert found.height == 3 and found["ci_low"].is_nan().all()
    assert "none of the 3 pairs has an interval" in report_md
    assert set(found["verdict"]) == {"no interval: unresolved"}


def test_differences_at_another_checkpoint_are_the_crossover_tables_start(tables, report_md):
    """The GLUE crossovers' first-budget difference is the paired difference at 25%: inside
    the noise floor, so the report draws no row (it says so) and ``crossovers.csv`` has it."""
    d = api.differences(tables, "glue", at=0.25, pairs=[("bert_mlm", "electra")])
    d = d.row(0, named=True)
    crossovers = pl.read_csv(REPORT / "crossovers.csv")
    row = crossovers.filter(
        (pl.col("score") == "glue") & (pl.col("a") == "bert_mlm") & (pl.col("b") == "electra")
    ).row(0, named=True)
    assert row["a_minus_b_start"] == pytest.approx(d["difference"], abs=1e-3)
    assert "no crossover of bert_mlm and electra" in report_md
    assert d["ci_low"] < 0 < d["ci_high"]  # why: the interval holds no difference


def test_claims_are_the_reports_claims_table(tables, report_md):
    claims = api.claims(tables)
    assert claims.height == 1
    c = claims.row(0, named=True)
    gap = signed(c["paper_a"] - c["paper_b"])
    shown = f"{signed(c['difference'])} {interval(c['ci_low'], c['ci_high'], sign=True)}"
    row = (
        f"| {c['claim']} | {c['paper_a']:.1f} vs {c['paper_b']:.1f} ({gap}) | "
        f"{c['a']} − {c['b']} | {shown} | {c['n_pretrain']} × {c['n_finetune']}, paired | "
        f"**{c['verdict']}** (fine-tuning noise only) |"
    )
    assert c["finetune_noise_only"] and c["paired"]
    assert row in report_md
    assert f"({c['a']} − {c['b']}): {c['plan']}. Its cost: `{c['command']}`" in report_md


def test_efficiency_tables_are_the_committed_csvs(tables, tmp_path):
    found = [api.efficiency(tables, family) for family in FAMILIES]
    for name, table in (
        ("compute_efficiency.csv", api.multiplier_table(*found)),
        ("crossovers.csv", api.crossover_table(*found)),
    ):
        write_csv(table, tmp_path / name)
        assert (tmp_path / name).read_text() == (REPORT / name).read_text(), name


def test_a_subset_changes_no_other_number(tables):
    """Each arm and pair draws its own resamples: leaving a label out moves nothing else."""
    subset = dataclasses.replace(
        tables, results=tables.results.filter(pl.col("label") != "no pre-training")
    )
    whole = api.differences(tables, "glue", pairs=[("electra", "bert_mlm")])
    assert api.differences(subset, "glue").equals(whole)


def test_what_cannot_be_answered_is_one_input_error(tables):
    with pytest.raises(InputError, match="no 'sst' results.*glue, rtd_probe, glue_probe"):
        api.scores(tables, "sst")
    with pytest.raises(InputError, match="no 'glue' score at 1 for bert: the labels with one"):
        api.differences(tables, "glue", pairs=[("electra", "bert")])
    with pytest.raises(InputError, match="no checkpoint at 0.3 .*0.125, 0.25, 0.5, 1"):
        api.claims(tables, at=0.3)
    empty = dataclasses.replace(tables, results=None, pretrain_metrics=None)
    with pytest.raises(InputError, match="no evaluation results"):
        api.differences(empty, "glue")
    with pytest.raises(InputError, match="no pre-training metrics"):
        api.curves_figure(empty)


# ------------------------------------------------------------------------------ the figures


@pytest.fixture(scope="module")
def report_folder(tmp_path_factory) -> Path:
    """The report regenerated here from its tables, figures drawn on this machine."""
    out = tmp_path_factory.mktemp("report")
    write_report(REPORT, out)
    return out


def test_the_figures_are_the_reports(tables, report_folder, tmp_path):
    figures = {"pretrain_curves": api.curves_figure(tables)}
    for family in FAMILIES:
        found = api.efficiency(tables, family)
        figures[f"{family}_vs_flops"] = api.scores_figure(tables, family)
        figures[f"{family}_tasks_vs_flops"] = api.tasks_figure(tables, family)
        figures[f"{family}_efficiency"] = api.efficiency_figure(tables, family, found)
    # a family with nothing outside its noise floor draws no efficiency figure (issue 72)
    figures = {stem: f for stem, f in figures.items() if f is not None}
    assert all(isinstance(f, matplotlib.figure.Figure) for f in figures.values())
    written = sorted(p.stem for p in report_folder.glob("*.png"))
    assert sorted(figures) == written
    for stem, figure in figures.items():
        for path in plots.save_figure(figure, tmp_path, stem):
            assert path.read_bytes() == (report_folder / path.name).read_bytes(), path.name


def test_the_regenerated_report_is_the_committed_one(report_folder):
    """The refactoring that lets the face return figures left the report as it was."""
    assert (report_folder / "report.md").read_text() == (REPORT / "report.md").read_text()


# ------------------------------------------------------------------------------ the promise

PROMISED = {
    "Tables": "(folder, study, results, runs, pretrain_metrics)",
    "claims": "(tables, at=None)",
    "crossover_table": "(*found)",
    "curves_figure": "(tables)",
    "differences": "(tables, family, at=None, pairs=None)",
    "efficiency": "(tables, family)",
    "efficiency_figure": "(tables, family, found=None)",
    "families": "(tables)",
    "final_fraction": "(tables)",
    "load": "(folder)",
    "multiplier_table": "(*found)",
    "paper_scores": "(tables, family)",
    "scores": "(tables, family)",
    "scores_figure": "(tables, family)",
    "task_scores": "(tables, family)",
    "tasks_figure": "(tables, family)",
}
"""Every name of the face with its parameters: kept across minor versions (a name may be added
here; one removed or changed breaks notebooks, and must warn for a minor version first)."""


COLUMNS = {
    "scores": "family label objective checkpoint_fraction median min max q1 q3 n flops_paper "
    "flops_standard ci_low ci_high n_pretrain n_finetune",
    "paper_scores": "family label objective checkpoint_fraction score_paper flops_paper "
    "flops_standard",
    "task_scores": "family label objective checkpoint_fraction task metric headline in_aggregate "
    "median min max q1 q3 n flops_paper flops_standard",
    "differences": "a b difference ci_low ci_high se dof paired n_pretrain n_finetune verdict",
    "claims": "claim source paper_a paper_b a b difference ci_low ci_high paired n_pretrain "
    "n_finetune verdict finetune_noise_only plan command",
    "multiplier_table": "score a b flops multiplier ci_low ci_high kind n_pretrain n_finetune",
    "crossover_table": "score a b flops_min flops_max kind crossover ci_low ci_high crossings "
    "a_minus_b_start verdict_start a_minus_b_end verdict_end",
}
"""The columns of every frame the face returns: kept (a frame may gain columns, never lose one)."""


def test_the_frames_keep_their_columns(tables):
    found = api.efficiency(tables, "glue")
    frames = {
        "scores": api.scores(tables, "glue"),
        "paper_scores": api.paper_scores(tables, "glue"),
        "task_scores": api.task_scores(tables, "glue"),
        "differences": api.differences(tables, "glue"),
        "claims": api.claims(tables),
        "multiplier_table": api.multiplier_table(found),
        "crossover_table": api.crossover_table(found),
    }
    for name, frame in frames.items():
        missing = set(COLUMNS[name].split()) - set(frame.columns)
        assert not missing, f"{name} lost {sorted(missing)}"
    empty = api.claims(dataclasses.replace(tables, runs=None))  # no arms: no claim, same columns
    assert empty.is_empty() and empty.columns == COLUMNS["claims"].split()


def test_the_face_keeps_its_names_and_signatures():
    assert set(api.__all__) == {*PROMISED, "Efficiency"}
    for name, expected in PROMISED.items():
        signature = inspect.signature(getattr(api, name))
        bare = signature.replace(
            parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
            return_annotation=signature.empty,
        )
        assert str(bare) == expected, name


# ------------------------------------------------------------------------------ the guide

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def run_page(text: str) -> tuple[dict, list[tuple[str, object, object]]]:
    """Every ```python block of ``text``, statement by statement, in one namespace; for an
    expression followed by a comment that is a Python literal (``# (35.2, 33.1, 37.2)``), the
    pair (expression, value, literal) to compare."""
    namespace: dict = {"__name__": "notebook"}
    shown = []
    for match in BLOCK.finditer(text):
        block, offset = match.group(1), text.count("\n", 0, match.start(1))
        lines = block.splitlines()
        for statement in ast.parse(block).body:
            end = statement.end_lineno  # in the block; a traceback names the page's line
            ast.increment_lineno(statement, offset)
            code = ast.Module(body=[statement], type_ignores=[])
            if not isinstance(statement, ast.Expr):
                exec(compile(code, str(PAGE), "exec"), namespace)
                continue
            value = eval(compile(ast.Expression(statement.value), str(PAGE), "eval"), namespace)
            after = lines[end] if end < len(lines) else ""
            if after.startswith("# "):
                try:
                    literal = ast.literal_eval(after[2:])
                except (ValueError, SyntaxError):
                    continue  # a table or prose: read, not compared
                shown.append((ast.unparse(statement), value, literal))
    return namespace, shown


def test_the_notebook_page_reproduces_the_report(report_md, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)
    ns, shown = run_page(PAGE.read_text(encoding="utf-8"))
    text = " ".join(PAGE.read_text(encoding="utf-8").split())  # prose, lines joined
    assert len(shown) >= 8
    for expression, value, literal in shown:
        assert value == literal, expression

    # GLUE: electra's score per model with its CI, in the measured ordering
    e = ns["electra"]
    score = f"{e['median']:.1f} [{e['ci_low']:.1f}, {e['ci_high']:.1f}]"
    assert f"electra {score} > bert_mlm" in report_md and score in text
    # RTD probe: BERT above ELECTRA, paired
    d = ns["bert_vs_electra"]
    words = f"bert_mlm − electra: {difference_text(_difference(d))} → bert_mlm above electra"
    assert f"- {words}" in report_md and f"**{words}**" in text
    # the claim's seed plan, priced
    assert f"Its cost: `{ns['claim']['command']}`" in report_md
    # compute efficiency: ELECTRA's final RTD-probe score costs BERT 0.16x its FLOPs
    m = ns["electra_final"]
    multiplier = f"{times(m['multiplier'])} [{times(m['ci_low'])}, {times(m['ci_high'])}]"
    assert f"| {multiplier} |" in report_md and f"**{multiplier}**" in text
    assert not math.isnan(m["ci_low"])


def _difference(row: dict) -> Difference:
    """A ``differences`` row as the ``stats.Difference`` the report's wording takes."""
    return Difference(
        label_a=row["a"],
        label_b=row["b"],
        value=row["difference"],
        ci_low=row["ci_low"],
        ci_high=row["ci_high"],
        se=row["se"],
        dof=row["dof"],
        n_pretrain=row["n_pretrain"],
        n_finetune=row["n_finetune"],
        paired=row["paired"],
    )
