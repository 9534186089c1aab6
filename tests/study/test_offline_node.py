"""An offline GPU node has pyarrow but neither polars nor datasets (issue 36): a study unit, its
fine-tunes and probes, and ``ablate pack`` run there from a data bundle; the tables are read
with polars only where packs are merged and reported."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.resources
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
import yaml
from ablate_cli import SMOKE
from ablate_cli import ablate as at_home

from electra_ablate.scaleout import kit

MISSING_ON_THE_NODE = ("polars", "datasets")

BLOCKER = f"""
import sys
from pathlib import Path

class MissingOnTheNode:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {MISSING_ON_THE_NODE!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on the node)", name=name)
        return None

sys.meta_path.insert(0, MissingOnTheNode())
"""
"""A ``sitecustomize`` that makes the node's missing packages unimportable in every process it
reaches (the study's workers too), the way their absence would."""

TINY = {
    "name": "node",
    # the smoke spec's data, whose tokenizer and packed corpus the session's cache (smoke_env)
    # holds: the bundle is made from it, not prepared again
    "data": yaml.safe_load(SMOKE.read_text())["data"],
    "backbone": {"preset": "micro"},
    "budget": {"steps": 6, "steps_of": "electra", "checkpoints": [1.0]},
    "pretrain": {"batch_size": 8, "log_every": 3, "eval_batches": 1},
    "objectives": [{"name": "electra"}],
    "finetune": {
        "tasks": ["rte"],
        "seeds": [0],
        "caps": {"rte": 32, "rte_probe": 32},
        "eval_caps": {"rte": 32, "rte_probe": 32},
        "recipe": {"epochs": 1, "task_epochs": {}},
    },
    "evaluation": {
        "tasks": ["rtd_unigram", "rte_probe"],
        "seeds": [0],
        "params": {"rtd_unigram": {"max_sequences": 32}},
    },
    "device": "cpu",
}


NODE_SESSION = """
import contextlib, io, json, sys

from electra_ablate.cli import run_cli

answers = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli(argv)
    answers.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(answers))
"""
"""The node's commands one after another in one interpreter, each through the CLI's entry
function (what the ``ablate`` console script calls), their exit codes and output as JSON."""


def on_the_node(*commands: list, env: dict[str, str]) -> list[subprocess.CompletedProcess]:
    """Each of ``commands`` (``ablate``'s arguments) run on the node: in one fresh interpreter,
    which the blocker (a ``sitecustomize``) reaches before anything is imported, so a command
    that imports polars or datasets fails there whichever command ran before it."""
    argvs = [[str(a) for a in command] for command in commands]
    done = subprocess.run(
        [sys.executable, "-c", NODE_SESSION, json.dumps(argvs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.splitlines()[-1])
    return [
        subprocess.CompletedProcess(["ablate", *argv], code, out, err)
        for argv, (code, out, err) in zip(argvs, answers, strict=True)
    ]


@pytest.mark.slow  # process: a blocked import in a fresh interpreter
def test_the_blocker_blocks(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for name in MISSING_ON_THE_NODE:
        probe = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, timeout=60)
        assert probe.returncode != 0, f"{name} was importable through the blocker"


@pytest.mark.slow  # process: on the node, its commands in a fresh interpreter the blocker reaches
def test_a_unit_and_its_pack_run_without_polars_or_datasets(smoke_env, tmp_path):
    spec = tmp_path / "node.yaml"
    spec.write_text(yaml.safe_dump(TINY))
    home = dict(smoke_env)  # the real data and the session's data cache
    bundle = tmp_path / "bundle"
    # at home (polars and datasets installed): in this process (ablate_cli.ablate)
    made = at_home("data", "prepare", spec, "--bundle", bundle, env=home)
    assert made.returncode == 0, made.stderr

    blocker = tmp_path / "node-site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    node = {**home, "ABLATE_DATA_DIR": str(tmp_path / "no-raw-data"), "PYTHONPATH": str(blocker)}
    node.pop("ABLATE_CACHE")
    out = tmp_path / "node-out"
    # the session's plan phase: the dry run, its estimate's probes included (one wrote its
    # probe table with polars, and only the rehearsal's log showed the node's plan failing)
    plan, run, packed = on_the_node(
        ["run", spec, "--out", out, "--data-bundle", bundle, "--dry-run"],
        ["run", spec, "--out", out, "--data-bundle", bundle, "--no-progress"],
        ["pack", out, "--out", tmp_path / "node.pack.tar.gz"],
        env=node,
    )
    assert plan.returncode == 0, plan.stderr
    assert run.returncode == 0, run.stderr
    assert packed.returncode == 0, packed.stderr
    pack = tmp_path / "node.pack.tar.gz"
    assert pack.is_file()

    merged = tmp_path / "home"
    assert at_home("merge", pack, "--into", merged, env=home).returncode == 0
    results = pl.read_parquet(merged / "results.parquet")
    assert set(results["task"]) == {"rte", "rtd_unigram", "rte_probe"}
    assert results["value"].is_finite().all()
    runs = pl.read_parquet(out / "runs.parquet")  # written on the node, read here
    assert runs.filter(pl.col("objective") == "electra")["status"].to_list() == ["done"]
    curve = pl.read_parquet(out / "pretrain_metrics.parquet")
    assert curve["step"].max() == 6 and curve["loss"].dtype == pl.Float64
    report = at_home("report", merged, env=home)
    assert report.returncode == 0, report.stderr


REPO = Path(__file__).resolve().parents[2]


def test_the_kit_takes_the_node_payload_from_the_installed_package(tmp_path, monkeypatch):
    """The node's script comes from the package's data and the session and the benches ride in
    the wheel: nothing is read from a source checkout by path, so a kit is made from an
    installed wheel as well (the layout move once put ``kit.py`` a folder deeper, and only the
    rehearsal noticed that its path into the checkout pointed nowhere)."""
    source = inspect.getsource(kit)
    assert "__file__" not in source and "parents[" not in source
    payload = importlib.resources.files(kit.NODE_PACKAGE)
    kit.write_node_files(tmp_path)
    for name in kit.NODE_FILES:
        assert (tmp_path / name).read_bytes() == payload.joinpath(name).read_bytes()
    for module in ("session", "pretrain_throughput", "finetune_throughput", "step_profile"):
        assert importlib.util.find_spec(f"{kit.NODE_PACKAGE}.{module}") is not None
    packed = []
    monkeypatch.setattr(kit, "editable_source", lambda dist: None)
    monkeypatch.setattr(kit, "repack_wheel", lambda dist, folder: packed.append(dist.version))
    kit.build_project_wheel(tmp_path / "wheels", log=lambda line: None)  # no pip, no checkout
    assert packed == [importlib.metadata.version(kit.DISTRIBUTION)]


def test_an_installed_distribution_is_packed_again_as_a_wheel(tmp_path):
    """An install from a wheel has no source to build from: its own files, less byte code and
    the installer's records, make the kit's wheel, with a RECORD pip checks on the node."""
    site = tmp_path / "site"
    (site / "toy" / "__pycache__").mkdir(parents=True)
    (site / "toy" / "__init__.py").write_text("VALUE = 1\n")
    (site / "toy" / "node.sh").write_text("echo node\n")
    (site / "toy" / "__pycache__" / "x.pyc").write_bytes(b"byte code")
    info = site / "toy-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy\nVersion: 1.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    (info / "INSTALLER").write_text("pip\n")
    rows = ["toy/__init__.py,,", "toy/node.sh,,", "toy/__pycache__/x.pyc,,", "../../bin/toy,,"]
    rows += [f"toy-1.0.dist-info/{name},," for name in ("METADATA", "WHEEL", "INSTALLER", "RECORD")]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    wheel = kit.repack_wheel(importlib.metadata.PathDistribution(info), tmp_path / "wheels")
    assert wheel.name == "toy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(archive.namelist())
        record = archive.read("toy-1.0.dist-info/RECORD").decode().splitlines()
        assert archive.read("toy/node.sh") == b"echo node\n"
    info_files = [f"toy-1.0.dist-info/{name}" for name in ("METADATA", "WHEEL", "RECORD")]
    assert names == sorted(["toy/__init__.py", "toy/node.sh", *info_files])
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"VALUE = 1\n").digest()).rstrip(b"=")
    assert f"toy/__init__.py,sha256={digest.decode()},10" in record


def test_a_kit_is_not_written_over_a_folder_that_is_not_one(tmp_path):
    target = tmp_path / "work"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    result = at_home("kit", REPO / ".ci" / "rehearsal.yaml", "--out", target)
    assert result.returncode == 2 and result.stderr.startswith("error: "), result.stderr
    assert "not a kit" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert (target / "notes.txt").read_text() == "mine"


@pytest.mark.slow  # process: the node's shell script
def test_the_node_script_refuses_a_folder_that_is_not_a_kit(tmp_path):
    script = importlib.resources.files(kit.NODE_PACKAGE) / "node.sh"
    result = subprocess.run(
        ["bash", str(script), str(tmp_path), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "is not a kit" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_curve_table_types_each_column_from_all_its_lines():
    from electra_ablate.study.tables import json_lines_table

    lines = [{"step": 1, "loss": 2, "split": "train"}, {"step": 2, "loss": 1.5, "auc": 0.5}]
    table = json_lines_table(lines)
    assert table.column_names == ["step", "loss", "split", "auc"]
    assert table.schema.field("loss").type == pa.float64()  # 2 then 1.5: floats, as polars
    assert table.schema.field("step").type == pa.int64()
    assert table.column("auc").to_pylist() == [None, 0.5]
    assert table.column("split").to_pylist() == ["train", None]


def test_tables_written_with_pyarrow_read_back_with_the_polars_schemas(tmp_path):
    from electra_ablate.analysis.results import RESULTS_SCHEMA, RUNS_SCHEMA
    from electra_ablate.analysis.table_schemas import RESULTS_COLUMNS, RUNS_COLUMNS
    from electra_ablate.study.tables import write_parquet

    for columns, schema in ((RESULTS_COLUMNS, RESULTS_SCHEMA), (RUNS_COLUMNS, RUNS_SCHEMA)):
        write_parquet(tmp_path / "t.parquet", columns.empty_table())
        assert pl.read_parquet(tmp_path / "t.parquet").schema == schema
    assert RESULTS_SCHEMA["pretrain_seed"] == pl.Int64 and RESULTS_SCHEMA["study"] == pl.String
    assert RUNS_SCHEMA["diverged"] == pl.Boolean and list(RUNS_SCHEMA) == RUNS_COLUMNS.names
