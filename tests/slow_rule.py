"""The rule of the ``slow`` mark, which keeps ``pytest -m "not slow"`` the working tier (every
test that needs neither the real data nor a process), applied by ``tests/conftest.py`` rather
than remembered by each test's author:

- a test whose fixtures reach the real data (``REAL_DATA``, directly or through another fixture
  such as ``smoke_env``) is marked slow at collection (``mark_slow``);
- a test not marked slow that starts a process (``subprocess``, ``multiprocessing``: an
  ``ablate`` process, a study's workers) or compiles a graph with ``torch.compile`` (tens of
  seconds of the compiler's work on a CPU) fails at its teardown, naming the first process or
  the graphs and the mark to add (``ProcessRecorder``, ``unmarked_process``);
- outside the slow tests ``ABLATE_DATA_DIR`` is unset, so a test reading the real data through
  it fails there rather than passing only on a machine that has them.
"""

from __future__ import annotations

import multiprocessing.process
import subprocess
import sys
from collections.abc import Iterable

import pytest

REAL_DATA = frozenset({"shared_data", "shared_data_dir"})
"""The fixtures that hand a test the real data folder (tests/conftest.py)."""


def mark_slow(items: Iterable[pytest.Item]) -> None:
    """Mark ``slow`` every item whose fixture closure holds a ``REAL_DATA`` fixture."""
    for item in items:
        if REAL_DATA & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def compiled_graphs() -> int:
    """Graphs ``torch.compile`` has compiled in this process so far (0 before its first use:
    nothing here imports the compiler)."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    return int(dynamo.counters["stats"]["unique_graphs"]) if dynamo is not None else 0


class ProcessRecorder:
    """Records each process started while installed (through ``monkeypatch``, so it is undone
    at the test's end; the process still starts), and, read by ``compiles``, the graphs
    compiled since."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.graphs_before = compiled_graphs()
        self.started: list[str] = []
        popen_init = subprocess.Popen.__init__
        process_start = multiprocessing.process.BaseProcess.start

        def recording_popen(popen, args, *rest, **kwargs) -> None:
            self.started.append(f"subprocess {args!r}"[:160])
            popen_init(popen, args, *rest, **kwargs)

        def recording_start(process) -> None:
            self.started.append(f"multiprocessing {process!r}"[:160])
            process_start(process)

        monkeypatch.setattr(subprocess.Popen, "__init__", recording_popen)
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", recording_start)

    def compiles(self) -> list[str]:
        """``started`` and, if any graph was compiled since, how many: what the rule fails."""
        graphs = compiled_graphs() - self.graphs_before
        return [*self.started, *([f"torch.compile: {graphs} graph(s)"] if graphs > 0 else [])]


def unmarked_process(nodeid: str, started: list[str]) -> str | None:
    """The failure of a test not marked slow that started ``started`` (None if it started none)."""
    if not started:
        return None
    what = "compiles" if started[0].startswith("torch.compile") else "starts a process"
    return (
        f"{nodeid} {what} ({started[0]}) but is not marked slow: add "
        "@pytest.mark.slow (or `pytestmark = E2E` on an end-to-end module) so that "
        '`pytest -m "not slow"` stays the working tier (tests/slow_rule.py)'
    )
