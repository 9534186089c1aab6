"""What every end-to-end test module shares: where the repository and its smoke spec are, the
``ablate`` command run as a user runs it (from the repository root, its output captured), and
the marks that skip a module when the script or an optional extra is missing.

``ablate(...)`` runs the command in this process through the CLI's entry function
(``electra_ablate.cli.run_cli``, what the console script calls), as torchtune's recipe tests call
their recipes: a process start costs ~3 s of interpreter and imports, and the suite makes
hundreds of calls. ``ablate(..., process=True)`` starts the installed console script instead;
a test uses it where a process is what it checks (exit codes as the shell sees them, signals,
Ctrl-C, locks held by another process, the console script itself), one test per behaviour, so
that a dependency upgrade changing how errors escape cannot hide a crash. The in-process call
gives the command a fresh process's view where the command reads one: its own ``sys.argv``
(recorded as its command line), the environment (``env``; its ``PYTHONPATH`` on the import path,
and the modules imported from there dropped afterwards, so an edited plugin is read afresh by
the next call), the working directory, the umask, the per-process caches a command settles at
its first use, warnings shown again, and torch's thread count and compiled code afterwards as
they were.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import torch

from electra_ablate.cli import run_cli
from electra_ablate.evaluation.glue.data import glue_example_counts
from electra_ablate.infra.entry_points import _scan as entry_point_scan
from electra_ablate.infra.tracking.fanout import turn_on_again
from electra_ablate.pretraining.engine.compiling import use_compile_cache

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ROOT / "studies"
SMOKE = STUDIES / "smoke.yaml"
ABLATE = shutil.which("ablate")

needs_ablate = pytest.mark.skipif(
    ABLATE is None, reason="the ablate console script is not installed"
)
"""Skip a test (or, as ``pytestmark``, a module) when the console script is not installed."""

E2E = [pytest.mark.slow, needs_ablate]
"""The marks of an end-to-end module: slow, and skipped without the console script."""


T = TypeVar("T")


def needs_extra(module: str, extra: str) -> Callable[[T], T]:
    """Skip when an optional extra's module is missing, naming the extra that brings it, and
    mark the test ``extra`` (CI runs those with the extras uninstalled, to see them skip). A
    mark, not an ``importorskip`` in the test body, so that the skip comes before any fixture
    (and the study it trains) is set up."""
    skip = pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{module} is not installed (pip install 'electra-ablate[{extra}]')",
    )
    return lambda test: pytest.mark.extra(skip(test))


PER_PROCESS_CACHES = (glue_example_counts, use_compile_cache, entry_point_scan)
"""What a command settles once per process (``functools.cache``): cleared before each in-process
call, so that a call sees what a fresh process would (another data folder's sizes, the compile
cache its environment names, plugins installed since). So are the trackers an earlier call
turned off (``turn_on_again``): a fresh process starts with every tracker on."""


def ablate(
    *args: object,
    env: dict | None = None,
    umask: int | None = None,
    timeout: float = 1800,
    module: bool = False,
    process: bool = False,
    **kwargs,
) -> subprocess.CompletedProcess:
    """``ablate ARGS`` as a user types it, run from the repository root; its output captured as
    text. In this process (``in_process``) unless ``process=True``, ``module=True`` (``python
    -m electra_ablate``) or a ``subprocess.run`` keyword (``kwargs``) asks for a process.
    ``env`` replaces the environment (default: this process's); ``umask`` is set for the
    command; ``timeout`` bounds a process."""
    if not (process or module or kwargs):
        return in_process(*args, env=env, umask=umask)
    command = [sys.executable, "-m", "electra_ablate"] if module else [ABLATE]
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run(
        [*command, *map(str, args)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec,
        **kwargs,
    )


def in_process(
    *args: object, env: dict | None = None, umask: int | None = None
) -> subprocess.CompletedProcess:
    """``run_cli(ARGS)`` in this process, shaped as ``subprocess.run`` returns it. An exception
    that escapes the entry function (it should turn every one into a line) comes back as a
    process would show it: its traceback on stderr and exit status 1."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with (
        _fresh_process(["ablate", *argv], env, umask),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = run_cli(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["ablate", *argv], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _fresh_process(argv: list[str], env: dict | None, umask: int | None) -> Iterator[None]:
    """What a command reads from its process, set as a fresh ``ablate`` process would find it
    and put back afterwards."""
    saved_env, saved_cwd, threads = dict(os.environ), os.getcwd(), torch.get_num_threads()
    saved_path, saved_argv = list(sys.path), sys.argv
    sys.argv = argv  # what a command records as its command line (provenance, lock notes)
    extra = [entry for entry in (env or {}).get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:0] = extra
    saved_umask = os.umask(umask) if umask is not None else None
    for cached in PER_PROCESS_CACHES:
        cached.cache_clear()
    turn_on_again()
    if env is not None:
        os.environ.clear()
        os.environ.update({k: str(v) for k, v in env.items()})
    os.chdir(ROOT)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            yield
    finally:
        sys.path[:], sys.argv = saved_path, saved_argv
        for name in [n for n, m in sys.modules.items() if _imported_from(m, extra)]:
            del sys.modules[name]
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        if saved_umask is not None:
            os.umask(saved_umask)
        torch.set_num_threads(threads)
        if "torch._dynamo" in sys.modules:
            torch._dynamo.reset()  # compiled code and its recompile counts are a process's
        for cached in PER_PROCESS_CACHES:
            cached.cache_clear()
        turn_on_again()


def _imported_from(module: object, folders: list[str]) -> bool:
    """Whether ``module`` was loaded from a file under one of ``folders``."""
    file = getattr(module, "__file__", None)
    if not file or not folders:
        return False
    return any(Path(file).resolve().is_relative_to(Path(f).resolve()) for f in folders)


def one_line_error(result: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """Assert the documented failure shape: exit ``code``, one ``error:`` line on stderr holding
    every needle, no traceback. Returns the line."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
