"""The trackers of ``tracking: [tensorboard, wandb, mlflow]`` on a micro study, through the
installed ``ablate``, offline: W&B in offline mode (``WANDB_MODE=offline``), MLflow on a local
``file:`` store (the tracker allows MLflow 3's file store itself: the test does not set
``MLFLOW_ALLOW_FILE_STORE``).

The study is stopped with Ctrl-C while it pre-trains, run again to the end, then once more with
a task added: each unit still has exactly one MLflow run (found again by its tag) and one W&B
run id, and what they hold is the study's own numbers: a curve as ``metrics.jsonl`` has it,
every score as ``results.parquet`` has it. A copy of the study beside it (its units reused)
gets runs of its own; with MLflow pointed at a path it cannot write and W&B's offline folder
under a file, it says so in one warning line each, finishes as the first did and marks nothing
sent to them, so that its next ``ablate run`` catches them up. A tracker whose package is
missing is refused in one line before anything runs.

W&B's offline ``run-<id>.wandb`` files are read back with the protobuf records W&B ships
(``wandb.proto.wandb_internal_pb2``) from the LevelDB-style log they are written in.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl
import pytest
import yaml
from ablate_cli import ABLATE, E2E, ROOT, SMOKE, ablate, needs_extra, one_line_error

pytestmark = E2E

STUDY = "tracked"
KEY_TAG = "electra-ablate.key"


def needs_trackers(test):
    for module in ("tensorboard", "wandb", "mlflow"):
        test = needs_extra(module, module)(test)
    return test


def micro_spec(name: str, tracking: list[str]) -> dict:
    """One objective, its baseline, one GLUE task (stsb added by ``--set`` later)."""
    spec = yaml.safe_load(SMOKE.read_text())
    spec["name"] = name
    spec["objectives"] = [{"name": "bert_mlm"}]
    spec["budget"] = {"steps": 40, "checkpoints": [0.5, 1.0]}
    spec["pretrain"] = {
        "batch_size": 16,
        "learning_rate": 1.0e-3,
        "warmup_fraction": 0.1,
        "log_every": 4,
        "eval_batches": 1,
        "resume_every": 8,  # a row at 12 past the state at 8: logged again on resume
    }
    spec["finetune"] = {
        "tasks": ["rte"],
        "seeds": [0],
        "caps": {"rte": 32, "stsb": 32},
        "eval_caps": {"rte": 32, "stsb": 32},
        "recipe": {"epochs": 1, "task_epochs": {}},
    }
    spec["tracking"] = tracking
    return spec


def tracker_env(base: dict, root: Path, mlflow_uri: str) -> dict:
    env = {k: v for k, v in base.items() if not k.startswith(("WANDB_", "MLFLOW_"))}
    for name in ("wandb", "wandb-cache", "wandb-config", "wandb-data"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return env | {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(root / "wandb"),
        "WANDB_CACHE_DIR": str(root / "wandb-cache"),
        "WANDB_CONFIG_DIR": str(root / "wandb-config"),
        "WANDB_DATA_DIR": str(root / "wandb-data"),
        "MLFLOW_TRACKING_URI": mlflow_uri,
    }


# ------------------------------------------------------------------------ reading back


def wandb_records(path: Path) -> Iterator[object]:
    """The records of an offline ``run-<id>.wandb`` file: a 7-byte header, then 32 KiB blocks of
    chunks (4-byte checksum, 2-byte length, 1-byte type: full, first, middle, last), each
    record a ``wandb_internal_pb2.Record``."""
    from wandb.proto import wandb_internal_pb2

    data, block, pos, pending = path.read_bytes(), 32768, 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:  # the zero padding of a block's end
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 2):
            pending = chunk
        else:
            pending += chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


@dataclass
class WandbRun:
    """What the offline segments of one W&B run id hold, together."""

    run_id: str
    groups: set[str]
    names: set[str]
    projects: set[str]
    config: dict
    history: list[dict]


def wandb_runs(wandb_dir: Path) -> dict[str, WandbRun]:
    runs: dict[str, WandbRun] = {}
    for path in sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb")):
        run = None  # each file is one segment of one run, its run record first
        for record in wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run = runs.setdefault(
                    record.run.run_id, WandbRun(record.run.run_id, set(), set(), set(), {}, [])
                )
                run.groups.add(record.run.run_group)
                run.names.add(record.run.display_name)
                run.projects.add(record.run.project)
            elif run is None:
                continue
            elif kind == "config":
                for item in record.config.update:
                    run.config[item.key or ".".join(item.nested_key)] = json.loads(item.value_json)
            elif kind == "history":
                run.history.append(
                    {
                        item.key or "/".join(item.nested_key): json.loads(item.value_json)
                        for item in record.history.item
                    }
                )
    return runs


def curve(history: list[dict], key: str) -> list[tuple[int, float]]:
    return [(row["pretrain_step"], row[key]) for row in history if key in row]


def mlflow_client(uri: str):
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # this process reads it back
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def mlflow_runs(uri: str, study: str) -> list:
    client = mlflow_client(uri)
    experiment = client.get_experiment_by_name(study)
    assert experiment is not None, f"no MLflow experiment named {study}"
    return client.search_runs([experiment.experiment_id])


def jsonl_curve(unit: Path, split: str, key: str) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (unit / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r[key]) for r in rows if r["split"] == split]


def score_points(results: pl.DataFrame, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """``<family>/<task>/<metric>/seed<n>`` -> [(pretrain step, value)] of one unit."""
    points: dict[str, list[tuple[int, float]]] = {}
    for row in (
        results.filter(pl.col("run_id") == run_id).sort("pretrain_step").iter_rows(named=True)
    ):
        key = f"{row['family']}/{row['task']}/{row['metric']}/seed{row['finetune_seed']}"
        points.setdefault(key, []).append((row["pretrain_step"], row["value"]))
    return points


# ------------------------------------------------------------------------------ the study


@dataclass
class Tracked:
    root: Path
    out: Path
    env: dict
    mlflow_uri: str
    units: pl.DataFrame  # runs.parquet: one row per unit
    first_ids: set[str]  # the W&B run ids after the interrupted and the resumed run
    first_mlflow: int  # MLflow runs after them


def tracked_once(out: Path) -> bool:
    """Whether a unit's first row has reached all three trackers (a Ctrl-C then falls between
    two sends, as it mostly does: a send takes milliseconds, opening the trackers seconds)."""
    for ledger in out.glob("pretrain/*/tracking.json"):
        try:
            (entry,) = json.loads(ledger.read_text()).values()
        except ValueError:
            continue
        if all(entry.get(name, {}).get("curves") for name in ("tensorboard", "wandb", "mlflow")):
            return True
    return False


@pytest.fixture(scope="module")
def tracked(smoke_env, tmp_path_factory) -> Tracked:
    root = tmp_path_factory.mktemp("tracking")
    spec = root / "tracked.yaml"
    spec.write_text(yaml.safe_dump(micro_spec(STUDY, ["tensorboard", "wandb", "mlflow"])))
    out = root / "runs" / STUDY
    uri = f"file:{root / 'mlruns'}"
    env = tracker_env(smoke_env, root, uri)
    args = ("run", spec, "--out", out, "--no-progress")
    # process: Ctrl-C (SIGINT) while the first unit pre-trains, and exit status 130
    with (root / "int.err").open("w") as err:
        proc = subprocess.Popen([ABLATE, *map(str, args)], env=env, cwd=ROOT, stderr=err)
        deadline = time.time() + 600
        while not tracked_once(out) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, (root / "int.err").read_text()
    resumed = ablate(*args, env=env)
    assert resumed.returncode == 0, resumed.stderr
    # no tracker library talks on the terminal: the pre-flight line on rte's 32 examples alone
    (preflight,) = resumed.stderr.splitlines()
    assert preflight.startswith("warning: rte: 32 training examples × 1 epoch"), resumed.stderr
    trained = ("steps): running", "steps): resuming from step")  # from a state, if one landed
    assert any(t in resumed.stdout for t in trained), resumed.stdout  # pre-training went on
    ids = set(wandb_runs(root / "wandb"))
    first_mlflow = len(mlflow_runs(uri, STUDY))
    later = ablate(*args, "--set", "finetune.tasks=[rte, stsb]", env=env)  # evaluated later
    assert later.returncode == 0 and later.stderr == "", later.stderr
    units = pl.read_parquet(out / "runs.parquet")
    return Tracked(root, out, env, uri, units, ids, first_mlflow)


def unit_folder(tracked: Tracked, run_id: str) -> Path:
    (folder,) = [p for p in tracked.out.glob(f"*/*-{run_id}") if p.is_dir()]
    return folder


@needs_trackers
def test_mlflow_has_one_run_per_unit_with_its_config_curves_and_scores(tracked):
    runs = mlflow_runs(tracked.mlflow_uri, STUDY)
    assert len(runs) == len(tracked.units) == tracked.first_mlflow == 2
    assert len({run.data.tags[KEY_TAG] for run in runs}) == len(runs)
    client = mlflow_client(tracked.mlflow_uri)
    results = pl.read_parquet(tracked.out / "results.parquet")
    assert set(results["task"]) == {"rte", "stsb"}
    by_id = {run.data.params["run_id"]: run for run in runs}
    assert set(by_id) == set(tracked.units["run_id"])
    for unit in tracked.units.iter_rows(named=True):
        run = by_id[unit["run_id"]]
        params = run.data.params
        assert run.info.run_name == unit["label"] and params["objective"] == unit["objective"]
        assert params["study"] == STUDY and "deviations" in params
        history = {
            key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
            for key in run.data.metrics
        }
        for key, points in score_points(results, unit["run_id"]).items():
            assert history[key] == sorted(points), key
        if unit["objective"] == "bert_mlm":
            assert params["identity.pretrain.learning_rate"] == "0.001"
            folder = unit_folder(tracked, unit["run_id"])
            for split in ("train", "heldout"):
                assert history[f"{split}/loss"] == jsonl_curve(folder, split, "loss")
            assert [step for step, _ in history["kept/fraction"]] == sorted(
                json.loads((folder / "kept" / f / "kept.json").read_text())["step"]
                for f in ("0.5", "1")
            )


@needs_trackers
def test_wandb_has_one_run_id_per_unit_grouped_by_the_study(tracked):
    runs = wandb_runs(tracked.root / "wandb")
    assert set(runs) == tracked.first_ids  # resumed and evaluated later: no new run
    assert len(runs) == len(tracked.units)
    results = pl.read_parquet(tracked.out / "results.parquet")
    for run in runs.values():
        assert run.groups == {STUDY} and run.projects == {"electra-ablate"}
        assert run.config["study"] == STUDY and len(run.names) == 1
        (unit,) = tracked.units.filter(pl.col("run_id") == run.config["run_id"]).iter_rows(
            named=True
        )
        assert run.names == {unit["label"]}
        for key, points in score_points(results, unit["run_id"]).items():
            assert sorted(curve(run.history, key)) == sorted(points), key
        if unit["objective"] == "bert_mlm":
            assert run.config["identity"]["objective"] == "bert_mlm"
            folder = unit_folder(tracked, unit["run_id"])
            assert sorted(curve(run.history, "train/loss")) == jsonl_curve(folder, "train", "loss")
            rows = [r for r in run.history if "train/loss" in r]
            flops = [(r["pretrain_step"], r["pretrain_flops"]) for r in rows]
            assert sorted(flops) == jsonl_curve(folder, "train", "flops_paper")  # the FLOPs axis


@needs_trackers
def test_tensorboard_has_the_curves_in_each_units_folder(tracked):
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    (unit,) = tracked.units.filter(pl.col("objective") == "bert_mlm")["run_id"]
    folder = unit_folder(tracked, unit)
    board = accumulator.EventAccumulator(str(folder / "tensorboard"))
    board.Reload()
    logged = [(e.step, e.value) for e in board.Scalars("train/loss")]
    expected = jsonl_curve(folder, "train", "loss")
    assert [s for s, _ in logged] == [s for s, _ in expected]
    assert [v for _, v in logged] == pytest.approx([v for _, v in expected])
    flops = jsonl_curve(folder, "train", "flops_paper")  # the same curve by FLOPs
    assert [e.step for e in board.Scalars("by_flops/train/loss")] == [round(f) for _, f in flops]


@needs_trackers
def test_failing_trackers_warn_once_each_and_a_later_run_catches_them_up(tracked):
    """A study beside the first with the same units (reused, not trained again) under another
    name, TensorBoard from ``--tensorboard``: MLflow pointed under a file fails, and W&B's
    offline folder under a file (which W&B would quietly swap for the system's temporary one)
    is said too, one warning line each, while the study finishes with the same results and its
    ledgers mark nothing sent to either. The next ``ablate run``, both writable, trains nothing
    and catches them up: the W&B runs are the study's own, with the reused units' curves."""
    blocker = tracked.root / "not-a-folder"
    blocker.write_text("")
    name = f"{STUDY}_again"
    spec = tracked.root / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(micro_spec(name, ["wandb", "mlflow"])))
    out = tracked.out.parent / name
    env = tracker_env(tracked.env, tracked.root, f"file:{blocker / 'mlruns'}")
    args = ("run", spec, "--out", out, "--no-progress", "--tensorboard")
    result = ablate(*args, env={**env, "WANDB_DIR": str(blocker / "wandb")})
    assert result.returncode == 0, result.stderr
    warnings = sorted(line for line in result.stderr.splitlines() if line.strip())
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("warning: tracker mlflow failed"), warnings
    assert warnings[1].startswith("warning: tracker wandb failed"), warnings
    assert f"cannot write to {blocker / 'wandb'}" in warnings[1]
    logged = "".join(p.read_text() for p in out.glob("*/*/warnings.log"))
    assert "tracking: tracker mlflow failed" in logged and "tracking: tracker wandb" in logged
    for ledger in out.glob("*/*/tracking.json"):  # nothing marked sent to the failed ones
        (entry,) = json.loads(ledger.read_text()).values()
        assert entry["tensorboard"]["curves"] or entry["tensorboard"]["items"], entry
        for failed in ("wandb", "mlflow"):
            assert not entry.get(failed, {}).get("curves"), entry
            assert not entry.get(failed, {}).get("items"), entry
    assert not any(run.groups == {name} for run in wandb_runs(tracked.root / "wandb").values())
    columns = ["run_id", "task", "finetune_seed", "checkpoint_fraction", "metric", "value"]
    first = pl.read_parquet(tracked.out / "results.parquet").filter(pl.col("task") == "rte")
    again = pl.read_parquet(out / "results.parquet")
    assert again.select(columns).sort(columns).equals(first.select(columns).sort(columns))
    assert all(list(p.glob("events.out.tfevents.*")) for p in out.glob("*/*/tensorboard"))
    assert len(list(out.glob("*/*/tensorboard"))) == len(tracked.units)

    # in process: a fresh process's trackers (none turned off) are the harness's to give
    later_env = tracker_env(tracked.env, tracked.root, f"file:{blocker}-mlruns")
    later = ablate(*args, env=later_env)
    assert later.returncode == 0 and later.stderr == "", later.stderr
    runs = wandb_runs(tracked.root / "wandb")
    own = {run_id: run for run_id, run in runs.items() if run.groups == {name}}
    assert len(own) == len(tracked.units) and not set(own) & tracked.first_ids
    (bert,) = [run for run in own.values() if run.config["objective"] == "bert_mlm"]
    folder = unit_folder(replace(tracked, out=out), bert.config["run_id"])
    assert sorted(curve(bert.history, "train/loss")) == jsonl_curve(folder, "train", "loss")
    assert len(mlflow_runs(f"file:{blocker}-mlruns", name)) == len(tracked.units)


@needs_trackers
def test_a_tracker_whose_package_is_missing_is_refused_before_anything_runs(
    tracked, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the mlflow extra were missing
    out = tmp_path / "runs" / STUDY
    result = ablate("run", tracked.root / "tracked.yaml", "--out", out, env=tracked.env)
    one_line_error(result, 2, "tracker 'mlflow' needs the mlflow package")
    assert "pip install 'electra-ablate[mlflow]'" in result.stderr
    assert not out.exists()
