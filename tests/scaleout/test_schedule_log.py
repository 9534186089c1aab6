"""A study's ``schedule.jsonl`` as files see it, in this process: each event one appended line;
a log that cannot be written costs a line on stderr, never the work; a pack carries it; a merge
keeps every source's lines once and refuses a damaged log before writing anything. (The log a
real ``ablate run`` writes is ``test_one_card_workers.py``.)"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import StudyLayout
from electra_ablate.scaleout.merge import Source, merged_schedule
from electra_ablate.scaleout.packs import left_behind
from electra_ablate.study.execute import log_event

WHAT = {
    "kind": "finetune",
    "label": "electra",
    "seed": 0,
    "run_id": "r1",
    "job_id": "j1",
    "task": "rte",
    "fraction": 1.0,
    "finetune_seed": 0,
}


def test_each_event_is_one_appended_json_line(tmp_path):
    study = SimpleNamespace(layout=StudyLayout(tmp_path / "study"))
    log_event(study, "start", WHAT)
    log_event(study, "end", WHAT, status="done")
    lines = (tmp_path / "study" / "schedule.jsonl").read_text().splitlines()
    start, end = (json.loads(line) for line in lines)
    assert start["event"] == "start" and end["event"] == "end" and end["status"] == "done"
    assert start.items() >= WHAT.items() and start["t"] <= end["t"] and start["pid"] > 0
    assert "status" not in start


def test_a_log_that_cannot_be_written_warns_and_the_work_goes_on(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    study = SimpleNamespace(layout=StudyLayout(tmp_path / "file" / "study"))  # not a folder
    log_event(study, "start", WHAT)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: ") and "start of electra not logged" in line


def test_a_pack_carries_the_log(tmp_path):
    layout = StudyLayout(tmp_path)
    assert left_behind(layout, layout.schedule_log) is None


def source(name: str, lines: list[str] | None) -> Source:
    files = {} if lines is None else {"schedule.jsonl": "".join(f"{x}\n" for x in lines).encode()}
    return Source(name, files, {})


def test_a_merge_keeps_every_sources_lines_once_the_targets_first():
    a, b, c = (json.dumps({"event": "start", "t": t, "pid": 1}) for t in (1.0, 2.0, 3.0))
    merged = merged_schedule([source("target", [b]), source("p1", [a, b]), source("p2", None)])
    assert merged.decode().splitlines() == [b, a]
    assert merged_schedule([source("p1", [c, a]), source("p2", [a])]).decode() == f"{c}\n{a}\n"
    assert merged_schedule([source("p1", None)]) == b""


@pytest.mark.parametrize("bad", ['{"event": "start", "t"', "[1, 2]"])
def test_a_damaged_log_is_refused_naming_its_source(bad: str):
    good = json.dumps({"event": "start", "t": 1.0})
    with pytest.raises(InputError, match=r"^p2: schedule.jsonl is damaged"):
        merged_schedule([source("p1", [good]), source("p2", [good, bad])])


def test_the_log_lives_in_the_study_folder():
    assert StudyLayout(Path("s")).schedule_log == Path("s") / "schedule.jsonl"
