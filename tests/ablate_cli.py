"""What every end-to-end test module shares: where the repository and its smoke spec are, the
installed ``ablate`` console script run as a user runs it (in a subprocess, from the repository
root), and the marks that skip a module when the script or an optional extra is missing.

A test of the command line goes through the installed script, not an in-process runner, so a
dependency upgrade that changes how errors are raised cannot hide a crash.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

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


def ablate(
    *args: object,
    env: dict | None = None,
    umask: int | None = None,
    timeout: float = 1800,
    module: bool = False,
    **kwargs,
) -> subprocess.CompletedProcess:
    """``ablate ARGS`` as a user types it, run from the repository root; its output captured as
    text. ``env`` replaces the environment (default: this process's); ``umask`` is set in the
    child; ``module=True`` runs ``python -m electra_ablate`` instead of the console script."""
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
