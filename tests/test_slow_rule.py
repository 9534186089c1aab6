"""The rule of the ``slow`` mark (tests/slow_rule.py): what marks a test slow, and what fails a
test that should have been. Nothing here starts a process: the recorded ones fail to start."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
import sys
import types

import pytest
from slow_rule import REAL_DATA, ProcessRecorder, mark_slow, unmarked_process


class Item:
    """What ``mark_slow`` reads of a collected test."""

    def __init__(self, *fixtures: str) -> None:
        self.fixturenames = list(fixtures)
        self.marks: list[str] = []

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)


@pytest.mark.parametrize("fixture", sorted(REAL_DATA))
def test_a_test_reaching_the_real_data_is_marked_slow(fixture):
    reaching, not_reaching = Item("tmp_path", "smoke_env", fixture), Item("tmp_path")
    mark_slow([reaching, not_reaching])
    assert reaching.marks == ["slow"] and not_reaching.marks == []


@pytest.mark.slow  # else the rule itself, installed around every other test, would fail it
def test_a_process_started_is_recorded_and_named(monkeypatch):
    recorder = ProcessRecorder(monkeypatch)
    assert unmarked_process("t.py::test_x", recorder.started) is None
    with pytest.raises(FileNotFoundError):  # recorded before the start fails: none runs
        subprocess.run(["/nonexistent/ablate", "run"])

    class NeverStarts(multiprocessing.process.BaseProcess):
        @staticmethod
        def _Popen(process):
            raise RuntimeError("not started")

    with pytest.raises(RuntimeError, match="not started"):
        NeverStarts(target=print).start()
    assert recorder.started[0].startswith("subprocess ['/nonexistent/ablate', 'run']")
    assert recorder.started[1].startswith("multiprocessing <NeverStarts")
    failure = unmarked_process("t.py::test_x", recorder.started)
    assert failure.startswith("t.py::test_x starts a process (subprocess ['/nonexistent/")
    assert "@pytest.mark.slow" in failure and 'pytest -m "not slow"' in failure


@pytest.mark.slow  # else the rule around it would read the planted count
def test_a_compiled_graph_is_named(monkeypatch):
    recorder = ProcessRecorder(monkeypatch)
    assert recorder.compiles() == []
    counters = {"stats": {"unique_graphs": recorder.graphs_before + 2}}
    monkeypatch.setitem(
        sys.modules, "torch._dynamo.utils", types.SimpleNamespace(counters=counters)
    )
    assert recorder.compiles() == ["torch.compile: 2 graph(s)"]
    failure = unmarked_process("t.py::test_y", recorder.compiles())
    assert failure.startswith("t.py::test_y compiles (torch.compile: 2 graph(s)) but is not")


def test_outside_the_slow_tests_the_real_data_cannot_be_reached():
    assert "ABLATE_DATA_DIR" not in os.environ
