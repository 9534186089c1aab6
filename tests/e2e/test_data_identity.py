"""Results that travel between caches and machines are never mixed (issue 40).

The same corpus and data settings give byte-identical tokenizer files and packed sequences in
any process (thread counts and hash seeds differ between machines, and the ``tokenizers``
trainer broke ties in hash order), one data fingerprint names that data, and every path that
moves results between folders refuses data that differ, in one line naming both fingerprints.
All through the installed ``ablate``, on sixty documents of the shared corpus: on as few, the
``tokenizers`` trainer left to itself (the old training) still gives each process another
vocabulary, so the two-process test would see it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import polars as pl
import pytest
from ablate_cli import ablate as run_ablate
from ablate_cli import needs_extra

from electra_ablate.analysis.results import KEY_COLUMNS
from electra_ablate.data.paths import file_hash
from electra_ablate.data.pretraining import data_fingerprint, read_arrow_split
from electra_ablate.evaluation.task import PREDICTION_FACTS

pytestmark = pytest.mark.slow

SPEC = """\
name: tiny
data:
  corpus:
    paths: ["{data}/corpus/gutenberg/*.txt.gz"]
    max_documents: 60
  tokenizer: {{vocab_size: 1000}}
  glue: {data}/glue
backbone: {{preset: micro}}
budget: {{steps: 4, checkpoints: [1.0]}}
pretrain: {{batch_size: 8, log_every: 2, eval_batches: 1}}
objectives: [{{name: bert_mlm}}, {{name: electra}}]
finetune:
  tasks: [rte]
  seeds: [0]
  caps: {{rte: 16}}
  eval_caps: {{rte: 16}}
  recipe: {{epochs: 1, task_epochs: {{}}}}
device: cpu
"""

ABLATE = str(Path(sys.executable).with_name("ablate"))


@pytest.fixture
def spec(shared_data, tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SPEC.format(data=shared_data), encoding="utf-8")
    return path


def ablate(
    *args, cache: Path, threads: int = 1, seed: int = 0, process: bool = False, **kw
) -> subprocess.CompletedProcess:
    """``ablate ARGS`` with its own cache and thread counts, in this process
    (``ablate_cli.ablate``); with ``process=True`` or a ``subprocess.run`` keyword, in a fresh
    process, which also gets its own hash seed (a hash seed and a thread pool are fixed when a
    process starts)."""
    env = {
        **os.environ,
        "ABLATE_CACHE": str(cache),
        "RAYON_NUM_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "true" if threads > 1 else "false",
        "PYTHONHASHSEED": str(seed),
        "COLUMNS": "200",
    }
    env.update(kw.pop("env", {}))
    if not (process or kw):
        return run_ablate(*args, env=env)
    return subprocess.run(
        [ABLATE, *map(str, args)], env=env, capture_output=True, text=True, timeout=600, **kw
    )


def built_data(cache: Path) -> dict[str, bytes]:
    """Every tokenizer file and the packed sequences' Arrow data of a cache, by relative name
    (``datasets`` writes a random fingerprint of its own into ``state.json``: left out)."""
    files = {}
    for path in sorted(cache.rglob("*")):
        if path.is_file() and path.name not in {"state.json", "meta.json", "summary.json"}:
            files[str(path.relative_to(cache))] = path.read_bytes()
    return files


def fingerprint_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("data fingerprint "))


def test_two_processes_with_other_threads_and_hash_seeds_build_the_same_bytes(spec, tmp_path):
    # process: what differs is each process's own hash seed and tokenizer thread pool
    first = ablate("data", "prepare", spec, cache=tmp_path / "a", threads=1, seed=1, process=True)
    second = ablate("data", "prepare", spec, cache=tmp_path / "b", threads=2, seed=2, process=True)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    a, b = built_data(tmp_path / "a"), built_data(tmp_path / "b")
    assert any(name.endswith("vocab.txt") for name in a)
    assert any(name.endswith(".arrow") for name in a)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], f"{name} differs between the two processes"
    assert fingerprint_line(first.stdout) == fingerprint_line(second.stdout)


# --------------------------------------------------------------- a finished study, shared


@pytest.fixture(scope="module")
def finished(shared_data_dir, tmp_path_factory) -> dict[str, Path]:
    """The tiny study, run to the end with cache ``a``: read-only to the tests (copy it)."""
    root = tmp_path_factory.mktemp("finished")
    spec = root / "tiny.yaml"
    spec.write_text(SPEC.format(data=shared_data_dir), encoding="utf-8")
    out = root / "runs" / "tiny"
    done = ablate("run", spec, "--out", out, cache=root / "a")
    assert done.returncode == 0, done.stderr
    return {"spec": spec, "out": out, "cache": root / "a", "root": root}


@pytest.fixture(scope="module")
def finished_report(finished) -> Path:
    """``ablate report`` of the finished study, written once: read-only to the tests."""
    report = finished["root"] / "report"
    made = ablate("report", finished["out"], "--out", report, cache=finished["cache"])
    assert made.returncode == 0, made.stderr
    return report


def tree(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` but its lock files (whose note names the last holder)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix != ".lock"
    }


def other_build(cache: Path, into: Path) -> Path:
    """A copy of ``cache`` whose tokenizer numbers two tokens the other way round: the same
    settings, other data (as two builds of the old, non-deterministic trainer gave), built
    whole: both tokenizer files agree and the records of them (the hashes in ``meta.json``,
    the fingerprint in ``summary.json``) are the new files', so it is not a damaged cache."""
    shutil.copytree(cache, into)
    (folder,) = into.glob("tokenizers/*/")
    lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[-1], lines[-2] = lines[-2], lines[-1]
    (folder / "vocab.txt").write_text("".join(lines), encoding="utf-8")
    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    a, b = lines[-1].rstrip("\n"), lines[-2].rstrip("\n")
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    meta = json.loads((folder / "meta.json").read_text())
    meta["files"] = {name: file_hash(folder / name) for name in meta["files"]}
    (folder / "meta.json").write_text(json.dumps(meta))
    for packed in into.glob("pretraining/*/"):
        splits = {s: read_arrow_split(packed / s) for s in ("train", "heldout")}
        summary = json.loads((packed / "summary.json").read_text())
        summary["fingerprint"] = data_fingerprint(folder, splits)
        (packed / "summary.json").write_text(json.dumps(summary))
    return into


