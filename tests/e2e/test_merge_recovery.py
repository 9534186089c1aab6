"""``ablate merge`` when things go wrong, through the installed ``ablate``: two merges into one
new folder at once lose nothing (one waits or is refused in one line, exit 2); a merge stopped
by a full disk is finished by the same command; a unit run on 1 thread and on 2 threads is one
unit, not a conflict; ``merged_from`` names each source once, with its provenance."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from ablate_cli import ABLATE, E2E, ROOT, ablate, one_line_error
from full_disk import files_limited_to

TABLES = ("results.parquet", "runs.parquet", "pretrain_metrics.parquet")
pytestmark = E2E


@pytest.fixture(scope="module")
def smoke(smoke_study) -> Path:
    """The session's smoke study (``conftest.py``); tests copy it, never change it."""
    return smoke_study


def copy_of(study: Path, to: Path) -> Path:
    shutil.copytree(study, to, ignore=shutil.ignore_patterns("report", "study.lock"))
    return to


def sorted_table(folder: Path, name: str) -> pl.DataFrame:
    frame = pl.read_parquet(folder / name)
    return frame.sort([c for c in frame.columns if frame[c].dtype != pl.List])


def assert_same_tables(folder: Path, original: Path) -> None:
    for name in TABLES:
        assert sorted_table(folder, name).equals(sorted_table(original, name)), name


