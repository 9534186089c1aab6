"""Studies that outgrow one machine, on the real smoke study through the installed ``ablate``:
the same results table (same units, same numbers, to the bit) whether the study runs in one
process (the session's reference, ``conftest.smoke_study``), as ``submitit`` jobs, as two shards
merged with ``ablate merge``, or from a data bundle on a node with no raw data. Each way runs the
smoke spec cut to the electra run and the baseline (so the added CI time stays small; the local
jobs, an interpreter each, run electra's unit alone) and is compared with the reference's rows of
those units. SLURM itself is stood in for by a fake ``sbatch`` that records the scripts it is
given: what a cluster would be asked to run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from ablate_cli import E2E, SMOKE, ablate, needs_extra, one_line_error

from electra_ablate.analysis.results import KEY_COLUMNS

pytestmark = E2E


@pytest.fixture(scope="module")
def electra_spec(tmp_path_factory) -> Path:
    """The smoke spec with only electra (and its no-pre-training baseline): its units have the
    reference's ids, since a unit's id does not depend on the other objectives."""
    spec = yaml.safe_load(SMOKE.read_text())
    spec["objectives"] = [{"name": "electra"}]
    path = tmp_path_factory.mktemp("specs") / "electra.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def electra_alone_spec(electra_spec) -> Path:
    """The electra spec without its baseline (``finetune.baseline: false``): electra's unit, with
    the same ids, alone."""
    spec = yaml.safe_load(electra_spec.read_text())
    spec["finetune"]["baseline"] = False
    path = electra_spec.with_name("electra-alone.yaml")
    path.write_text(yaml.safe_dump(spec))
    return path


def same_results_as_reference(folder: Path, reference: Path, units: int = 2) -> None:
    """``folder``'s results table is the reference's rows of the same units, to the bit (timings
    and the study's name aside), and its ``units`` runs are the reference's runs."""
    keys = [k for k in KEY_COLUMNS if k != "study"]
    mine = pl.read_parquet(folder / "results.parquet").drop("study", "wall_s").sort(keys)
    theirs = pl.read_parquet(reference / "results.parquet").drop("study", "wall_s")
    theirs = theirs.join(mine.select("run_id").unique(), on="run_id").select(mine.columns)
    assert len(mine) > 0 and mine.equals(theirs.sort(keys))
    runs = pl.read_parquet(folder / "runs.parquet")
    assert (runs["status"] == "done").all() and len(runs) == units, runs
    assert set(runs["run_id"]) <= set(pl.read_parquet(reference / "runs.parquet")["run_id"])


def one_line(result: subprocess.CompletedProcess, *needles: str) -> None:
    one_line_error(result, 2, *needles)


@needs_extra("submitit", "slurm")
def test_submitit_local_jobs_give_the_in_process_results(
    smoke_study, smoke_env, electra_alone_spec, tmp_path
):
    """Electra's unit alone: its pre-training job, then its fine-tunes' job once the run is done
    (the baseline's jobs are the same two kinds; the SLURM test below sees all four submitted).
    Each job is an interpreter of its own, started by submitit."""
    out = tmp_path / "runs" / "electra"
    local = ("--launcher", "submitit-local")
    # process: a job system that starts interpreters (submitit's controller and its job, each)
    result = ablate("run", electra_alone_spec, "--out", out, *local, env=smoke_env)
    assert result.returncode == 0, result.stderr
    # one job per pre-training unit, then one per unit's batch of fine-tunes, each with its log
    assert "submitted 1 submitit-local job(s) (1 pre-training, 0 fine-tuning)" in result.stdout
    logs = sorted(out.glob("jobs/*_log.out"))
    assert len(logs) == 2, logs
    assert "fine-tune jobs 1/1" in result.stderr  # the progress line, on a pipe: plain lines
    same_results_as_reference(out, smoke_study, units=1)
    again = ablate("run", electra_alone_spec, "--out", out, *local, env=smoke_env)
    assert again.returncode == 0 and "submitted" not in again.stdout  # nothing left to do


def test_two_shards_merged_give_the_in_process_results(
    smoke_study, smoke_env, electra_spec, tmp_path
):
    shards = [tmp_path / "machine1" / "electra", tmp_path / "machine2" / "electra"]
    for i, out in enumerate(shards, start=1):
        result = ablate("run", electra_spec, "--out", out, "--shard", f"{i}/2", env=smoke_env)
        assert result.returncode == 0, result.stderr
        assert f"shard {i}/2: 1 of the study's 2 units" in result.stdout
    # the longest unit (the run) is dealt first; the baseline goes to the other shard
    assert list((shards[0] / "pretrain").iterdir()) and not (shards[0] / "baseline").exists()
    assert list((shards[1] / "baseline").iterdir()) and not (shards[1] / "pretrain").exists()
    merged = tmp_path / "merged" / "electra"
    result = ablate("merge", *shards, "--into", merged, env=smoke_env)
    assert result.returncode == 0, result.stderr
    same_results_as_reference(merged, smoke_study)


def test_a_data_bundle_runs_the_study_with_no_raw_data(
    smoke_study, smoke_env, electra_spec, tmp_path
):
    bundle = tmp_path / "bundle"
    made = ablate("data", "prepare", electra_spec, "--bundle", bundle, env=smoke_env)
    assert made.returncode == 0, made.stderr
    assert (bundle / "bundle.json").is_file() and f"data bundle {bundle}" in made.stdout
    moved = tmp_path / "elsewhere" / "bundle"  # relocatable: nothing in it names its old place
    shutil.move(bundle, moved)
    offline = {**smoke_env, "ABLATE_DATA_DIR": str(tmp_path / "nowhere")}
    offline.pop("ABLATE_CACHE")
    out = tmp_path / "runs" / "electra"
    without = ablate("run", electra_spec, "--out", out, env=offline)
    assert without.returncode == 2 and "nowhere" in without.stderr  # no raw data, no bundle
    result = ablate("run", electra_spec, "--out", out, "--data-bundle", moved, env=offline)
    assert result.returncode == 0, result.stderr
    same_results_as_reference(out, smoke_study)


def fake_slurm(folder: Path) -> Path:
    """``sbatch`` that keeps each script it is given and answers with a job id, and ``srun``,
    whose presence is how submitit tells it is on a cluster."""
    folder.mkdir()
    scripts = folder / "submitted"
    scripts.mkdir()
    (folder / "sbatch").write_text(
        "#!/bin/sh\n"
        f'n=$(ls "{scripts}" | wc -l); n=$((n + 1001))\n'
        f'cp "$1" "{scripts}/$n.sh"\n'
        'echo "Submitted batch job $n"\n'
    )
    (folder / "srun").write_text("#!/bin/sh\nexit 0\n")
    for name in ("sbatch", "srun"):
        (folder / name).chmod((folder / name).stat().st_mode | stat.S_IEXEC)
    return scripts


@needs_extra("submitit", "slurm")
def test_slurm_jobs_carry_the_resources_and_wait_for_their_run(smoke_env, electra_spec, tmp_path):
    scripts = fake_slurm(tmp_path / "bin")
    env = {**smoke_env, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{smoke_env['PATH']}"}
    spec = yaml.safe_load(electra_spec.read_text())
    spec["launcher"] = {"partition": "gpu", "time_min": 90, "sbatch": ["qos=high"]}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "runs" / "electra"
    args = ("--launcher", "slurm", "--no-wait", "--gpus-per-job", "2", "--account", "lab")
    result = ablate("run", path, "--out", out, *args, env=env)
    assert result.returncode == 0, result.stderr
    assert "--collect" in result.stdout
    submitted = {int(p.stem): p.read_text() for p in sorted(scripts.iterdir())}
    assert len(submitted) == 4  # electra and the baseline, each then its fine-tunes
    for script in submitted.values():
        for line in ("--partition=gpu", "--account=lab", "--time=90", "--qos=high"):
            assert f"#SBATCH {line}" in script, (line, script)
        assert "#SBATCH --signal=USR2@" in script  # submitit's requeue-before-the-limit signal
    pretrain = [n for n, s in submitted.items() if "dependency" not in s]
    finetune = [s for s in submitted.values() if "dependency" in s]
    assert len(pretrain) == 2 and len(finetune) == 2
    for script in (submitted[n] for n in pretrain):  # two GPUs, one task each: the DDP path
        assert "#SBATCH --gpus-per-node=2" in script and "#SBATCH --ntasks-per-node=2" in script
    assert {
        line.split(":")[-1] for s in finetune for line in s.splitlines() if "dependency" in line
    } == {str(n) for n in pretrain}
    collect = ablate("run", path, "--out", out, "--collect", env=env)  # nothing ran yet
    assert collect.returncode == 0 and "2 pending" in collect.stdout


def test_bad_cluster_input_is_one_line_and_exit_2(smoke_env, electra_spec, tmp_path, monkeypatch):
    out = tmp_path / "o"
    run = ("run", electra_spec, "--out", out)
    one_line(ablate(*run, "--shard", "3/2", env=smoke_env), "--shard 3/2")
    one_line(ablate(*run, "--shard", "half", env=smoke_env), "expected I/N")
    one_line(ablate(*run, "--launcher", "foo", env=smoke_env), "foo", "submitit-local")
    one_line(ablate(*run, "--no-wait", env=smoke_env), "need --launcher")
    one_line(ablate(*run, "--launcher", "submitit-local", "--no-wait", env=smoke_env), "--no-wait")
    one_line(ablate(*run, "--data-bundle", tmp_path, env=smoke_env), "not a data bundle")
    one_line(
        ablate("data", "prepare", electra_spec, "--bundle", electra_spec, env=smoke_env),
        "not a folder",
    )
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if the slurm extra were missing
    result = ablate("run", electra_spec, "--launcher", "slurm", env=smoke_env)
    one_line(result, "pip install 'electra-ablate[slurm]'")
    assert not out.exists(), "bad input must stop before anything is written"


@needs_extra("submitit", "slurm")
def test_a_preempted_job_is_requeued_and_resumes_to_the_same_run(
    smoke_study, smoke_env, electra_spec, tmp_path, monkeypatch
):
    """submitit's preemption signal (what SLURM sends before it preempts or times out a job)
    makes the job hand itself back through its checkpoint hook; the local executor requeues it,
    and the run resumes from its newest state to the weights and curve of an unbroken run."""
    import submitit

    from electra_ablate.scaleout.launch import PretrainJob, StudySetup
    from electra_ablate.spec import load_spec
    from electra_ablate.study.context import Study
    from electra_ablate.study.plan import plan_study

    for name in ("ABLATE_DATA_DIR", "ABLATE_CACHE"):  # the job inherits this environment
        monkeypatch.setenv(name, smoke_env[name])
    out = tmp_path / "runs" / "electra"
    spec = load_spec(electra_spec)
    units = plan_study(Study(spec, electra_spec, out, "cpu")).units
    (index,) = [i for i, u in enumerate(units) if u.label == "electra"]
    setup = StudySetup(spec, electra_spec, out, None, {}, reuse=False)
    executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="local")
    executor.update_parameters(timeout_min=60)
    job = executor.submit(PretrainJob(setup, index, units[index].run_id, tasks=1))
    states = units[index].layout.states
    deadline = time.time() + 1200
    while not list(states.glob("step-*")) and time.time() < deadline and not job.done():
        time.sleep(0.2)
    assert not job.done(), "the run finished before it could be preempted"
    pid = job._process.pid  # the local controller; its child runs the job, as a SLURM task
    for task in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        os.kill(int(task), signal.SIGUSR2)  # the preemption signal, as SLURM sends it
    summary = job.result()
    assert summary["status"] == "done", summary
    log = "".join(p.read_text() for p in (tmp_path / "jobs").glob("*_log.*"))
    assert "Requeued job" in log and "preempted" in log, log[-2000:]
    (twin,) = (smoke_study / "pretrain").glob(f"electra-s0-{units[index].run_id}")
    run = units[index].layout.root
    for kept in sorted((twin / "kept").iterdir()):
        mine = run / "kept" / kept.name / "kept.safetensors"
        assert mine.read_bytes() == (kept / "kept.safetensors").read_bytes(), kept.name

    def curve(folder: Path) -> list[dict]:
        rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if k != "tokens_per_s"} for row in rows]

    assert curve(run) == curve(twin)
