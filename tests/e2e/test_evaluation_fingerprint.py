"""Results evaluated on other GLUE data never merge into one study (issue 52, item 1).

The corpus fingerprint says nothing of the evaluation data: two shards of the smoke study, one
fine-tuned on the real RTE and one on a copy whose validation set has 40 labels flipped, merged
silently. ``study.json`` now records, per evaluated task, a fingerprint of the data its results
were read from (``evaluation_fingerprints``), and ``ablate merge`` refuses sources whose
fingerprints for one task differ, in one line naming the task and both. The altered shard is
made without pre-training anything: a copy of the session's smoke study, re-run as shard 2/2 on
the altered GLUE folder, fine-tunes only its share of RTE again (STS-B's bytes are the same).
All through the installed ``ablate``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ablate_cli import E2E, SMOKE, ablate, one_line_error

pytestmark = E2E

FLIPPED = 40


def copy_of(study: Path, to: Path) -> Path:
    shutil.copytree(study, to, ignore=shutil.ignore_patterns("report", "*.lock"))
    return to


def recorded(study: Path) -> dict:
    return json.loads((study / "study.json").read_text())


def older_copy(study: Path, to: Path) -> Path:
    """A copy of ``study`` as a study made before evaluation fingerprints records it."""
    older = copy_of(study, to)
    record = recorded(older)
    del record["evaluation_fingerprints"]
    (older / "study.json").write_text(json.dumps(record, indent=2))
    return older


def refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    return one_line_error(result, 2, *needles)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def glue_copy(real: Path, into: Path, flipped: int = 0) -> Path:
    """A GLUE folder with the smoke study's tasks copied byte for byte (their files, not their
    read-only modes, so the copy can be written), but for the first ``flipped`` labels of RTE's
    validation set, flipped."""
    for task in ("rte", "stsb"):
        shutil.copytree(real / task, into / task, copy_function=shutil.copyfile)
    if flipped:
        validation = into / "rte" / "validation.parquet"
        table = pq.read_table(validation)
        labels = table.column("label").to_pylist()
        labels[:flipped] = [1 - label for label in labels[:flipped]]
        column = pa.array(labels, type=table.schema.field("label").type)
        table = table.set_column(table.schema.get_field_index("label"), "label", column)
        pq.write_table(table, validation)
    return into


@pytest.fixture(scope="module")
def shards(smoke_study, smoke_env, tmp_path_factory) -> dict[str, Path]:
    """Shards of the smoke study, each in its own folder as two machines make them: ``first``
    (1/2) on the real GLUE data, ``real`` (2/2) on a copy of it with the same bytes elsewhere,
    ``altered`` (2/2) on a copy whose RTE validation set has 40 labels flipped. Nothing is
    pre-trained: a copy of the session's smoke study beside them lends its finished runs
    (``ablate run`` reuses identical units from a study folder beside its own); each shard
    fine-tunes its share. Read-only to the tests."""
    root = tmp_path_factory.mktemp("evaluation-data")
    glue = Path(smoke_env["ABLATE_DATA_DIR"]) / "glue"
    copy_of(smoke_study, root / "runs" / "smoke")
    folders = {}
    for name, shard, flipped in (
        ("first", "1/2", None),
        ("real", "2/2", 0),
        ("altered", "2/2", FLIPPED),
    ):
        out = root / "runs" / name
        data = glue if flipped is None else glue_copy(glue, root / f"glue-{name}", flipped)
        result = ablate(
            "run", SMOKE, "--out", out, "--shard", shard, "--set", f"data.glue={data}",
            "--no-progress", env=smoke_env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        folders[name] = out
    return folders


def test_study_json_records_each_tasks_evaluation_data(shards):
    first = recorded(shards["first"])["evaluation_fingerprints"]
    assert set(first) == {"rte", "stsb"}
    assert all(isinstance(v, str) and len(v) == 16 for v in first.values())
    same = recorded(shards["real"])["evaluation_fingerprints"]
    assert same == first  # the same bytes in another folder are the same data
    altered = recorded(shards["altered"])["evaluation_fingerprints"]
    assert altered["stsb"] == first["stsb"] and altered["rte"] != first["rte"]


def test_a_merge_of_shards_evaluated_on_other_data_is_refused_naming_task_and_both(
    shards, smoke_env, tmp_path
):
    """The issue's case: exit 0 with rows of both data sets, before."""
    into = tmp_path / "merged"
    result = ablate("merge", shards["first"], shards["altered"], "--into", into, env=smoke_env)
    line = refused(result, "rte", "nothing was merged")
    assert recorded(shards["first"])["evaluation_fingerprints"]["rte"] in line
    assert recorded(shards["altered"])["evaluation_fingerprints"]["rte"] in line
    assert recorded(shards["first"])["data_fingerprints"][0] not in line  # not the corpus's
    assert not into.exists()


def test_a_merge_into_a_folder_evaluated_on_other_data_is_refused(shards, smoke_env, tmp_path):
    into = copy_of(shards["first"], tmp_path / "target")
    before = snapshot(into)
    result = ablate("merge", shards["altered"], "--into", into, env=smoke_env)
    line = refused(result, "rte")
    assert recorded(shards["altered"])["evaluation_fingerprints"]["rte"] in line
    assert snapshot(into) == before


def test_shards_evaluated_on_the_same_data_elsewhere_merge(shards, smoke_env, tmp_path):
    into = tmp_path / "merged"
    result = ablate("merge", shards["first"], shards["real"], "--into", into, env=smoke_env)
    assert result.returncode == 0, result.stderr
    assert (
        recorded(into)["evaluation_fingerprints"]
        == recorded(shards["first"])["evaluation_fingerprints"]
    )


def test_a_study_recorded_before_evaluation_fingerprints_still_merges(shards, smoke_env, tmp_path):
    """As for the corpus fingerprint: an older ``study.json`` holds none, and passes."""
    older = older_copy(shards["altered"], tmp_path / "older")
    into = tmp_path / "merged"
    result = ablate("merge", shards["first"], older, "--into", into, env=smoke_env)
    assert result.returncode == 0, result.stderr


def test_an_older_study_first_does_not_let_two_that_differ_through(shards, smoke_env, tmp_path):
    """Sources are compared pair by pair, not each with the first alone."""
    older = older_copy(shards["real"], tmp_path / "older")
    into = tmp_path / "merged"
    sources = (older, shards["first"], shards["altered"])
    result = ablate("merge", *sources, "--into", into, env=smoke_env)
    refused(result, "rte", recorded(shards["altered"])["evaluation_fingerprints"]["rte"])
    assert not into.exists()
