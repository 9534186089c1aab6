"""``ablate report`` on a synthetic study directory whose scores are known in advance.

Scores are ``base + 10 * fraction + task offset + seed offset`` with seed offsets (-1, 0, +2),
so at the full budget every median is ``base + 10 + mean(task offsets)`` and every min–max
spread is 3. WNLI gets 99 everywhere: if it leaked into the GLUE score, every number would move.
Every label shares the seed offsets, so every paired difference is exact (a zero-width CI), while
each score's CI is the t interval over three models: 80 ± t(2) · sd(-1, 0, 2) · sqrt(3/2) / ...
(checked against ``stats`` rather than re-derived here).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import typer
from ablate_cli import ablate
from typer.testing import CliRunner

from electra_ablate.analysis.results import write_table
from electra_ablate.commands import report as report_command
from electra_ablate.infra.errors import AblateError
from electra_ablate.report import write_report

FRACTIONS = (0.125, 0.25, 0.5, 1.0)
SEED_OFFSETS = (-1.0, 0.0, 2.0)
TASKS = {"cola": ("matthews", 0.0), "mrpc": ("accuracy", 20.0), "wnli": ("accuracy", None)}
# label: (objective, base score, last checkpoint reached)
RUNS = {
    "ELECTRA": ("electra", 60.0, 1.0),
    "All-tokens": ("all_tokens_mlm", 55.0, 1.0),
    "BERT": ("bert_mlm", 54.0, 1.0),
    "Replace MLM": ("replace_mlm", 50.0, 0.25),
}
BASELINE = ("no pre-training", "none", 52.0)  # label, objective, score at "fraction 0"
# standard-convention FLOPs per paper-convention FLOP: equal paper budgets differ here
STANDARD_RATIO = {"electra": 1.5, "all_tokens_mlm": 1.8, "bert_mlm": 1.6, "replace_mlm": 1.55}
FAILURE = "loss became NaN at step 120"
STEMS = ("glue_vs_flops", "glue_tasks_vs_flops", "pretrain_curves")
SUMMARY_INTERVALS = ["ci_low", "ci_high", "n_pretrain", "n_finetune"]


def result_row(label, objective, fraction, seed, task, name, headline, value, ratio=1.5):
    return {
        "study": "synthetic",
        "run_id": f"run-{objective}",
        "objective": objective,
        "label": label,
        "pretrain_seed": 0,
        "checkpoint_fraction": fraction,
        "pretrain_step": int(800 * fraction),
        "flops_paper": 4e15 * fraction,
        "flops_standard": ratio * 4e15 * fraction,
        "task": task,
        "finetune_seed": seed,
        "metric": name,
        "headline": headline,
        "value": value,
        "train_examples": 1000 if task == "cola" else 3668,
        "wall_s": 2.0,
    }


def result_rows() -> list[dict[str, object]]:
    rows = []
    points = [
        (label, objective, base, f)
        for label, (objective, base, last) in RUNS.items()
        for f in FRACTIONS
        if f <= last
    ]
    points.append((BASELINE[0], BASELINE[1], BASELINE[2] - 10.0, 0.0))  # 52 at fraction 0
    for label, objective, base, fraction in points:
        for seed, seed_offset in enumerate(SEED_OFFSETS):
            for task, (metric, offset) in TASKS.items():
                value = 99.0 if offset is None else base + 10 * fraction + offset + seed_offset
                if objective == "none":
                    value = 99.0 if offset is None else BASELINE[2] + offset + seed_offset
                metrics = [(metric, True, value)]
                if task == "mrpc":
                    metrics.append(("f1", False, value + 5.0))
                for name, headline, v in metrics:
                    ratio = STANDARD_RATIO.get(objective, 1.5)
                    rows.append(
                        result_row(label, objective, fraction, seed, task, name, headline, v, ratio)
                    )
    return rows


def pretrain_rows() -> pl.DataFrame:
    """Known curves: BERT's MLM leaves the plateau (0.1 nats) at step 300 and ELECTRA's
    discriminator reaches AUC 0.6 at step 400 (both linear in the step, no noise)."""
    rows = []
    for label, (objective, _, last) in RUNS.items():
        for step in range(25, int(800 * last) + 1, 25):
            for split in ("train", "heldout") if step % 200 == 0 else ("train",):
                rtd = objective in ("electra", "all_tokens_mlm", "replace_mlm")
                nats = (step - 200) / 1000  # 0.1 at step 300
                rows.append(
                    {
                        "run_id": f"run-{objective}",
                        "variant": None,
                        "objective": objective,
                        "label": label,
                        "pretrain_seed": 0,
                        "step": step,
                        "flops_paper": 5e12 * step,
                        "flops_standard": 7.5e12 * step,
                        "split": split,
                        "loss": 10.0 / (1 + step / 100),
                        "mlm_nats_learnt": None if rtd else nats,
                        "mlm_acc": None if rtd else 0.4,
                        "gen_mlm_nats_learnt": -0.05 if rtd else None,
                        "gen_entropy": 7.0 if rtd else None,
                        "disc_auc": 0.5 + step / 4000 if objective == "electra" else None,
                        "tokens_per_s": 7000.0,
                    }
                )
    return pl.DataFrame(rows)


def runs_table() -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "run_id": f"run-{objective}",
                "variant": None,
                "objective": objective,
                "label": label,
                "pretrain_seed": 0,
                "params_json": "{}",
                "status": "done" if last == 1.0 else "failed",
                "message": "" if last == 1.0 else FAILURE,
                "steps": int(800 * last),
                "flops_paper": 4e15 * last,
                "flops_standard": 6e15 * last,
                "wall_s": 3725.0,
            }
            for label, (objective, _, last) in RUNS.items()
        ]
    )


def make_study_dir(directory: Path) -> Path:
    directory.mkdir(parents=True)
    write_table(directory / "results.parquet", result_rows())
    pretrain_rows().write_parquet(directory / "pretrain_metrics.parquet")
    runs_table().write_parquet(directory / "runs.parquet")
    study = {
        "name": "synthetic",
        "spec_path": "studies/synthetic.yaml",
        "spec": {
            "backbone": {"preset": "micro", "overrides": {"dropout": 0.0}},
            "pretrain": {"prior_bias": ["mlm"], "learning_rate": 5e-4},
            "objectives": [],
        },
        "pretrain": {"prior_bias": ["mlm"], "learning_rate": 5e-4, "log_every": 25},
        "backbone": {"preset": "micro", "overrides": {}},
        "budget": {"flops": 4e15, "convention": "paper", "checkpoints": list(FRACTIONS)},
        "data": {"corpus": {"paths": ["corpus.txt.gz"]}, "glue": "glue-dir"},
        "finetune": {
            "tasks": list(TASKS),
            "seeds": [0, 1, 2],
            "caps": {"cola": 1000},
            "eval_caps": {"mrpc": 200},
            "recipe": {"lr": 3e-4},
        },
        "git_commit": "0123abc",
        "machine": "2-core test box",
        "command": "ablate run studies/synthetic.yaml",
        "started": "2026-01-02T03:04:05",
        "finished": "2026-01-02T05:06:07",
        "wall_s": 7322.0,
    }
    (directory / "study.json").write_text(json.dumps(study))
    return directory


@pytest.fixture(scope="module")
def study_dir(synthetic) -> Path:
    """The synthetic study's folder (``conftest.synthetic`` wrote its report; never changed)."""
    return synthetic.report.parent


