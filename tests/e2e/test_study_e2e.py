"""The user's main job end to end on the `micro` smoke study and the real data: every objective
pre-trained, fine-tuned and reported; a re-run is a no-op; a study killed mid-way resumes to the
same results table as an uninterrupted one; an installed plugin objective runs in a study."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import polars as pl
import pytest
import yaml
from ablate_cli import E2E, ROOT, SMOKE, one_line_error
from ablate_cli import ablate as run_ablate
from objective_names import BUILT_IN

from electra_ablate.cli import run_cli

pytestmark = E2E


@pytest.fixture(scope="module")
def data_env(smoke_env):
    return smoke_env


@pytest.fixture(scope="module")
def smoke_run(smoke_study, tmp_path_factory):
    """A copy of the session's smoke study (``conftest.smoke_study``), which was made as the
    README's first command makes it: ``runs/<name>`` with no ``runs/`` folder yet."""
    out = tmp_path_factory.mktemp("smoke") / "runs" / "smoke"
    shutil.copytree(smoke_study, out)
    # kept aside: a later test edits the study in place and rewrites its results table
    shutil.copy(out / "results.parquet", out.parent / "first_results.parquet")
    return out


def ablate(args: list[str], env: dict, **kwargs) -> subprocess.CompletedProcess:
    """``ablate ARGS`` with ``env``, in this process (``ablate_cli.ablate``)."""
    return run_ablate(*args, env=env, **kwargs)