def one_error_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def recorded_fingerprint(study: Path) -> str:
    return json.loads((study / "study.json").read_text())["data"]["fingerprint"]


def test_the_fingerprint_is_in_study_json_every_run_json_the_pack_and_the_report(
    finished, finished_report, tmp_path
):
    out = finished["out"]
    fingerprint = recorded_fingerprint(out)
    study = json.loads((out / "study.json").read_text())
    assert study["data_fingerprints"] == [fingerprint]
    runs = list(out.glob("pretrain/*/run.json"))
    assert len(runs) == 2
    assert all(json.loads(r.read_text())["data"] == fingerprint for r in runs)
    pack = tmp_path / "tiny.pack.tar.gz"
    packed = ablate("pack", out, "--out", pack, cache=finished["cache"])
    assert packed.returncode == 0, packed.stderr
    with tarfile.open(pack) as tar:
        manifest = json.load(tar.extractfile("tiny/pack.json"))
    assert manifest["data_fingerprints"] == [fingerprint]
    assert f"| Data fingerprint | `{fingerprint}` |" in (finished_report / "report.md").read_text()


def test_a_resume_under_a_cache_with_other_data_is_refused_naming_both(finished, tmp_path):
    """Case 3: the same study resumed with another cache, whose data differ, trains nothing."""
    out = tmp_path / "tiny"
    shutil.copytree(finished["out"], out)
    before = tree(out)
    other = other_build(finished["cache"], tmp_path / "b")
    result = ablate("run", finished["spec"], "--out", out, cache=other)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert recorded_fingerprint(out) in line
    prepared = ablate("data", "prepare", finished["spec"], cache=other)
    assert fingerprint_line(prepared.stdout).split()[2] in line
    assert tree(out) == before
    collected = ablate("run", finished["spec"], "--out", out, "--collect", cache=other)
    assert collected.returncode == 2, collected.stderr
    assert one_error_line(collected) == line  # --collect (of shards) reads no other data either
    assert tree(out) == before