def halves(smoke: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the study, each holding about half of its pre-training runs with their
    fine-tunes (the first also the baseline), as two machines that ran half each return it."""
    first, second = copy_of(smoke, tmp_path / "first"), copy_of(smoke, tmp_path / "second")
    runs = sorted(p.name for p in (smoke / "pretrain").iterdir())
    for folder, keep in ((first, set(runs[::2])), (second, set(runs[1::2]))):
        for run in (folder / "pretrain").iterdir():
            if run.name not in keep:
                drop_run(folder, run)
    shutil.rmtree(second / "baseline")
    for record in (second / "finetune").glob("*.json"):
        if json.loads(record.read_text())["run_id"] not in run_ids_of(second):
            record.unlink()
    return first, second


def run_ids_of(folder: Path) -> set[str]:
    return {p.name.rsplit("-", 1)[1] for p in (folder / "pretrain").iterdir()}


def drop_run(folder: Path, run: Path) -> None:
    """A run and its fine-tunes removed from ``folder``."""
    run_id = run.name.rsplit("-", 1)[1]
    shutil.rmtree(run)
    for record in (folder / "finetune").glob("*.json"):
        if json.loads(record.read_text())["run_id"] == run_id:
            record.unlink()


# ------------------------------------------------------------------- two merges at once


def start_merge(*args: object) -> subprocess.Popen:
    # process: two merges at once, each holding (or waiting for) the target's lock: one in a
    # process of its own, the other in the test's (``ablate``), as two users' commands
    return subprocess.Popen(
        [ABLATE, "merge", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def until_made(folder: Path, merge: subprocess.Popen) -> None:
    """Wait (sleeping: no busy loop) until ``merge`` has made ``folder`` (it locks it next), or
    has ended."""
    deadline = time.monotonic() + 600
    while not folder.exists() and merge.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture(scope="module")
def split(smoke, tmp_path_factory) -> tuple[Path, Path, Path]:
    """``halves`` of the smoke study and the first half merged alone: read-only to the tests."""
    root = tmp_path_factory.mktemp("split")
    first, second = halves(smoke, root)
    alone = root / "first-alone"
    assert ablate("merge", first, "--into", alone).returncode == 0
    return first, second, alone


# Which source each round's own process merges (the other is merged in the test's process), and
# whether the test's merge starts once the process has made the new folder (the two overlap: one
# holds the lock the other meets) or at once (the test's usually finishes first).
ROUNDS = ((0, True), (1, True), (0, False))


@pytest.mark.parametrize("wait", [False, True], ids=["refused", "waits"])
def test_two_merges_into_one_new_folder_at_once_lose_nothing(smoke, split, tmp_path, wait):
    first, second, alone = split
    sources = (first, second)
    extra = ["--wait"] if wait else []
    for round_, (in_process_of, overlap) in enumerate(ROUNDS):
        into = tmp_path / f"round-{round_}"
        merge = start_merge(sources[in_process_of], "--into", into, *extra)
        try:
            if overlap:
                until_made(into, merge)
            here = ablate("merge", sources[1 - in_process_of], "--into", into, *extra)
            out, err = merge.communicate(timeout=600)
        finally:
            merge.kill()
            merge.wait()
        there = subprocess.CompletedProcess(merge.args, merge.returncode, out, err)
        results = [there, here] if in_process_of == 0 else [here, there]
        codes = [r.returncode for r in results]
        if codes == [0, 0]:
            assert_same_tables(into, smoke)
        else:
            assert not wait, (codes, [r.stderr for r in results])
            assert sorted(codes) == [0, 2], [r.stderr for r in results]
            loser = codes.index(2)
            err = results[loser].stderr
            assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
            assert err.startswith("error: ") and "is in use by `ablate merge" in err, err
            if loser == 1:  # the first's work is whole
                assert_same_tables(into, alone)
            rerun = ablate("merge", sources[loser], "--into", into)
            assert rerun.returncode == 0, rerun.stderr
            assert_same_tables(into, smoke)
        runs = pl.read_parquet(into / "runs.parquet")
        assert runs["status"].to_list() == ["done"] * runs.height


# --------------------------------------------------------------------- an interrupted merge


def merge_with_file_limit(limit: int, *args: object) -> subprocess.CompletedProcess:
    """``ablate merge ARGS`` where no file may grow past ``limit`` bytes: its writes fail as on
    a full disk (EFBIG, which the toolkit treats as ENOSPC), at a known file."""
    with files_limited_to(limit):
        return ablate("merge", *args)


def test_a_merge_stopped_by_a_full_disk_is_finished_by_the_same_command(smoke, tmp_path):
    source = copy_of(smoke, tmp_path / "source")
    last = sorted((source / "pretrain").iterdir())[-1]  # written after most other units
    # a record a merge carries (a run's library warnings), too large for the disk below
    (last / "warnings.log").write_bytes(b"x" * 200_000)
    whole = tmp_path / "whole"
    assert ablate("merge", source, "--into", whole).returncode == 0

    into = tmp_path / "into"
    stopped = merge_with_file_limit(100_000, source, "--into", into)
    one_line_error(stopped, 1, last.name, "run the same command again")
    assert (into / "study.json").is_file(), "the target is a study folder from the first write"
    assert list((into / "pretrain").iterdir()), "the merge stopped after some units"
    assert not (into / "results.parquet").exists()
    again = ablate("merge", source, "--into", into)
    assert again.returncode == 0, again.stderr
    assert_same_tables(into, whole)
    assert [e["source"] for e in json.loads((into / "study.json").read_text())["merged_from"]] == [
        str(source)
    ]


def test_a_folder_holding_only_a_lock_is_a_new_folder(smoke, tmp_path):
    """What a merge killed before its first write leaves: the lock file, nothing else."""
    into = tmp_path / "into"
    into.mkdir()
    (into / "study.lock").write_text('{"pid": 1, "command": "ablate merge"}')
    (into / ".study.json.abc.tmp").write_text("{")  # a write cut short
    result = ablate("merge", smoke, "--into", into)
    assert result.returncode == 0, result.stderr
    assert_same_tables(into, smoke)


def test_a_refused_merge_into_a_new_folder_leaves_no_folder(smoke, tmp_path):
    other = copy_of(smoke, tmp_path / "other")
    record = next(
        r
        for r in sorted((other / "finetune").glob("*.json"))
        if "accuracy" in json.loads(r.read_text())["metrics"]
    )
    changed = json.loads(record.read_text())
    changed["metrics"]["accuracy"] += 1
    record.write_text(json.dumps(changed))
    fresh = tmp_path / "fresh"
    one_line_error(ablate("merge", smoke, other, "--into", fresh), 2, record.stem)
    assert not fresh.exists()


# ----------------------------------------------------------------- 1 thread and 2 threads

TINY = """\
name: tiny
description: one objective, one fine-tune, to run twice on different thread counts
data:
  corpus:
    paths: ["${ABLATE_DATA_DIR}/corpus/gutenberg/*.txt.gz"]
    max_documents: 3000
  tokenizer:
    vocab_size: 4096
  glue: ${ABLATE_DATA_DIR}/glue
backbone:
  preset: micro
budget:
  steps: 4
  steps_of: electra
  checkpoints: [1.0]
pretrain:
  batch_size: 8
  learning_rate: 1.0e-3
  warmup_fraction: 0.25
  log_every: 2
  eval_batches: 1
objectives:
  - {name: electra}
finetune:
  tasks: [stsb]
  seeds: [0]
  caps: {stsb: 32}
  eval_caps: {stsb: 32}
  recipe: {epochs: 1, task_epochs: {}}
  baseline: false
device: cpu
"""
"""The smoke study's data (its cache is built once per session), one objective, 4 steps, one
fine-tune on 32 examples: what a merge compares is there, at the least training."""


@pytest.fixture(scope="module")
def threads(smoke_env, tmp_path_factory) -> dict[int, Path]:
    """The tiny study run on 1 thread and on 2 (in folders apart: no reuse between them)."""
    root = tmp_path_factory.mktemp("threads")
    spec = root / "tiny.yaml"
    spec.write_text(TINY)
    env = {k: v for k, v in smoke_env.items() if k != "OMP_NUM_THREADS"}
    folders = {}
    for count in (1, 2):
        out = root / f"on-{count}" / "tiny"
        result = ablate(
            "run",
            spec,
            "--out",
            out,
            "--set",
            f"pretrain.num_threads={count}",
            "--no-reuse",
            "--no-progress",
            env=env,
        )
        assert result.returncode == 0, result.stderr
        folders[count] = out
    return folders


def test_a_unit_run_on_1_thread_and_on_2_is_one_unit(threads, tmp_path):
    one, two = threads[1], threads[2]
    (done_1,), (done_2,) = one.glob("pretrain/*/done.json"), two.glob("pretrain/*/done.json")
    assert json.loads(done_1.read_text())["threads"] == 1
    assert json.loads(done_2.read_text())["threads"] == 2
    target = copy_of(two, tmp_path / "target")
    pack = tmp_path / "one.pack.tar.gz"
    assert ablate("pack", one, "--out", pack).returncode == 0
    result = ablate("merge", pack, "--into", target)
    assert result.returncode == 0, result.stderr
    assert "0 run(s) or baseline(s) and 0 fine-tune(s) added, 2 identical" in result.stdout
    assert "2 of them computed another way" in result.stdout
    assert_same_tables(target, two)  # the target's copies kept


def test_a_different_fine_tune_metric_is_still_a_conflict(threads, tmp_path):
    two = threads[2]
    target = copy_of(two, tmp_path / "target")
    other = copy_of(two, tmp_path / "other")
    (record,) = (other / "finetune").glob("*.json")
    changed = json.loads(record.read_text())
    changed["metrics"]["spearman"] += 0.5
    record.write_text(json.dumps(changed))
    one_line_error(
        ablate("merge", other, "--into", target),
        2,
        f"fine-tune {record.stem}",
        "metrics.spearman",
        "nothing was merged",
    )


# ----------------------------------------------------------------------------- merged_from


def merged_from(folder: Path) -> list[dict]:
    return json.loads((folder / "study.json").read_text())["merged_from"]


def test_merged_from_names_each_source_once_with_its_provenance(smoke, tmp_path):
    pack = tmp_path / "smoke.pack.tar.gz"
    assert ablate("pack", smoke, "--out", pack).returncode == 0
    into = tmp_path / "merged"
    for _ in range(2):
        result = ablate("merge", pack, "--into", into)
        assert result.returncode == 0, result.stderr
    (entry,) = merged_from(into)
    study = json.loads((smoke / "study.json").read_text())
    assert entry["source"] == str(pack)
    for key in ("command", "machine", "started", "finished", "wall_s", "git_commit"):
        assert entry[key] == study[key], key
    assert shlex.split(entry["merge_command"])[:2] == ["ablate", "merge"]
    assert str(pack) in entry["merge_command"] and entry["merged_at"].endswith("+00:00")

    repacked = tmp_path / "merged.pack.tar.gz"  # a pack of the merged folder
    assert ablate("pack", into, "--out", repacked).returncode == 0
    for target in (into, tmp_path / "again"):
        assert ablate("merge", repacked, "--into", target).returncode == 0
        assert [e["source"] for e in merged_from(target)] == [str(pack)]