def training_curve(run: Path) -> list[dict]:
    """A run's logged pre-training metrics without its timings."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "tokens_per_s"} for row in rows]


def comparable(out: Path) -> pl.DataFrame:
    """The results table (of a study folder, or a parquet file) without timings, sorted."""
    table = out / "results.parquet" if out.is_dir() else out
    frame = pl.read_parquet(table).drop("wall_s")
    return frame.sort(["label", "checkpoint_fraction", "task", "finetune_seed", "metric"])


def test_smoke_study_trains_finetunes_and_reports_every_objective(smoke_run, smoke_report):
    """The session's smoke study, and its report (``smoke_report``: ``ablate report STUDY --out
    FOLDER``, which must exit 0; the plugin and collect tests below report into a study's own
    ``report/`` folder)."""
    out = smoke_run
    results = pl.read_parquet(out / "results.parquet")
    assert set(results["objective"]) == {*BUILT_IN, "none"}  # "none": the no-pre-training baseline
    assert set(results["task"]) == {"rte", "stsb"}
    baseline = results.filter(pl.col("objective") == "none")
    assert set(baseline["checkpoint_fraction"]) == {0.0} and (baseline["flops_paper"] == 0).all()
    assert set(results.filter(pl.col("objective") != "none")["checkpoint_fraction"]) == {0.5, 1.0}
    assert results["value"].is_finite().all()
    headline = results.filter(pl.col("headline"))
    assert set(headline["metric"]) == {"accuracy", "spearman"}
    assert (results["train_examples"] == 128).all()
    runs = pl.read_parquet(out / "runs.parquet")
    assert (runs["status"] == "done").all()
    # equal compute: every objective spent the same paper-convention FLOPs, within one step
    flops = runs.filter(pl.col("objective") != "none")["flops_paper"]
    assert flops.max() / flops.min() < 1.1
    metrics = pl.read_parquet(out / "pretrain_metrics.parquet")
    diagnostics = {
        "disc_auc",
        "disc_nats_learnt",
        "gen_entropy",
        "gen_kl_unigram",
        "mlm_nats_learnt",
    }
    assert {"gen_mlm_acc", "disc_acc", "replaced_frac"} | diagnostics <= set(metrics.columns)
    for name in (
        "report.md",
        "glue_vs_flops.png",
        "glue_vs_flops.svg",
        "glue_tasks_vs_flops.png",
        "pretrain_curves.svg",
    ):
        assert (smoke_report / name).stat().st_size > 0, name
    text = (smoke_report / "report.md").read_text()
    assert "capped at 128" in text and "electra" in text


def test_the_report_tests_the_papers_claims_and_its_seed_plan_command_runs(
    smoke_report, data_env, tmp_path
):
    """One model per arm: every covered claim is unresolved and points at a pilot plan whose
    `--dry-run` command (as the report prints it, plus an --out away from runs/) prices it; the
    report folder then reports again to the same markdown. (``smoke_report``: the session's
    smoke study reported once with ``ablate report STUDY --out FOLDER``.)"""
    text = (smoke_report / "report.md").read_text()
    assert "## The paper's claims (GLUE at 100% of the budget)" in text
    assert "| electra − bert_mlm |" in text and "**unresolved at this power**" in text
    command = text.split("Its cost: `", 1)[1].split("`", 1)[0]
    assert command.startswith(f"ablate run {SMOKE} --dry-run --set ")  # the spec as run
    env = {**data_env, "COLUMNS": "250"}
    dry = ablate([*shlex.split(command)[1:], "--out", str(tmp_path / "dry")], env)
    assert dry.returncode == 0, dry.stderr
    assert "still to do: about" in dry.stdout and not (tmp_path / "dry" / "pretrain").exists()
    again = ablate(["report", str(smoke_report), "--out", str(tmp_path / "again")], data_env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "report.md").read_text() == text


def trained_files(out: Path) -> dict[Path, int]:
    """Every file that training or fine-tuning writes (saved states, kept encoders, fine-tune
    records), with its modification time: a re-run that redoes any work rewrites one."""
    patterns = ("pretrain/*/states/**/*", "pretrain/*/kept/**/*", "baseline/**/*", "finetune/*")
    return {
        path: path.stat().st_mtime_ns
        for pattern in patterns
        for path in out.glob(pattern)
        if path.is_file()
    }


def test_rerunning_a_finished_study_does_no_training(smoke_run, data_env):
    out = smoke_run
    before, written = comparable(out), trained_files(out)
    result = ablate(["run", str(SMOKE), "--out", str(out)], data_env)
    assert result.returncode == 0, result.stderr
    assert "running" not in result.stdout and "fine-tune" not in result.stdout
    assert comparable(out).equals(before)
    assert written and trained_files(out) == written


def test_a_study_killed_mid_way_resumes_to_the_same_results(smoke_run, data_env, tmp_path):
    """Three of the smoke study's objectives (the same units as the smoke run's: a unit's id
    does not depend on the others), killed after the first has finished, resume to the smoke
    run's own results for those units."""
    out = smoke_run
    spec = yaml.safe_load(SMOKE.read_text())
    keep = ("bert_mlm", "replace_mlm", "electra")  # electra sets the budget (`steps_of`)
    spec["objectives"] = [o for o in spec["objectives"] if o["name"] in keep]
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(spec))
    resumed = tmp_path / "resumed"
    # process: a run killed by SIGKILL part-way
    proc = subprocess.Popen(
        [sys.executable, "-m", "electra_ablate", "run", str(path), "--out", str(resumed)],
        env=data_env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 600
    # kill once some, but not all, pre-training runs have finished (the first, then a second
    # on: two runs and their fine-tunes are still to do)
    while time.time() < deadline and not list(resumed.glob("pretrain/*/done.json")):
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(list(resumed.glob("pretrain/*/done.json"))) < len(keep)
    result = ablate(["run", str(path), "--out", str(resumed)], data_env)
    assert result.returncode == 0, result.stderr
    assert "finished earlier" in result.stdout
    mine = comparable(resumed).drop("study")
    first = comparable(out.parent / "first_results.parquet").drop("study")
    assert set(mine["objective"]) == {*keep, "none"}
    assert mine.equals(first.join(mine.select("run_id").unique(), on="run_id"))


def test_editing_one_objective_reruns_only_that_objective(smoke_run, data_env, tmp_path):
    out = smoke_run
    spec = yaml.safe_load(SMOKE.read_text())
    spec["objectives"] = [o for o in spec["objectives"] if o["name"] in ("electra", "bert_mlm")]
    # BERT's params change; ELECTRA's do not (and it sets the budget: `steps_of: electra`)
    spec["objectives"][0]["params"] = {"mask_token_prob": 0.7, "random_token_prob": 0.15}
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(spec))
    result = ablate(["run", str(edited), "--out", str(out)], data_env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(x.startswith("pre-train electra ") and "finished earlier" in x for x in lines)
    assert any(x.startswith("pre-train bert_mlm ") and "running" in x for x in lines)


def test_an_installed_plugin_objective_and_task_family_run_in_a_study(data_env, tmp_path):
    """The example plugin's objective and its task family (``repeat_probe``, one file and an
    entry point) in one study: the family's rows, its own score and its reference row reach
    the tables and the report, and never GLUE's score."""
    if "random_rtd" not in {ep.name for ep in entry_points(group="electra_ablate.objectives")}:
        pytest.skip("examples/random_rtd_plugin is not installed (CI installs it)")
    spec = yaml.safe_load(SMOKE.read_text())
    spec["objectives"] = [{"name": "random_rtd"}, {"name": "electra"}]
    # a few steps and a small RTE: what is checked is which rows there are, not how good
    spec["budget"] = {**spec["budget"], "steps": 4}  # both kept checkpoints, as the smoke study
    spec["pretrain"] = {**spec["pretrain"], "batch_size": 8, "log_every": 2, "eval_batches": 1}
    spec["finetune"]["tasks"] = ["rte"]
    spec["finetune"] |= {"caps": {"rte": 32}, "eval_caps": {"rte": 32}}
    spec["evaluation"] = {"tasks": ["repeat_probe"], "params": {"repeat_probe": {"examples": 80}}}
    path = tmp_path / "plugin.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert run_cli(["validate", str(path)]) == 0
    out = tmp_path / "out"
    result = ablate(["run", str(path), "--out", str(out)], data_env)
    assert result.returncode == 0, result.stderr
    runs = pl.read_parquet(out / "runs.parquet")
    assert set(runs["objective"]) == {"random_rtd", "electra", "none"}  # none: the baseline
    assert (runs["status"] == "done").all()
    results = pl.read_parquet(out / "results.parquet")
    probe = results.filter(pl.col("family") == "synthetic")
    assert set(probe["task"]) == {"repeat_probe"} and set(probe["finetune_seed"]) == {0}
    # every kept checkpoint (2 runs x 2 fractions), the baseline and the reference, once each
    points = probe.filter(pl.col("metric") == "accuracy").select("label", "checkpoint_fraction")
    assert points.height == 6 and points.unique().height == 6
    assert set(probe["objective"]) == {"random_rtd", "electra", "none", "majority"}
    assert (
        probe.filter(pl.col("objective") == "majority")["checkpoint_fraction"].to_list()
        == [0.0] * 2
    )
    glue = results.filter(pl.col("family") == "glue")
    assert set(glue["task"]) == {"rte"} and "majority" not in set(glue["objective"])
    report = ablate(["report", str(out)], data_env)
    assert report.returncode == 0, report.stderr
    text = (out / "report" / "report.md").read_text()
    assert "## GLUE: results at the final budget" in text
    assert "## Synthetic: results at the final budget" in text and "| majority |" in text
    summary = pl.read_csv(out / "report" / "summary.csv")
    assert summary.columns[:7] == [
        "objective",
        "label",
        "budget_fraction",
        "glue_median",
        "glue_min",
        "glue_max",
        "n",
    ]
    assert "synthetic_median" in summary.columns
    for stem in ("glue_vs_flops", "synthetic_vs_flops", "synthetic_tasks_vs_flops"):
        assert (out / "report" / f"{stem}.png").stat().st_size > 0, stem


def test_ablate_finetune_gives_the_studys_own_numbers(smoke_run, data_env):
    """The same checkpoint, tasks, seeds, recipe, caps and evaluation caps as the study (read
    from the study folder, or from --spec): the same job ids and exactly the same metrics."""
    out = smoke_run
    results = pl.read_parquet(out.parent / "first_results.parquet")
    (electra,) = out.glob("pretrain/electra-s0-*")
    (baseline,) = out.glob("baseline/*")
    cases = [
        (electra / "kept" / "1", "electra", 1.0, []),
        (baseline / "kept" / "0", "none", 0.0, []),
        (electra / "kept" / "0.5", "electra", 0.5, ["--spec", str(SMOKE)]),
    ]
    for kept, objective, fraction, options in cases:
        result = ablate(["finetune", str(kept), "--json", *options], data_env)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert set(report["tasks"]) == {"rte", "stsb"}
        for task, summary in report["tasks"].items():
            study = results.filter(
                (pl.col("objective") == objective)
                & (pl.col("checkpoint_fraction") == fraction)
                & (pl.col("task") == task)
            )
            for metric, values in summary["metrics"].items():
                expected = study.filter(pl.col("metric") == metric)["value"].to_list()
                assert values["values"] == expected, (kept, task, metric)
            for job_id in summary["job_ids"]:
                record = json.loads((out / "finetune" / f"{job_id}.json").read_text())
                assert record["task"] == task and record["fraction"] == fraction


def test_bad_input_is_one_line_and_exit_2(data_env, tmp_path):
    # process: `python -m electra_ablate` itself, and the exit status as the shell sees it (a
    # command that fails before importing torch: the process is what is checked, not `run`)
    gone = ablate(["status", str(tmp_path / "nope")], data_env, module=True)
    one_line_error(gone, 2, "not a study folder")
    missing = ablate(["run", str(tmp_path / "nope.yaml")], data_env)
    one_line_error(missing, 2, "spec file not found")
    spec = yaml.safe_load(SMOKE.read_text())
    spec["finetune"]["tasks"] = ["qqp"]
    path = tmp_path / "qqp.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = ablate(["run", str(path), "--out", str(tmp_path / "o")], data_env)
    assert result.returncode == 2 and "qqp" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "o" / "pretrain").exists(), "must fail before spending compute"