def test_a_merge_of_folders_made_with_other_data_is_refused_naming_both(finished, tmp_path):
    """Case 2: results of two machines whose data differ never merge into one study."""
    other = other_build(finished["cache"], tmp_path / "b")
    elsewhere = tmp_path / "elsewhere" / "tiny"
    made = ablate("run", finished["spec"], "--out", elsewhere, cache=other)
    assert made.returncode == 0, made.stderr
    merged = ablate("merge", finished["out"], elsewhere, "--into", tmp_path / "m", cache=other)
    assert merged.returncode == 2, merged.stderr
    line = one_error_line(merged)
    assert recorded_fingerprint(finished["out"]) in line
    assert recorded_fingerprint(elsewhere) in line
    assert not (tmp_path / "m").exists()


def test_a_bundle_for_other_settings_is_refused_and_never_written_into(finished, tmp_path):
    """Case 4: ``--data-bundle`` naming another study's bundle, with the raw data present."""
    bundle = tmp_path / "bundle"
    made = ablate("data", "prepare", finished["spec"], "--bundle", bundle, cache=finished["cache"])
    assert made.returncode == 0, made.stderr
    before = tree(bundle)
    spec = tmp_path / "other.yaml"
    text = finished["spec"].read_text().replace("vocab_size: 1000", "vocab_size: 900")
    spec.write_text(text.replace("name: tiny", "name: other"))
    result = ablate(
        "run", spec, "--out", tmp_path / "other", "--data-bundle", bundle, cache=tmp_path / "c"
    )
    assert result.returncode == 2, result.stderr
    assert str(bundle) in one_error_line(result)
    assert tree(bundle) == before


