"""The header of a merged study names every source and the merges (issue 52, item 6).

``ablate merge`` writes ``study.json`` from its first source (or the folder merged into), so
its top-level command, machine, date and wall time are one source's, not the study's. The
header must say where each part came from instead: every entry of ``merged_from`` with what it
recorded (``not recorded`` for what an older entry lacks) and the merge command(s).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_report import make_study_dir

from electra_ablate.report import write_report
from electra_ablate.report.header import header

FIRST = {
    "command": "ablate run studies/synthetic.yaml --shard 1/2 --out /scratch/a",
    "machine": "NVIDIA H100, torch 2.5.0",
    "started": "2026-01-02T03:04:05+00:00",
    "finished": "2026-01-02T05:06:07+00:00",
    "wall_s": 7322.0,
    "git_commit": "0123abc",
}
MERGE_ONE = "ablate merge a.pack.tar.gz /scratch/b --into runs/synthetic"
MERGED_FROM = [
    {
        "source": "a.pack.tar.gz",
        "packed_on": "node-1",
        "packed_from": "/scratch/a",
        **FIRST,
        "merge_command": MERGE_ONE,
        "merged_at": "2026-01-03T10:00:00+00:00",
    },
    {
        "source": "/scratch/b",
        "folder": "/scratch/b",
        "command": "ablate run studies/synthetic.yaml --shard 2/2 --out /scratch/b --collect",
        "machine": "x86_64 CPU, 16 cores, 16 threads, torch 2.5.0",
        "started": "2026-01-02T06:00:00+00:00",
        "finished": "2026-01-02T06:00:01+00:00",
        "wall_s": 0.8,
        "git_commit": None,
        "merge_command": MERGE_ONE,
        "merged_at": "2026-01-03T10:00:00+00:00",
    },
    {  # written by an older `ablate merge`: only where it came from and when it finished
        "source": "old.pack.tar.gz",
        "packed_on": "vm",
        "packed_from": "/tmp/old",
        "finished": "2025-12-30T00:00:00+00:00",
    },
]


def header_lines(text: str) -> dict[str, str]:
    """The header table's rows, by their first cell."""
    table = text.split("## Provenance", 1)[-1].split("\n\n## ", 1)[0]
    rows = [line.split(" | ", 1) for line in table.splitlines() if line.startswith("| ")]
    return {row[0][2:]: row[1].removesuffix(" |") for row in rows if len(row) == 2}


@pytest.fixture(scope="module")
def merged_text(tmp_path_factory) -> str:
    """The merged study's report, written once for the tests that read it."""
    directory = make_study_dir(tmp_path_factory.mktemp("merged") / "synthetic")
    study = json.loads((directory / "study.json").read_text())
    study |= FIRST | {"merged_from": MERGED_FROM}  # as merge writes it: the first source's
    (directory / "study.json").write_text(json.dumps(study))
    return write_report(directory).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def merged(merged_text) -> dict[str, str]:
    return header_lines(merged_text)


def test_the_first_screen_gives_no_wall_time_for_a_merge(merged_text):
    lead = merged_text.split("## Provenance", 1)[0]
    assert "merged from 3 sources (each one's wall time: Provenance)" in lead
    assert "wall time 2 h" not in lead


def test_no_source_is_presented_as_the_whole_study(merged):
    for row in ("Command", "Machine", "Date", "Wall time", "Git commit"):
        assert row not in merged, (row, merged.get(row))
    assert "3 sources" in merged["Merged from"]


def test_every_source_is_named_with_what_it_recorded(merged):
    first, second, old = merged["Source 1"], merged["Source 2"], merged["Source 3"]
    assert "pack `a.pack.tar.gz`" in first and "node-1" in first and "`/scratch/a`" in first
    assert f"`{FIRST['command']}`" in first
    assert FIRST["machine"] in first and "`0123abc`" in first
    assert f"{FIRST['started']} → {FIRST['finished']}" in first and "2 h 02 min" in first
    assert "folder `/scratch/b`" in second and "--shard 2/2" in second
    assert "x86_64 CPU, 16 cores" in second and "1 s" in second
    assert "git commit not recorded" in second
    assert "pack `old.pack.tar.gz`" in old and "`/tmp/old`" in old
    for missing in ("command", "machine", "git commit", "wall time"):
        assert f"{missing} not recorded" in old, (missing, old)
    assert "not recorded → 2025-12-30T00:00:00+00:00" in old


def test_the_merge_commands_are_named(merged):
    merges = merged["Merge commands"]
    assert f"`{MERGE_ONE}` at 2026-01-03T10:00:00+00:00 (sources 1, 2)" in merges
    assert "not recorded (source 3)" in merges


def test_an_older_merge_gets_its_first_sources_record_from_the_top_level():
    """An older ``merged_from`` entry kept only ``finished``; the study's top level is its
    first source's own record (merge copies it), so the header names it as that source's."""
    study = {
        **FIRST,
        "merged_from": [{"source": "x.pack.tar.gz", "packed_on": "vm", "packed_from": "/t/x"}],
    }
    study["merged_from"][0]["finished"] = FIRST["finished"]
    rows = header_lines(header(study, Path("runs/x"), None, None))
    assert f"`{FIRST['command']}`" in rows["Source 1"] and "2 h 02 min" in rows["Source 1"]
    assert rows["Merge command"] == "not recorded"
    assert "Command" not in rows and "Own run" not in rows


def test_a_folders_own_run_before_a_merge_is_its_own_row():
    """Merged into an existing study folder, the top level is that folder's own run."""
    study = {**FIRST, "merged_from": [MERGED_FROM[2]]}
    rows = header_lines(header(study, Path("runs/x"), None, None))
    assert f"`{FIRST['command']}`" in rows["Own run (before merging)"]
    assert "command not recorded" in rows["Source 1"]


def test_an_unmerged_study_keeps_its_single_command_row():
    rows = header_lines(header(dict(FIRST), Path("runs/x"), None, None))
    assert rows["Command"] == f"`{FIRST['command']}`"
    assert rows["Wall time"] == "2 h 02 min" and "Source 1" not in rows
