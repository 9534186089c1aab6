"""Shared test setup.

- The Hugging Face hub is unreachable here, so every test runs offline (set before any test
  module imports ``datasets``, which reads these once at import).
- Under ``pytest-xdist`` (``-n auto``, as the README's test command runs) each worker gets one
  torch thread, and so do the ``ablate`` processes it starts: two workers on two cores must not
  each ask for both. Tests that compare two trainings to the bit run both under the same count.
- The expensive end-to-end fixtures are made once per test session, not once per worker: the
  smoke study's data cache and the smoke study itself live in a folder all workers share, and the
  first worker to need one builds it under a file lock while the others wait for it.
- The working tier, ``pytest -m "not slow"``, holds every test that needs neither the real data
  nor a process; ``tests/slow_rule.py`` is the rule of the ``slow`` mark, applied here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from ablate_cli import ABLATE, SMOKE, ablate
from slow_rule import ProcessRecorder, mark_slow, unmarked_process

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"  # read by the ablate processes a worker starts
    torch.set_num_threads(1)


def _shared_data_root() -> Path:
    """The real data folder (``$ABLATE_DATA_DIR`` or the repo's sibling ``../shared/data``)."""
    root = Path(
        os.environ.get("ABLATE_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    if not (root / "corpus").is_dir() or not (root / "glue").is_dir():
        pytest.skip(f"real data not found at {root} (set ABLATE_DATA_DIR)")
    return root


@pytest.fixture
def shared_data() -> Path:
    return _shared_data_root()


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """Session-scoped twin of ``shared_data`` for expensive module-scoped fixtures."""
    return _shared_data_root()


@pytest.fixture
def one_thread():
    """Tests that run many tiny models (the contract, Hugging Face imports) go faster on one
    thread than on two: their matmuls are too small to split."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session shares (the session's own temporary folder
    when there are no workers)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def built_once(folder: Path) -> Iterator[bool]:
    """Hold the session-wide lock of ``folder``; yields whether it still has to be built. The
    builder must create ``folder / ".built"`` when done, so a failed build is tried again (and
    fails again, in the next test that needs it) instead of being read half-made."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield not (folder / ".built").exists()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def smoke_env(shared_data_dir, session_dir) -> dict[str, str]:
    """The environment of the session's smoke-data tests: the real data and one data cache, in
    which the smoke spec's tokenizer and packed corpus are built once, before any test uses it
    (a cache entry's build holds a lock, so tests started together would otherwise queue
    behind one another's builds, each paying for its own process)."""
    if ABLATE is None:
        pytest.skip("the ablate console script is not installed")
    cache = session_dir / "smoke-cache"
    env = {**os.environ, "ABLATE_DATA_DIR": str(shared_data_dir), "ABLATE_CACHE": str(cache)}
    env.pop("ABLATE_DEBUG", None)
    with built_once(cache) as todo:
        if todo:
            result = ablate("data", "prepare", SMOKE, env=env, timeout=1800)
            assert result.returncode == 0, result.stderr
            (cache / ".built").touch()
    return env


@pytest.fixture(scope="session")
def smoke_study(smoke_env, session_dir) -> Path:
    """The smoke study run once per session in one process, through the installed ``ablate``:
    the reference that other ways of running it (packs, shards, cluster jobs, data bundles,
    workers, a resume) are compared with. Tests copy it or read it, never change it."""
    root = session_dir / "smoke-reference"
    out = root / "runs" / "smoke"
    with built_once(root) as todo:
        if todo:
            result = ablate("run", SMOKE, "--out", out, "--no-progress", env=smoke_env)
            assert result.returncode == 0, result.stderr
            (root / ".built").touch()
    return out


@pytest.fixture(scope="session")
def smoke_report(smoke_study, smoke_env, session_dir) -> Path:
    """The report folder of the session's smoke study (``ablate report STUDY --out FOLDER``),
    written once for the tests that read it; they read it or report it again elsewhere."""
    out = session_dir / "smoke-report"
    with built_once(out) as todo:
        if todo:
            result = ablate("report", smoke_study, "--out", out, env=smoke_env, timeout=900)
            assert result.returncode == 0, result.stderr
            (out / ".built").touch()
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``slow`` mark where the rule puts it (before ``-m`` selects: hence ``tryfirst``),
    then the order of the tests (``in_order``)."""
    mark_slow(items)
    in_order(items)


@pytest.fixture(autouse=True)
def slow_rule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Outside the slow tests: no ``ABLATE_DATA_DIR``; a process started or a graph compiled fails
    the test."""
    if request.node.get_closest_marker("slow"):
        yield
        return
    monkeypatch.delenv("ABLATE_DATA_DIR", raising=False)
    recorder = ProcessRecorder(monkeypatch)
    yield
    failure = unmarked_process(request.node.nodeid, recorder.compiles())
    if failure:
        pytest.fail(failure, pytrace=False)


def in_order(items: list[pytest.Item]) -> None:
    """Modules with slow tests first, each module's tests kept together and in order. xdist
    deals whole modules out in this order (``--no-loadscope-reorder`` in ``pyproject.toml``;
    by default it would deal the modules with the most tests first, and a long module with few
    tests would start last and finish alone). Among the slow modules, those that do not wait
    for the session's smoke data go first: while one worker builds it, the others have work."""
    first_index: dict[Path, int] = {}
    slow: set[Path] = set()
    waits: set[Path] = set()
    for index, item in enumerate(items):
        first_index.setdefault(item.path, index)
        if item.get_closest_marker("slow"):
            slow.add(item.path)
        if "smoke_env" in getattr(item, "fixturenames", ()):
            waits.add(item.path)
    items.sort(key=lambda item: (item.path not in slow, item.path in waits, first_index[item.path]))