@pytest.fixture(scope="module")
def report(synthetic) -> Path:
    path = synthetic.report / "report.md"
    REPORTS.insert(0, path.parent)
    return path


@pytest.fixture(scope="module")
def text(report) -> str:
    return report.read_text(encoding="utf-8")


def report_dir(text: str) -> Path:
    """The module's report folder (the fixtures write one)."""
    return REPORTS[0]


REPORTS: list[Path] = []


def table_row(text: str, first_cells: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {first_cells} |"))


def test_report_goes_to_run_dir_report_with_every_figure(study_dir, report, text):
    assert report == study_dir / "report" / "report.md"
    for stem in STEMS:
        for suffix in ("png", "svg"):
            assert (report.parent / f"{stem}.{suffix}").stat().st_size > 1000
        assert f"({stem}.png)" in text and f"({stem}.svg)" in text


def test_final_table_ranks_labels_with_both_aggregations_baseline_gap_and_paper_number(text):
    # ELECTRA: cola 60+10+0 = 70, mrpc 90, GLUE mean 80; seeds move it by -1/+2; none is 62
    assert table_row(text, "1 | ELECTRA") == (
        f"| 1 | ELECTRA | `electra` | 80.0 {ci_of('ELECTRA', 80)} | 1 × 3 | 80.0 "
        "| +18.0 [+18.0, +18.0] | 70.0 (69.0–72.0) | 90.0 (89.0–92.0) | 99.0 (99.0–99.0) | 85.0 |"
    )
    assert table_row(text, "2 | All-tokens").endswith(
        "| 1 × 3 | 75.0 | +13.0 [+13.0, +13.0] | 65.0 (64.0–67.0) | 85.0 (84.0–87.0) "
        "| 99.0 (99.0–99.0) | 84.3 |"
    )
    assert table_row(text, "3 | BERT").endswith("| 82.2 |")
    # the failed run never reached the final budget: unranked, paper number still beside it
    assert table_row(text, "— | Replace MLM") == (
        "| — | Replace MLM | `replace_mlm` | — | — | — | — | — | — | — | 82.4 |"
    )
    assert table_row(text, "— | no pre-training").startswith(
        "| — | no pre-training | `none` | 62.0 [5"
    )
    assert "| 1 × 3 | 62.0 | — | 52.0 (51.0–54.0) |" in table_row(text, "— | no pre-training")
    assert "wnli (accuracy, not in GLUE)" in text


def ci_of(label: str, median: float) -> str:
    """A label's 95% CI as the report prints it: its three models are its median + (-1, 0, +2),
    so ``stats`` on those three numbers alone (seeded by the label) gives the same interval."""
    from electra_ablate.analysis import stats

    values = np.array([[[median - 1.0], [median], [median + 2.0]]])
    s = stats.score(stats.ArmGrid(label, (0,), (0, 1, 2), ("t",), values))
    return f"[{s.ci_low:.1f}, {s.ci_high:.1f}]"


def ci_bounds(label: str, median: float) -> tuple[float, float]:
    from electra_ablate.analysis import stats

    values = np.array([[[median - 1.0], [median], [median + 2.0]]])
    s = stats.score(stats.ArmGrid(label, (0,), (0, 1, 2), ("t",), values))
    return s.ci_low, s.ci_high


def test_every_objective_is_compared_with_the_no_pretraining_baseline(text):
    assert (
        "Above it (95% CI of the difference above 0): ELECTRA (+18.0 [+18.0, +18.0]), "
        "All-tokens (+13.0 [+13.0, +13.0]), BERT (+12.0 [+12.0, +12.0])."
    ) in text
    assert "min–max spread" not in text and "gap > spread" not in text


def test_the_flops_gap_in_the_other_convention_is_stated(text):
    assert "counts 6.00e15 for ELECTRA up to 7.20e15 for All-tokens" in text
    assert "All-tokens got 20% more standard-convention FLOPs than ELECTRA" in text


def test_summary_csv_has_every_checkpoint_and_the_baseline(report):
    summary = pl.read_csv(report.parent / "summary.csv")
    assert summary.columns == [
        "objective",
        "label",
        "budget_fraction",
        "glue_median",
        "glue_min",
        "glue_max",
        "n",
        *SUMMARY_INTERVALS,
    ]
    baseline = summary.filter(pl.col("objective") == "none").row(0, named=True)
    low, high = ci_bounds("no pre-training", 62.0)
    assert baseline == {
        "objective": "none",
        "label": "no pre-training",
        "budget_fraction": 0.0,
        "glue_median": 62.0,
        "glue_min": 61.0,
        "glue_max": 64.0,
        "n": 3,
        "ci_low": pytest.approx(low, abs=1e-3),
        "ci_high": pytest.approx(high, abs=1e-3),
        "n_pretrain": 1,
        "n_finetune": 3,
    }
    electra = summary.filter(pl.col("label") == "ELECTRA").sort("budget_fraction")
    assert electra["budget_fraction"].to_list() == list(FRACTIONS)
    assert electra["glue_median"].to_list() == [71.25, 72.5, 75.0, 80.0]
    assert summary.filter(pl.col("label") == "Replace MLM").height == 2  # 12.5% and 25% only


def test_paper_aggregation_takes_task_medians_before_the_mean(tmp_path):
    """Seed 0 is best on cola and worst on mrpc: the per-model median (a mean per seed, then the
    median) and the paper's (a median per task, then the mean) differ, as they should."""
    values = {
        ("cola", 0): 60.0,
        ("cola", 1): 50.0,
        ("cola", 2): 40.0,
        ("mrpc", 0): 70.0,
        ("mrpc", 1): 90.0,
        ("mrpc", 2): 80.0,
    }
    rows = [
        result_row(
            "E",
            "electra",
            1.0,
            seed,
            task,
            "matthews" if task == "cola" else "accuracy",
            True,
            value,
        )
        for (task, seed), value in values.items()
    ]
    from electra_ablate.analysis.results import family_scores, paper_scores, read_results

    write_table(tmp_path / "results.parquet", rows)  # as an older table: no family column
    frame = read_results(tmp_path)
    assert paper_scores(frame)["score_paper"].to_list() == [65.0]  # (50 + 80) / 2
    assert family_scores(frame)["median"].to_list() == [65.0]  # per seed: 65, 70, 60
    values[("mrpc", 0)] = 100.0  # seed 0's GLUE 80: the per-model median becomes 65 -> 65
    rows = [
        result_row(
            "E", "electra", 1.0, seed, task, "matthews" if task == "cola" else "accuracy", True, v
        )
        for (task, seed), v in values.items()
    ]
    write_table(tmp_path / "results.parquet", rows)
    frame = read_results(tmp_path)
    assert paper_scores(frame)["score_paper"].to_list() == [70.0]  # (50 + 90) / 2
    assert family_scores(frame)["median"].to_list() == [70.0]  # per seed: 80, 70, 60


def test_ordering_line_reads_each_gap_from_the_ci_of_the_paired_difference(text):
    assert (
        f"ELECTRA 80.0 {ci_of('ELECTRA', 80)} > All-tokens 75.0 {ci_of('All-tokens', 75)} > "
        f"BERT 74.0 {ci_of('BERT', 74)}."
    ) in text
    # the score CIs overlap, yet the paired difference is exact: pairing is what resolves it
    assert (
        "- All-tokens − BERT: +1.00 [+1.00, +1.00], paired, 1 × 3 seeds → All-tokens above BERT"
    ) in text
    assert "*One pre-training seed*: the CI covers fine-tuning noise only." in text
    assert "| All-tokens | no pre-training | +13.00 | [+13.0, +13.0] | paired | 1 × 3 |" in text
    # the paper's order, and this study's scores listed in it, not as a ranking of its own
    assert "ELECTRA 85.0 > All-Tokens MLM 84.3 > Replace MLM 82.4 = ELECTRA 15% 82.4" in text
    assert "This study's scores, listed in the paper's order (not ranked): ELECTRA 80.0 [" in text


def test_glue_at_every_checkpoint_and_non_headline_metrics(text):
    assert "| Label | 12.5% | 25% | 50% | 100% |" in text
    # Replace MLM at 25%: 50 + 2.5 + 10 = 62.5; missing afterwards
    assert table_row(text, "Replace MLM | 61.2 (60.2–63.2); 61.2") == (
        "| Replace MLM | 61.2 (60.2–63.2); 61.2 | 62.5 (61.5–64.5); 62.5 | — | — |"
    )
    assert "| Label | mrpc (f1) |" in text
    assert "| ELECTRA | 95.0 (94.0–97.0) |\n" in text
    assert "### 50% of the budget (2.00e15 FLOPs, paper convention)" in text


def test_header_shows_provenance_recipe_deviations_budget_and_caps(text):
    for fact in (
        "# Study `synthetic`",
        "`ablate run studies/synthetic.yaml`",
        "`0123abc`",
        "2-core test box",
        "2 h 02 min",
        "| Pre-training FLOPs per run | 1.00e15–4.00e15 (paper convention), "
        "1.50e15–6.00e15 (standard convention) |",
        "12.5%, 25%, 50%, 100% of the budget",
        "| Fine-tuning seeds | 0, 1, 2 |",
        "lr=0.0003",
        "| Output biases | data priors for the mlm heads, zero elsewhere (an opt-in deviation) |",
        "| Deviations from the paper | dropout 0 in pre-training (the paper: 0.1); output biases "
        "of the mlm heads start at the data's priors (the original code: zero); learning-rate "
        "schedule, budget shape: warm-up 1% of each run, linear decay to zero at the budget's "
        "end (the paper: warm-up 10,000 steps, linear decay from step 0 to zero at step "
        "1,000,000, each run its first steps); bias-corrected AdamW (the original code: Adam "
        "without bias correction, pretrain.adam_bias_correction: false); plain normal "
        "initialisers (the original code: truncated normal, and Glorot for the embedding "
        "projection and the detection head's logit); our own uncased WordPiece vocabulary of "
        "30,522 tokens trained on the study's corpus (the paper: BERT's uncased vocabulary) |",
        "| Learning-rate schedule | budget shape: warm-up 1% of each run, linear decay to zero at "
        "the budget's end; every run: peak 5.00e-04, final 6.31e-07 |",
        "cola: capped at 1,000 examples (1,000 used)",
        "mrpc: full training set (3,668 examples), dev set capped at 200 examples",
    ):
        assert fact in text


def test_runs_table_lists_the_failed_run_with_its_message(text):
    assert "3 done, 1 failed." in text
    failed = table_row(text, "Replace MLM | `replace_mlm`")
    assert "**failed**" in failed and FAILURE in failed and "| 200 |" in failed


def test_diagnostics_say_when_each_model_left_its_prior(text):
    # BERT: nats = (step - 200) / 1000, smoothed over 5 logged points of 25 steps, reaches 0.1
    # at step 350 = 1.75e15 FLOPs; ELECTRA's AUC = 0.5 + step / 4000 reaches 0.6 at 450
    assert table_row(text, "Label | GLUE per model (final) [95% CI]") == (
        "| Label | GLUE per model (final) [95% CI] | gen_mlm_nats_learnt | mlm_nats_learnt "
        "| disc_auc |"
    )
    assert table_row(text, f"BERT | 74.0 {ci_of('BERT', 74)}").endswith(
        "| — | 0.600 (0.550); ≥ 0.1 at 1.75e15 | — |"
    )
    assert table_row(text, f"ELECTRA | 80.0 {ci_of('ELECTRA', 80)}").endswith(
        "| -0.050 (-0.050); never ≥ 0.1 | — | 0.700 (0.688); ≥ 0.6 at 2.25e15 |"
    )
    # the other kinds are in the CSV beside the report, with every crossing
    diagnostics = pl.read_csv(report_dir(text) / "diagnostics.csv")
    bert = diagnostics.filter(pl.col("label") == "BERT").row(0, named=True)
    assert bert["mlm_acc_heldout"] == 0.4 and bert["mlm_nats_learnt_crossing_flops"] == 1.75e15
    assert "gen_entropy_heldout" in diagnostics.columns
    assert "listed per run in [`diagnostics.csv`]" in text
    assert "negative, worse" in text
    # these curves have no *_incl_special twins: logged before AUC left out [CLS]/[SEP]
    assert "These runs were logged before detection metrics left out [CLS] and [SEP]" in text


def test_curve_panels_show_learning_diagnostics_never_the_lambda_scaled_total(study_dir):
    from electra_ablate.report.plots import curve_panels
    from electra_ablate.report.pretraining import curve_panel_specs

    metrics = pl.read_parquet(study_dir / "pretrain_metrics.parquet")
    names = [name for name, _, _ in curve_panels(metrics, curve_panel_specs(metrics))]
    assert names == ["gen_mlm_nats_learnt", "mlm_nats_learnt", "disc_auc", "gen_entropy", "mlm_acc"]
    assert "loss" not in names


def test_panels_and_columns_come_from_metric_kinds_not_from_a_list_of_names():
    """A metric no built-in objective logs reaches the report by its name's kind, and the
    figures over every position are labelled as such beside the ordinary-token ones."""
    from electra_ablate.report.pretraining import curve_panel_specs, diagnostics_section

    rows = [
        {
            "run_id": "r",
            "objective": "plugin",
            "label": "plugin",
            "pretrain_seed": 0,
            "step": step,
            "split": "train",
            "flops_paper": 1e12 * step,
            "probe_auc": 0.5 + step / 100,
            "disc_auc": 0.55,
            "disc_auc_incl_special": 0.57,
            "disc_precision": 0.9,
            "probe_loss": 1.0,
        }
        for step in range(1, 11)
    ]
    metrics = pl.DataFrame(rows)
    assert curve_panel_specs(metrics) == [
        ("disc_auc", "disc_auc: ROC-AUC"),
        ("disc_auc_incl_special", "disc_auc: ROC-AUC, incl. [CLS]/[SEP]"),
        ("probe_auc", "probe_auc: ROC-AUC"),
    ]
    text = diagnostics_section(metrics, ["plugin"])
    assert "| Label | disc_auc | probe_auc |" in text
    assert "| plugin | (0.550); never ≥ 0.6 | (0.580); never ≥ 0.6 |" in text
    assert "scored over ordinary tokens" in text and "`disc_auc_incl_special`" in text


def test_with_variants_each_objective_gets_its_panels_with_a_line_per_variant():
    from electra_ablate.report.plots import curve_panels
    from electra_ablate.report.pretraining import curve_panel_specs

    rows = [
        {
            "label": f"{label}@{variant}",
            "variant": variant,
            "mlm_nats_learnt": 0.1 if bert else None,
            "disc_auc": None if bert else 0.6,
        }
        for label, bert in (("bert_mlm", True), ("electra", False))
        for variant in ("a", "b")
    ]
    frame = pl.DataFrame(rows)
    panels = curve_panels(frame, curve_panel_specs(frame))
    assert [(name, group) for name, _, group in panels] == [
        ("mlm_nats_learnt", "bert_mlm"),
        ("disc_auc", "electra"),
    ]


def test_a_pretraining_only_study_gets_diagnostics_and_no_glue(tmp_path):
    directory = make_study_dir(tmp_path / "speed")
    (directory / "results.parquet").unlink()
    text = write_report(directory).read_text(encoding="utf-8")
    assert "## Pre-training: did each model learn, and when?" in text
    assert "Measured ordering" not in text and "Fine-tuning seeds" not in text
    summary = pl.read_csv(directory / "report" / "summary.csv")
    assert summary.columns == [
        "objective",
        "label",
        "budget_fraction",
        "glue_median",
        "glue_min",
        "glue_max",
        "n",
        *SUMMARY_INTERVALS,
    ]
    runs = pl.read_parquet(directory / "runs.parquet")
    assert summary.height == runs.height * len(FRACTIONS)  # every entry at every checkpoint
    assert sorted(set(summary["label"].to_list())) == sorted(runs["label"].to_list())
    assert summary["n"].to_list() == [0] * summary.height
    assert summary["glue_median"].null_count() == summary.height
    assert (directory / "report" / "pretrain_curves.png").stat().st_size > 1000


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def group() -> None:
        """Test CLI with the report command only."""

    report_command.register(app)
    return app


def test_cli_writes_the_same_report_again_and_prints_its_path(study_dir, report, tmp_path):
    result = CliRunner().invoke(cli(), ["report", str(study_dir), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    again = tmp_path / "r" / "report.md"
    assert result.stdout.strip() == str(again)  # stderr said what it was doing
    assert again.read_bytes() == report.read_bytes()
    for name in ("glue_vs_flops.svg", "pretrain_curves.png"):
        assert (again.parent / name).read_bytes() == (report.parent / name).read_bytes()


def test_cli_defaults_to_the_latest_study_under_runs(tmp_path, monkeypatch):
    make_study_dir(tmp_path / "runs" / "only-study")
    (tmp_path / "runs" / "not-a-study").mkdir()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli(), ["report"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(Path("runs/only-study/report/report.md"))


def test_cli_fails_in_one_line_without_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli(), ["report", "empty"])
    assert result.exit_code == 1  # the runner's code for an exception; `ablate` maps it to 2
    assert isinstance(result.exception, AblateError)
    assert str(result.exception) == (
        "no results in empty (no such folder): pass a study folder or a report folder"
    )
    result = CliRunner().invoke(cli(), ["report"])
    assert isinstance(result.exception, AblateError)
    assert "no study results under runs/" in str(result.exception)


NOTES = "The ordering holds, but the gaps are within the seed spread.\n"


@pytest.fixture(scope="module")
def noted(study_dir, tmp_path_factory) -> tuple[Path, Path]:
    """The synthetic study's report written with notes (a file without a heading of its own),
    once for the tests that read it: the notes file and the report."""
    notes = tmp_path_factory.mktemp("notes") / "mine.md"
    notes.write_text(NOTES)
    return notes, write_report(study_dir, notes.parent / "first", notes)


def test_notes_go_in_as_a_discussion_after_the_final_tables(study_dir, noted, tmp_path):
    text = noted[1].read_text(encoding="utf-8")
    discussion = text.index("## Discussion\n\nThe ordering holds, but the gaps")
    assert text.index("**Measured ordering**") < discussion
    result = CliRunner().invoke(
        cli(), ["report", str(study_dir), "--out", str(tmp_path / "r2"), "--notes", "missing.md"]
    )
    assert isinstance(result.exception, AblateError)
    assert str(result.exception).startswith("cannot read notes missing.md")


def test_an_objectives_params_away_from_the_paper_are_deviations_declared_by_the_objective():
    """The header names no objective: a param that declares the paper's value (two-stage's
    ``split_by``) and is set to another is listed, under the entry's label."""
    from electra_ablate.report.header import deviations

    spec = {
        # the paper's schedule and optimiser: no other setting's deviation in the way
        "pretrain": {
            "warmup_steps": 10_000,
            "decay_horizon_steps": 1_000_000,
            "adam_bias_correction": False,
        },
        "objectives": [
            {"name": "two_stage", "label": "2stage", "params": {"split_by": "flops"}},
            {"name": "two_stage", "label": "paper", "params": {"split_by": "steps"}},
            {"name": "not_installed_here", "params": {"split_by": "flops"}},
        ],
    }
    assert [d for d in deviations(spec) if d.startswith("`")] == [
        "`2stage`: split_by flops (the paper: steps)"
    ]


# --- re-reportable results, one seed, the paper's claims ------------------------------------


def without_dates(text: str) -> str:
    """A report's markdown less what may differ between two renderings of the same tables."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("| Date |"))


def test_a_report_folder_keeps_its_tables_and_reports_again_to_the_same_markdown(
    study_dir, report, tmp_path
):
    folder = report.parent
    for name in ("results.parquet", "runs.parquet", "pretrain_metrics.parquet", "study.json"):
        assert (folder / name).read_bytes() == (study_dir / name).read_bytes()
    assert "| Tables | `results.parquet`, `runs.parquet`, `pretrain_metrics.parquet` beside" in (
        report.read_text(encoding="utf-8")
    )
    again = write_report(folder, tmp_path / "again")
    assert without_dates(again.read_text(encoding="utf-8")) == without_dates(
        report.read_text(encoding="utf-8")
    )
    assert (tmp_path / "again" / "summary.csv").read_bytes() == (
        folder / "summary.csv"
    ).read_bytes()
    # and the regenerated folder is a source in turn
    third = write_report(tmp_path / "again", tmp_path / "third")
    assert third.read_text(encoding="utf-8") == again.read_text(encoding="utf-8")


def test_a_report_folder_regenerates_with_its_notes(noted, tmp_path):
    notes, first = noted
    assert (first.parent / "notes.md").read_text() == notes.read_text()
    second = write_report(first.parent, tmp_path / "second")  # no --notes: its own
    assert NOTES.strip() in second.read_text(encoding="utf-8")
    assert second.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")


def test_a_report_folder_without_tables_is_one_line_and_exit_2(tmp_path):
    """Reports committed before they kept their tables: `ablate report` says so and what to
    do, through the CLI's entry function."""
    old = tmp_path / "reports" / "objectives"
    old.mkdir(parents=True)
    (old / "report.md").write_text("# Study `objectives`\n")
    (old / "summary.csv").write_text("objective,label\n")
    done = ablate("report", old, "--out", tmp_path / "x")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {old} is a report folder without its tables (results.parquet, runs.parquet, "
        "pretrain_metrics.parquet): it was written before reports kept them; report its study "
        f"folder instead (`ablate report STUDY_DIR --out {old}`)"
    ]
    assert not (tmp_path / "x").exists()


def one_seed_study(directory: Path) -> Path:
    """The synthetic study with one fine-tuning seed: one model per label."""
    make_study_dir(directory)
    rows = pl.read_parquet(directory / "results.parquet").filter(pl.col("finetune_seed") == 0)
    rows.write_parquet(directory / "results.parquet")
    return directory


@pytest.fixture(scope="module")
def one_seed_report(one_seed) -> Path:
    """The report of ``one_seed_study`` (``conftest.one_seed``)."""
    return one_seed.report / "report.md"


def test_with_one_model_per_label_the_report_says_there_is_no_interval(one_seed_report):
    text = one_seed_report.read_text(encoding="utf-8")
    assert "gap > spread" not in text and "spread 0.00" not in text
    assert "*One model per objective* (one pre-training and one fine-tuning seed): no interval" in (
        text
    )
    # said once in the ordering's heading, not once per step and per cell
    assert (
        "(median GLUE score per model at 100% of the budget; one model each, so no step of it is "
        "resolved): ELECTRA 79.0 > All-tokens 74.0 > BERT 73.0." in text
    )
    assert "- ELECTRA − All-tokens:" not in text and "no CI" not in text
    # the two aggregations are the same number with one model: one column, and it says so
    assert "GLUE (paper)" not in table_row(text, "Rank | Label")
    assert "With one model per label the paper's aggregation gives the same GLUE." in text
    assert table_row(text, "1 | ELECTRA").startswith(
        "| 1 | ELECTRA | `electra` | 79.0 | +18.0 |"  # no seeds column: one model each
    )
    summary = pl.read_csv(one_seed_report.parent / "summary.csv")
    assert summary["n_finetune"].unique().to_list() == [1]
    assert summary["ci_low"].is_nan().all() or summary["ci_low"].is_null().all()


def test_claims_table_gives_each_covered_claim_our_difference_ci_and_verdict(text):
    section = text[text.index("## The paper's claims (GLUE at 100% of the budget)") :]
    section = section[: section.index("\n## ", 5)]
    # every label runs its objective's defaults; the paired differences are exact
    assert (
        "| ELECTRA 85.0 > All-Tokens MLM 84.3 | 85.0 vs 84.3 (+0.70) | ELECTRA − All-tokens "
        "| +5.00 [+5.0, +5.0] | **supported** (fine-tuning noise only) |"
    ) in section
    # the seeds are those of every claim: said once under the table, not in a column
    assert "| Seeds, draw |" not in section
    assert "Every claim above — Seeds, draw: 1 × 3, paired." in section
    assert "| ELECTRA 85.0 > BERT 82.2 | 85.0 vs 82.2 (+2.80) | ELECTRA − BERT |" in section
    assert "Replace MLM" not in section.split("|---|")[1]  # its run never reached the end
    assert "Seeds that would resolve" not in section  # nothing unresolved here


def test_a_study_with_no_variance_gets_one_pilot_sentence_not_one_per_claim(one_seed_report):
    text = one_seed_report.read_text(encoding="utf-8")
    assert "| ELECTRA − BERT | +6.00 | **unresolved at this power** |" in text
    assert "Every claim above — Seeds, draw: 1 × 1, paired." in text
    command = (
        "`ablate run studies/synthetic.yaml --dry-run --set "
        "'pretrain.seeds=[0, 1, 2]' --set 'finetune.seeds=[0, 1, 2]'`"
    )
    assert text.count(command) == 1
    assert "A pilot with 3 pre-training × 3 fine-tuning seeds measures it. Its cost: " in text
    assert "Seeds that would resolve each unresolved claim" not in text


def test_a_plan_command_keeps_the_studys_overrides_and_extends_its_seeds():
    from electra_ablate.analysis import stats
    from electra_ablate.report.verdicts import plan_command

    components = stats.VarianceComponents(0.5, 2.0, 3, 3, "test")
    plan = stats.seed_plan(components, 2.0)
    assert plan.cheapest is not None
    study = {
        "spec_path": "studies/objectives.yaml",
        "overrides": {"budget.flops": 5e13},
        "spec": {"pretrain": {"seeds": [7]}, "finetune": {"seeds": [0, 1, 2]}},
    }
    found = stats.Difference("a", "b", 1.0, -1.0, 3.0, 1.0, 2, 3, 3, True)
    command = plan_command(study, plan, found)
    p, f = plan.cheapest.n_pretrain, plan.cheapest.n_finetune
    pretrain = [7, *[s for s in range(p) if s != 7]][:p]
    assert command == (
        "ablate run studies/objectives.yaml --dry-run --set budget.flops=50000000000000.0 "
        f"--set 'pretrain.seeds={pretrain}' --set 'finetune.seeds={list(range(f))}'"
    )


def probe_rows() -> list[dict[str, object]]:
    """The GLUE rows with an RTD probe beside them: two encoders at two checkpoints, three
    seeds, and the two reference scorers (no encoder, fraction 0)."""
    rows = [
        {**r, "family": "glue", "in_aggregate": r["headline"] and r["task"] != "wnli"}
        for r in result_rows()
    ]
    probe = {"family": "rtd_probe", "in_aggregate": True, "headline": True, "metric": "roc_auc"}
    for label, objective, base in (("ELECTRA", "electra", 60.0), ("BERT", "bert_mlm", 70.0)):
        for fraction in (0.5, 1.0):
            for seed in range(3):
                row = result_row(label, objective, fraction, seed, "rtd_unigram", "", True, 0.0)
                rows.append({**row, **probe, "value": base + 10 * fraction + seed})
    for reference, value in (("bigram", 92.0), ("token_identity", 52.0)):
        for seed in range(3):
            row = result_row(reference, reference, 0.0, seed, "rtd_unigram", "", True, 0.0)
            rows.append({**row, **probe, "value": value + seed / 10})
    return rows


def test_probes_csv_has_every_probe_checkpoint_and_the_reference_rows(probed):
    path = probed.report / "probes.csv"
    header = path.read_text(encoding="utf-8").splitlines()[0]
    assert header == "objective,label,budget_fraction,task,metric,median,min,max,n"
    probes = pl.read_csv(path)
    assert set(probes["task"]) == {"rtd_unigram"}  # GLUE's fine-tunes are not probes
    bert = probes.filter(pl.col("objective") == "bert_mlm", pl.col("budget_fraction") == 1.0)
    assert bert.select("median", "min", "max", "n").row(0) == (81.0, 80.0, 82.0, 3)
    references = probes.filter(pl.col("objective").is_in(["bigram", "token_identity"]))
    assert references.select("objective", "label", "budget_fraction", "median").rows() == [
        ("bigram", "bigram", 0.0, 92.1),
        ("token_identity", "token_identity", 0.0, 52.1),
    ]
    assert probes.height == 2 * 2 + 2


def test_a_study_without_probes_writes_no_probes_csv(report):
    assert (report.parent / "summary.csv").is_file()
    assert not (report.parent / "probes.csv").exists()


@pytest.mark.parametrize("study", ["objectives", "long_budget"])
def test_committed_probes_csv_is_what_its_committed_results_give(study):
    """``reports/<study>/probes.csv`` is the table ``ablate report`` makes from the results
    kept beside it, reference rows included."""
    from electra_ablate.analysis.results import probe_summary, read_results, task_scores

    folder = Path(__file__).resolve().parents[2] / "reports" / study
    expected = probe_summary(task_scores(read_results(folder)))
    committed = pl.read_csv(folder / "probes.csv")
    assert committed.columns == list(expected.columns)
    assert {"bigram", "token_identity"} <= set(committed["objective"])
    assert committed.height == expected.height
    assert (
        committed.select("objective", "label", "task", "metric").rows()
        == expected.select("objective", "label", "task", "metric").rows()
    )
    assert np.allclose(committed["median"].to_numpy(), expected["median"].to_numpy(), atol=5e-4)


def test_the_recipe_row_shows_the_fine_tuning_recipe_once_not_the_probes_unused_one(probed):
    text = probed.text
    row = table_row(text, "Fine-tuning recipe")
    assert row.count("lr=") == 1 and "lr=0.0003" in row
