"""Results from another machine, on the real smoke study through the installed ``ablate``: the
study packs into one small archive with no weights; a pack merged into an empty folder, or two
partial folders merged, give the original tables and report, and ``--collect`` reads the result;
a conflicting unit, another spec's pack, a damaged pack and a crafted one (a training state
whose rng.pt is a pickle that runs code, a member over the size limit) are refused in one line,
exit 2, with the target folder unchanged to the byte."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import polars as pl
import pytest
import yaml
from ablate_cli import E2E, SMOKE, ablate, one_line_error
from crafted_packs import crafted

from electra_ablate.analysis.results import KEY_COLUMNS

TABLES = ("results.parquet", "runs.parquet", "pretrain_metrics.parquet")
pytestmark = E2E


@pytest.fixture(scope="module")
def data_env(smoke_env):
    return smoke_env


@pytest.fixture(scope="module")
def smoke(smoke_study) -> Path:
    """The session's smoke study (``conftest.py``); tests copy it, never change it."""
    return smoke_study


@pytest.fixture(scope="module")
def pack(smoke) -> Path:
    result = ablate("pack", smoke)
    assert result.returncode == 0, result.stderr
    return smoke.parent / "smoke.pack.tar.gz"


@pytest.fixture(scope="module")
def merged(pack, tmp_path_factory) -> Path:
    """The pack merged into an empty folder (tests that refuse a merge copy it)."""
    out = tmp_path_factory.mktemp("merged") / "smoke"
    result = ablate("merge", pack, "--into", out)
    assert result.returncode == 0, result.stderr
    return out


def copy_of(study: Path, to: Path) -> Path:
    shutil.copytree(study, to, ignore=shutil.ignore_patterns("report"))
    return to


def sorted_table(folder: Path, name: str) -> pl.DataFrame:
    frame = pl.read_parquet(folder / name)
    keys = {
        "results.parquet": [k for k in KEY_COLUMNS if k != "study"],
        "runs.parquet": ["run_id"],
        "pretrain_metrics.parquet": ["run_id", "split", "step"],
    }[name]
    return frame.sort(keys)


def assert_same_tables(folder: Path, original: Path) -> None:
    for name in TABLES:
        assert sorted_table(folder, name).equals(sorted_table(original, name)), name


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    return one_line_error(result, 2, *needles)


