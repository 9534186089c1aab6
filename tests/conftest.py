"""Shared test setup: the Hugging Face hub is unreachable here, so every test runs offline
(set before any test module imports ``datasets``, which reads these once at import)."""

from __future__ import annotations

import os
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