def test_dry_run_prints_every_unit_and_an_estimate_and_trains_nothing(data_env, tmp_path):
    out = tmp_path / "dry"
    env = {**data_env, "COLUMNS": "250"}  # rich fits the plan table to the terminal's width
    result = ablate(["run", str(SMOKE), "--out", str(out), "--dry-run", "--workers", "2"], env)
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(SMOKE.read_text())
    for entry in spec["objectives"]:
        assert entry.get("label", entry["name"]) in result.stdout
    assert "no pre-training" in result.stdout
    assert "still to do: about" in result.stdout and "with --workers 2" in result.stdout
    assert not (out / "pretrain").exists() and not (out / "finetune").exists()
    # the pre-flight check (study.preflight): rte's 128 examples × 1 epoch, one line on stderr
    (preflight,) = [x for x in result.stderr.splitlines() if x.startswith("warning: rte: ")]
    assert "raise finetune.caps.rte or finetune.recipe.task_epochs.rte" in preflight


def test_workers_share_out_the_runs_and_give_the_same_results(smoke_run, data_env, tmp_path):
    out = smoke_run
    spec = yaml.safe_load(SMOKE.read_text())
    spec["objectives"] = [o for o in spec["objectives"] if o["name"] in ("bert_mlm", "electra")]
    spec["objectives"].append({"name": "two_stage"})  # three runs on two workers
    # each worker gets as many threads as the one-process smoke run had (its done.json says
    # how many), so that both split their work alike
    (threads,) = {json.loads(d.read_text())["threads"] for d in out.glob("pretrain/*/done.json")}
    spec.setdefault("pretrain", {})["num_threads"] = 2 * threads
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump(spec))
    parallel = tmp_path / "parallel"
    result = ablate(["run", str(path), "--out", str(parallel), "--workers", "2"], data_env)
    assert result.returncode == 0, result.stderr
    assert f"4 units of work on 2 workers x {threads} threads" in result.stdout  # + baseline
    # the work really ran in two worker processes: a worker that fails to start is survived by
    # finishing in this process, which would pass everything below
    assert "worker process died" not in result.stdout + result.stderr, result.stderr
    assert "Exception in initializer" not in result.stderr, result.stderr
    runs = pl.read_parquet(parallel / "runs.parquet")
    assert (runs["status"] == "done").all() and len(runs) == 4
    # the same units (same ids, same steps), the same training curves and the same fine-tuned
    # scores as the one-process smoke run, to the bit: each worker has the thread count the
    # one-process run had, so it does the same arithmetic
    for run in sorted((parallel / "pretrain").iterdir()):
        (twin,) = (out / "pretrain").glob(f"*-{run.name.rsplit('-', 1)[1]}")
        assert training_curve(run) == training_curve(twin), run.name
    mine = comparable(parallel).drop("study")
    first = comparable(out.parent / "first_results.parquet").drop("study")
    assert mine.equals(first.join(mine.select("run_id").unique(), on="run_id"))
    rerun = ablate(["run", str(path), "--out", str(parallel), "--workers", "2"], data_env)
    assert rerun.returncode == 0 and "units of work on" not in rerun.stdout


