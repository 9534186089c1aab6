"""An offline GPU node has pyarrow but neither polars nor datasets (issue 36): a study unit, its
fine-tunes and probes, and ``ablate pack`` run there from a data bundle; the tables are read
with polars only where packs are merged and reported."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
import yaml

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
    "data": {
        "corpus": {"paths": ["${ABLATE_DATA_DIR}/corpus/gutenberg/*.txt.gz"], "max_documents": 300},
        "tokenizer": {"vocab_size": 1024},
        "glue": "${ABLATE_DATA_DIR}/glue",
    },
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


def ablate(*args, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = shutil.which("ablate")
    if command is None:
        pytest.skip("the ablate console script is not installed")
    return subprocess.run(
        [command, *map(str, args)], env=env, capture_output=True, text=True, timeout=900
    )


def test_the_blocker_blocks(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for name in MISSING_ON_THE_NODE:
        probe = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, timeout=60)
        assert probe.returncode != 0, f"{name} was importable through the blocker"


@pytest.mark.slow
def test_a_unit_and_its_pack_run_without_polars_or_datasets(shared_data, tmp_path):
    spec = tmp_path / "node.yaml"
    spec.write_text(yaml.safe_dump(TINY))
    home = {**os.environ, "ABLATE_DATA_DIR": str(shared_data), "ABLATE_CACHE": str(tmp_path)}
    bundle = tmp_path / "bundle"
    made = ablate("data", "prepare", spec, "--bundle", bundle, env=home)
    assert made.returncode == 0, made.stderr

    blocker = tmp_path / "node-site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    node = {**home, "ABLATE_DATA_DIR": str(tmp_path / "no-raw-data"), "PYTHONPATH": str(blocker)}
    node.pop("ABLATE_CACHE")
    out = tmp_path / "node-out"
    run = ablate("run", spec, "--out", out, "--data-bundle", bundle, "--no-progress", env=node)
    assert run.returncode == 0, run.stderr
    pack = tmp_path / "node.pack.tar.gz"
    packed = ablate("pack", out, "--out", pack, env=node)
    assert packed.returncode == 0, packed.stderr

    merged = tmp_path / "home"
    assert ablate("merge", pack, "--into", merged, env=home).returncode == 0
    results = pl.read_parquet(merged / "results.parquet")
    assert set(results["task"]) == {"rte", "rtd_unigram", "rte_probe"}
    assert results["value"].is_finite().all()
    runs = pl.read_parquet(out / "runs.parquet")  # written on the node, read here
    assert runs.filter(pl.col("objective") == "electra")["status"].to_list() == ["done"]
    curve = pl.read_parquet(out / "pretrain_metrics.parquet")
    assert curve["step"].max() == 6 and curve["loss"].dtype == pl.Float64
    report = ablate("report", merged, env=home)
    assert report.returncode == 0, report.stderr


REPO = Path(__file__).resolve().parents[2]


def test_a_kit_is_made_from_this_source_checkout():
    """The kit finds the node script and the bench in the checkout it is installed from (the
    layout move put ``kit.py`` one folder deeper and the rehearsal was the only thing to notice)."""
    assert kit.PROJECT_ROOT == REPO
    assert (kit.GPU_FOLDER / "node.sh").is_file()
    assert all((REPO / "bench" / name).is_file() for name in kit.BENCH_FILES)


def test_a_kit_is_not_written_over_a_folder_that_is_not_one(tmp_path):
    target = tmp_path / "work"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    result = ablate("kit", REPO / "gpu" / "rehearsal.yaml", "--out", target, env=dict(os.environ))
    assert result.returncode == 2 and result.stderr.startswith("error: "), result.stderr
    assert "not a kit" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert (target / "notes.txt").read_text() == "mine"


def test_the_node_script_refuses_a_folder_that_is_not_a_kit(tmp_path):
    script = REPO / "gpu" / "node.sh"
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
