"""Shared test setup: the Hugging Face hub is unreachable here, so every test runs offline
(set before any test module imports ``datasets``, which reads these once at import)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


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
def smoke_env(shared_data_dir, tmp_path_factory) -> dict[str, str]:
    """The environment of the session's smoke study: the real data and a data cache of its own."""
    cache = tmp_path_factory.mktemp("smoke-cache")
    return {**os.environ, "ABLATE_DATA_DIR": str(shared_data_dir), "ABLATE_CACHE": str(cache)}


@pytest.fixture(scope="session")
def smoke_study(smoke_env, tmp_path_factory) -> Path:
    """The smoke study run once per session in one process, through the installed ``ablate``:
    the reference that other ways of running it (packs, shards, cluster jobs, data bundles) are
    compared with. Tests copy it or read it, never change it."""
    ablate = shutil.which("ablate")
    if ablate is None:
        pytest.skip("the ablate console script is not installed")
    out = tmp_path_factory.mktemp("smoke-reference") / "runs" / "smoke"
    spec = Path(__file__).resolve().parent.parent / "studies" / "smoke.yaml"
    result = subprocess.run(
        [ablate, "run", str(spec), "--out", str(out), "--no-progress"],
        env=smoke_env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert result.returncode == 0, result.stderr
    return out