def rewrite_json(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def test_the_smoke_study_packs_into_one_archive_under_1_mb_without_weights(smoke, pack):
    assert pack.stat().st_size < 1_000_000, pack.stat().st_size
    with tarfile.open(pack, "r:gz") as tar:
        names = [m.name for m in tar]
    assert not [n for n in names if n.endswith(".safetensors") or "/states/" in n]
    assert not [n for n in names if "/kept/" in n and not n.endswith("/kept.json")]
    kept = {f"smoke/{p.relative_to(smoke)}" for p in smoke.glob("*/*/kept/*/kept.json")}
    spec = yaml.safe_load(SMOKE.read_text())
    # each objective's checkpoints, and the no-pre-training baseline's one
    assert len(kept) == len(spec["objectives"]) * len(spec["budget"]["checkpoints"]) + 1
    assert kept <= set(names)
    finetunes = {f"smoke/{p.relative_to(smoke)}" for p in smoke.glob("finetune/*.json")}
    assert finetunes and finetunes <= set(names)


def test_a_pack_merged_into_an_empty_folder_is_the_same_study(
    smoke, smoke_report, merged, data_env, tmp_path
):
    assert_same_tables(merged, smoke)
    assert not list(merged.rglob("*.safetensors")) and not list(merged.rglob("states"))
    result = ablate("report", merged, "--out", tmp_path / "merged", env=data_env)
    assert result.returncode == 0, result.stderr
    reports, provenance = {}, {}  # the original's report is the session's (``smoke_report``)
    for name, folder in (("original", smoke_report), ("merged", tmp_path / "merged")):
        text = (folder / "report.md").read_text().splitlines()
        summary = (folder / "summary.csv").read_text()
        rows = [line for line in text if line.startswith("|")]
        reports[name] = ([row for row in rows if not is_provenance(row)], summary)
        provenance[name] = [row for row in rows if is_provenance(row)]
    assert reports["merged"] == reports["original"]
    assert any(row.startswith("| Merged from |") for row in provenance["merged"])
    assert any("smoke.pack.tar.gz" in row for row in provenance["merged"])
    assert len(reports["merged"][0]) > 20  # the tables are there

    collected = copy_of(merged, tmp_path / "collected")
    result = ablate("run", SMOKE, "--out", collected, "--collect", env=data_env)
    assert result.returncode == 0, result.stderr
    assert "pending" not in result.stdout, "every unit reads as finished without its weights"
    assert_same_tables(collected, smoke)
    assert not list(collected.rglob("*.safetensors")), "collecting trains nothing"


PROVENANCE_ROWS = ("Command", "Git commit", "Machine", "Date", "Wall time", "Merged from")


def is_provenance(row: str) -> bool:
    """A header row that says which command made the study: a merged study names each source
    and the merge instead of one command (the rest of its report is the original's)."""
    label = row.split("|")[1].strip()
    return label in PROVENANCE_ROWS or label.startswith(("Source ", "Merge command", "Own run"))


def split_in_two(smoke: Path, tmp_path: Path, env: dict) -> tuple[Path, Path]:
    """Two copies of the study, each holding about half of its finished units (the other half
    removed with their fine-tunes, as on two machines that ran half each), and one unit that
    the first finished and the second failed; each one's tables written by `--collect`."""
    first, second = copy_of(smoke, tmp_path / "first"), copy_of(smoke, tmp_path / "second")
    runs = sorted(p.name for p in (smoke / "pretrain").iterdir())
    halves = {first: set(runs[::2]), second: set(runs[1::2])}
    for folder, keep in halves.items():
        for run in (folder / "pretrain").iterdir():
            if run.name in keep:
                continue
            run_id = run.name.rsplit("-", 1)[1]
            shutil.rmtree(run)
            for record in (folder / "finetune").glob("*.json"):
                if json.loads(record.read_text())["run_id"] == run_id:
                    record.unlink()
    shutil.rmtree(second / "baseline")  # the baseline and its fine-tunes: the first's only
    failed = runs[0]  # finished in the first, failed in the second
    shutil.copytree(first / "pretrain" / failed, second / "pretrain" / failed)
    (second / "pretrain" / failed / "done.json").unlink()
    (second / "pretrain" / failed / "failed.json").write_text(
        json.dumps({"status": "failed", "message": "loss is nan at step 3", "steps": 3})
    )
    for folder in (first, second):
        result = ablate("run", SMOKE, "--out", folder, "--collect", env=env)
        assert result.returncode == 0, result.stderr
        assert "pending" in result.stdout
    return first, second


def test_two_partial_folders_of_one_study_merge_into_the_whole(smoke, data_env, tmp_path):
    first, second = split_in_two(smoke, tmp_path, data_env)
    whole = pl.read_parquet(smoke / "results.parquet").height
    for part in (first, second):
        assert 0 < pl.read_parquet(part / "results.parquet").height < whole
    packed = ablate("pack", second, "--out", tmp_path / "second.tgz")
    assert packed.returncode == 0, packed.stderr
    into = tmp_path / "merged"
    result = ablate("merge", first, tmp_path / "second.tgz", "--into", into)
    assert result.returncode == 0, result.stderr
    failed = sorted(p.name for p in (smoke / "pretrain").iterdir())[0]
    assert f"took the finished copy of pre-training run {failed}" in result.stdout
    assert "0 failed, 0 pending" in result.stdout
    assert_same_tables(into, smoke)
    report = ablate("report", into, env=data_env)
    assert report.returncode == 0, report.stderr

    # one at a time: the failed run merged first is replaced by its finished copy
    stepwise = tmp_path / "stepwise"
    assert ablate("merge", tmp_path / "second.tgz", "--into", stepwise).returncode == 0
    assert pl.read_parquet(stepwise / "runs.parquet")["status"].to_list().count("failed") == 1
    result = ablate("merge", first, "--into", stepwise)
    assert result.returncode == 0, result.stderr
    assert f"{failed} (finished in {first}, failed in {stepwise} (the target))" in result.stdout
    assert not (stepwise / "pretrain" / failed / "failed.json").exists()
    assert_same_tables(stepwise, smoke)


@pytest.mark.parametrize("unit", ["a fine-tune's metrics", "a run's summary"])
def test_a_conflicting_unit_is_refused_and_the_target_is_unchanged(smoke, merged, unit, tmp_path):
    target = copy_of(merged, tmp_path / "target")
    other = copy_of(smoke, tmp_path / "other")
    if unit == "a fine-tune's metrics":
        records = sorted((other / "finetune").glob("*.json"))  # one scored by accuracy (RTE)
        record = next(r for r in records if "accuracy" in json.loads(r.read_text())["metrics"])
        rewrite_json(record, lambda r: r["metrics"].update(accuracy=r["metrics"]["accuracy"] + 1))
        needles = (f"fine-tune {record.stem}", "metrics.accuracy")
    else:
        (run,) = (other / "pretrain").glob("electra-s0-*")
        rewrite_json(run / "done.json", lambda r: r.update(steps=r["steps"] + 1))
        needles = (f"pre-training run {run.name}", "done.json.steps")
    before = snapshot(target)
    line = refused(ablate("merge", other, "--into", target), *needles, str(target), str(other))
    assert "nothing was merged" in line
    assert snapshot(target) == before
    # two sources in conflict, into a new folder: nothing is created
    fresh = tmp_path / "fresh"
    refused(ablate("merge", smoke, other, "--into", fresh), *needles, str(smoke), str(other))
    assert not fresh.exists()


def test_timings_and_where_a_unit_ran_are_not_a_conflict(smoke, merged, tmp_path):
    target = copy_of(merged, tmp_path / "target")
    other = copy_of(smoke, tmp_path / "elsewhere")
    for done in other.glob("pretrain/*/done.json"):
        rewrite_json(done, lambda r: r.update(wall_s=r["wall_s"] * 3))
    for record in other.glob("finetune/*.json"):
        rewrite_json(record, lambda r: r["metrics"].update(wall_seconds=1.0, train_seconds=1.0))
    rewrite_json(  # the same spec run from another checkout, on another machine
        other / "study.json",
        lambda s: (
            s["spec"]["data"].update(glue="/scratch/glue", cache_dir="/scratch/cache"),
            s["spec"].update(device="cuda", description="on the cluster"),
            s.update(machine="NVIDIA H100", spec_path="/home/someone/smoke.yaml"),
        ),
    )
    result = ablate("merge", other, "--into", target)
    assert result.returncode == 0, result.stderr
    assert "0 run(s) or baseline(s) and 0 fine-tune(s) added, 38 identical" in result.stdout
    assert_same_tables(target, smoke)


def test_another_specs_pack_is_refused_and_the_target_is_unchanged(smoke, merged, tmp_path):
    target = copy_of(merged, tmp_path / "target")
    foreign = copy_of(smoke, tmp_path / "foreign")
    rewrite_json(foreign / "study.json", lambda s: s["spec"]["pretrain"].update(learning_rate=2e-3))
    assert ablate("pack", foreign, "--out", tmp_path / "foreign.tgz").returncode == 0
    before = snapshot(target)
    line = refused(
        ablate("merge", tmp_path / "foreign.tgz", "--into", target),
        str(tmp_path / "foreign.tgz"),
        "pretrain.learning_rate",
    )
    assert "another study" in line
    assert snapshot(target) == before


def test_a_truncated_pack_is_refused_and_the_target_is_unchanged(pack, merged, tmp_path):
    target = copy_of(merged, tmp_path / "target")
    truncated = tmp_path / "truncated.tgz"
    truncated.write_bytes(pack.read_bytes()[: pack.stat().st_size - 100])
    before = snapshot(target)
    refused(ablate("merge", pack, truncated, "--into", target), str(truncated), "not a whole")
    assert snapshot(target) == before


def test_a_crafted_pack_is_refused_before_anything_is_written(pack, merged, tmp_path):
    """A pack may carry only what `ablate pack` writes: a training state listed with its own
    checksum used to be merged into its run's folder, where the next `ablate run` resumed it and
    unpickled its rng.pt (this one writes a file when unpickled). And a pack's members are
    bounded in size, here with the limit lowered so that the pack stays small."""
    run = sorted(p for p in (merged / "pretrain").iterdir())[0].relative_to(merged)
    state = f"{run.as_posix()}/states/step-000000009/rng.pt"
    ran = tmp_path / "the-pickle-ran"
    pickle = f"cbuiltins\nexec\n(Vopen({str(ran)!r}, 'w').close()\ntR.".encode()
    bad = crafted(pack, tmp_path / "state.pack.tar.gz", {state: pickle})
    target = copy_of(merged, tmp_path / "target")
    before = snapshot(target)
    line = refused(ablate("merge", bad, "--into", target), str(bad), state, "nothing was merged")
    assert "is not a file `ablate pack` writes" in line
    assert snapshot(target) == before and not ran.exists()

    big = crafted(pack, tmp_path / "big.pack.tar.gz", {"notes.md": bytes(2 << 20)})
    fresh = tmp_path / "fresh"
    refused(
        ablate("merge", big, "--into", fresh, "--max-member-mib", "1"),
        "notes.md unpacks to 2.0 MiB, over the 1.0 MiB",
        "--max-member-mib",
    )
    assert not fresh.exists()


def test_records_of_an_earlier_spec_stay_out_of_the_tables(smoke, tmp_path):
    """A folder re-run after a recipe edit keeps the old fine-tune records beside the new ones
    (same run, checkpoint, task and seed; another id): its results table says which is current."""
    folder = copy_of(smoke, tmp_path / "edited")
    record = json.loads(sorted((folder / "finetune").glob("*.json"))[0].read_text())
    record |= {"job_id": "0123456789ab", "metrics": {**record["metrics"], "accuracy": 99.0}}
    (folder / "finetune" / "0123456789ab.json").write_text(json.dumps(record))
    result = ablate("merge", folder, "--into", tmp_path / "merged")
    assert result.returncode == 0, result.stderr
    assert_same_tables(tmp_path / "merged", smoke)
    (folder / "results.parquet").unlink()  # nothing says which record is current any more
    refused(ablate("merge", folder, "--into", tmp_path / "again"), "0123456789ab", "--collect")
    assert not (tmp_path / "again").exists()