def test_merge_waits_its_turn_a_study_held_by_a_run_is_not_written(finished, tmp_path):
    """Case 5: ``ablate merge`` into a folder an ``ablate run`` holds stops in one line."""
    target = tmp_path / "tiny"
    shutil.copytree(finished["out"], target)
    shutil.rmtree(next(target.glob("pretrain/*")))
    before = tree(target)
    # process: the lock is held by another process (a plain one: no ablate start-up to pay)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from electra_ablate.infra.locks import FolderLock\n"
            "FolderLock(sys.argv[1]).acquire()\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
            str(target / "study.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        result = ablate("merge", finished["out"], "--into", target, cache=finished["cache"])
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr
    assert "in use" in one_error_line(result)
    assert tree(target) == before


def test_merge_refuses_a_report_folder_and_pack_says_what_it_packs(
    finished, finished_report, tmp_path
):
    """Case 6: a folder ``ablate report`` wrote is never merged into."""
    report = finished_report
    before = tree(report)
    pack = tmp_path / "tiny.pack.tar.gz"
    packed = ablate("pack", finished["out"], "--out", pack, cache=finished["cache"])
    assert packed.returncode == 0, packed.stderr
    fingerprint = recorded_fingerprint(finished["out"])
    assert (
        f"study tiny (data {fingerprint}): 2 pre-training run(s) (2 finished), 1 baseline(s)"
        in packed.stdout
    )
    result = ablate("merge", pack, "--into", report, cache=finished["cache"])
    assert result.returncode == 2, result.stderr
    assert "report folder" in one_error_line(result)
    assert tree(report) == before


def test_status_before_the_first_tables_counts_the_work_the_spec_plans(finished, tmp_path):
    """Case 8: a study stopped before its first tables shows its pending work, not 0."""
    out = tmp_path / "tiny"
    # process: a run stopped by Ctrl-C (SIGINT to its process group)
    run = subprocess.Popen(
        [ABLATE, "run", str(finished["spec"]), "--out", str(out), "--no-reuse"],
        env={**os.environ, "ABLATE_CACHE": str(finished["cache"])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (out / "plan.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(run.pid, signal.SIGINT)
        run.wait(timeout=120)
    assert not (out / "runs.parquet").exists()
    status = ablate("status", out, cache=finished["cache"])
    assert status.returncode == 0, status.stderr
    units = re.search(r"units: (.*)", status.stdout).group(1)
    counted = sum(int(n) for n in re.findall(r"(\d+) \w+", units))
    assert counted == 3, status.stdout  # two runs and the baseline
    jobs = re.search(r"fine-tunes: (\d+) done.*, (\d+) failed, (\d+) pending", status.stdout)
    assert jobs is not None, status.stdout
    assert sum(int(n) for n in jobs.groups()) == 3, status.stdout  # rte once per encoder


def test_a_disk_that_refuses_a_write_is_named_in_one_line(finished, tmp_path):
    """Case 8: a full disk (here a file size limit, the same refusal) names the file and says
    what to do, instead of a library's error text."""

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    out = tmp_path / "tiny"
    result = ablate(  # process: a file size limit is a process's
        "run",
        finished["spec"],
        "--out",
        out,
        "--no-reuse",
        cache=finished["cache"],
        preexec_fn=small_files,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()  # progress lines (a pipe: plain), then the error
    assert [x for x in lines if x.startswith("error: ")] == [lines[-1]], result.stderr
    line = lines[-1]
    assert f"cannot write {out}" in line
    assert "free space there" in line
    assert "a bug or an environment problem" not in line


def test_two_shards_on_two_fresh_caches_merge_into_the_single_process_results(finished, tmp_path):
    """Case 2 without a bundle: each machine builds its own data, and they are the same."""
    shards = [tmp_path / "machine1" / "tiny", tmp_path / "machine2" / "tiny"]
    caches = [finished["cache"], tmp_path / "fresh"]
    for i, (out, cache) in enumerate(zip(shards, caches, strict=True), start=1):
        shard = ("--shard", f"{i}/2")
        part = ablate("run", finished["spec"], "--out", out, *shard, cache=cache, seed=i)
        assert part.returncode == 0, part.stderr
    merged = tmp_path / "merged" / "tiny"
    result = ablate("merge", *shards, "--into", merged, cache=finished["cache"])
    assert result.returncode == 0, result.stderr
    keys = [k for k in KEY_COLUMNS if k != "study"]
    mine = pl.read_parquet(merged / "results.parquet").drop("study", "wall_s").sort(keys)
    theirs = pl.read_parquet(finished["out"] / "results.parquet").drop("study", "wall_s")
    scores = mine.filter(~pl.col("metric").is_in(PREDICTION_FACTS))  # beside: what they're made of
    assert len(scores) == 3 and mine.equals(theirs.select(mine.columns).sort(keys))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@needs_extra("submitit", "slurm")
@pytest.mark.parametrize("how", ["SIGTERM to the parent alone", "Ctrl-C on the process group"])
def test_a_stopped_local_launcher_stops_its_jobs_and_says_one_line(finished, tmp_path, how):
    """Case 7: local jobs never go on without the lock their parent held, and Ctrl-C is one
    line (submitit's job controllers print no KeyboardInterrupt tracebacks)."""
    out = tmp_path / "tiny"
    command = [ABLATE, "run", finished["spec"], "--out", out, "--no-reuse"]
    # process: signals to a launcher and to its process group
    parent = subprocess.Popen(
        [*map(str, command), "--launcher", "submitit-local"],
        env={**os.environ, "ABLATE_CACHE": str(finished["cache"])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not list(out.glob("jobs/*_submitted.pkl")) and time.monotonic() < deadline:
        time.sleep(0.1)
    controllers = [int(p.name.split("_")[0]) for p in out.glob("jobs/*_submitted.pkl")]
    assert controllers, "no local job was submitted"
    if how.startswith("SIGTERM"):
        parent.send_signal(signal.SIGTERM)
        signum = signal.SIGTERM
    else:
        os.killpg(parent.pid, signal.SIGINT)
        signum = signal.SIGINT
    _, err = parent.communicate(timeout=180)
    assert parent.returncode == 128 + signum, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # progress lines before it (stderr is a pipe: plain lines), then the one line
    assert err.strip().splitlines()[-1] == (
        f"stopped by {signal.Signals(signum).name}: finished work is kept, and the same "
        "command resumes"
    )
    assert not [pid for pid in controllers if alive(pid)]
