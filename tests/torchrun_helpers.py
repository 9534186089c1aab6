"""What the ``torchrun`` tests share: a micro study spec on the smoke study's data (which the
session's ``smoke_env`` cache already holds, so no test prepares data of its own and no rank
waits on another building it), ``torchrun --standalone --nproc_per_node 2 $(which ablate) run``
as a user types it, and a ``PYTHONPATH`` folder that registers a test objective the way a
third-party package does.

``--standalone`` lets torchrun's own rendezvous bind a free port itself, so two of these tests
running at the same time under xdist cannot take each other's port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ablate_cli import ABLATE, SMOKE

TORCHRUN = shutil.which("torchrun")

needs_torchrun = pytest.mark.skipif(
    TORCHRUN is None or ABLATE is None,
    reason="torchrun or the ablate console script is not installed",
)


def micro_spec(folder: Path, name: str, **blocks) -> Path:
    """A study named ``name`` on the ``micro`` preset and the CPU, with the smoke study's data
    block (``${ABLATE_DATA_DIR}`` resolved from the environment) and ``blocks`` (``budget``,
    ``pretrain``, ``objectives``, ``finetune``, a ``backbone`` of its own...) on top."""
    data = yaml.safe_load(SMOKE.read_text())["data"]
    spec = {"name": name, "data": data, "backbone": {"preset": "micro"}, "device": "cpu", **blocks}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def with_pythonpath(env: dict[str, str], *folders: Path) -> dict[str, str]:
    """``env`` with ``folders`` in front of its ``PYTHONPATH``."""
    paths = [str(folder) for folder in folders] + [env.get("PYTHONPATH", "")]
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def objective_plugin(folder: Path, name: str, target: str) -> Path:
    """A folder for ``PYTHONPATH`` whose ``.dist-info`` registers ``target`` (``module:Class``)
    as objective ``name`` in the objectives entry-point group, which ``importlib.metadata``
    finds as it finds an installed package's."""
    info = folder / "site" / "objective_plugin_test-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: objective-plugin-test\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(f"[electra_ablate.objectives]\n{name} = {target}\n")
    return info.parent


def torchrun_ablate_run(
    spec: Path, out: Path, env: dict[str, str], cwd: Path, *options: str
) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node 2 $(which ablate) run SPEC --out OUT
    [OPTIONS]`` (two gloo ranks), its output captured as text."""
    return subprocess.run(
        [TORCHRUN, "--standalone", "--nproc_per_node", "2", ABLATE, "run", str(spec)]
        + ["--out", str(out), *options],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=900,
    )


def assert_rank_zero_alone_finished(result: subprocess.CompletedProcess) -> None:
    """The torchrun run succeeded and only rank 0 reported (and so wrote) the results."""
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("results in") == 1, "rank 0 alone reports and writes"