def test_a_study_beside_another_reuses_its_identical_runs_and_fine_tunes(smoke_run, data_env):
    """Units are named by a hash of what changes their result, so a second study in the same
    parent folder copies what the first already finished instead of repeating it."""
    out = smoke_run
    spec = yaml.safe_load(SMOKE.read_text())
    spec["name"] = "beside"
    spec["objectives"] = [o for o in spec["objectives"] if o["name"] in ("bert_mlm", "electra")]
    spec["objectives"][0]["label"] = "bert"  # labels are not part of a run's identity
    path = out.parent / "beside.yaml"
    path.write_text(yaml.safe_dump(spec))
    beside = out.parent / "beside"
    # the same data reached by another spelling of its path is the same data
    data_dir = Path(data_env["ABLATE_DATA_DIR"])
    respelled = {**data_env, "ABLATE_DATA_DIR": f"{data_dir}/../{data_dir.name}"}
    result = ablate(["run", str(path), "--out", str(beside)], respelled)
    assert result.returncode == 0, result.stderr
    records = sorted((beside / "finetune").glob("*.json"))
    assert records
    for record in records:  # copied, not redone
        assert record.read_text() == (out / "finetune" / record.name).read_text()
    runs = pl.read_parquet(beside / "runs.parquet").filter(pl.col("objective") != "none")
    assert runs["message"].to_list() == [f"identical run reused from {out.name}"] * 2
    assert result.stdout.count(f"identical run reused from {out.name}") == 2
    assert "running" not in result.stdout
    keys = ["run_id", "checkpoint_fraction", "task", "finetune_seed", "metric"]
    mine = comparable(beside).drop("study", "label").sort(keys)
    first = comparable(out.parent / "first_results.parquet").drop("study", "label")
    theirs = first.join(mine.select("run_id").unique(), on="run_id").select(mine.columns)
    assert mine.equals(theirs.sort(keys))
    # --no-reuse trains what is beside: one run, one task and no baseline show it
    spec["objectives"] = spec["objectives"][1:]
    spec["finetune"]["tasks"], spec["finetune"]["baseline"] = ["rte"], False
    path.write_text(yaml.safe_dump(spec))
    fresh = out.parent / "fresh"
    again = ablate(["run", str(path), "--out", str(fresh), "--no-reuse"], data_env)
    assert again.returncode == 0 and "running" in again.stdout


def test_collect_reports_a_study_cut_short_from_its_finished_work_only(
    smoke_run, data_env, tmp_path
):
    out = smoke_run
    cut = tmp_path / "cut_short"
    shutil.copytree(out, cut, ignore=shutil.ignore_patterns("report"))
    (victim,) = (cut / "pretrain").glob("electra-s0-*")
    (victim / "done.json").unlink()
    curve = (victim / "metrics.jsonl").read_text()
    result = ablate(["run", str(SMOKE), "--out", str(cut), "--collect"], data_env)
    assert result.returncode == 0, result.stderr
    assert "1 pending" in result.stdout
    assert (victim / "metrics.jsonl").read_text() == curve, "collecting trains nothing"
    runs = pl.read_parquet(cut / "runs.parquet")
    assert runs.filter(pl.col("status") == "pending")["label"].to_list() == ["electra"]
    for table in ("results.parquet", "pretrain_metrics.parquet"):
        labels = set(pl.read_parquet(cut / table)["label"])
        assert "electra" not in labels and "bert_mlm" in labels, table
    report = ablate(["report", str(cut)], data_env)
    assert report.returncode == 0, report.stderr
    assert "1 pending" in (cut / "report" / "report.md").read_text()
