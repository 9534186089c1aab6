"""W&B in offline mode keeps its runs where ``$WANDB_DIR`` says, for a later ``wandb sync``.
When it cannot write there it quietly falls back to the system's temporary folder (its warning
is silenced with the rest of its console output), where nobody syncs from: the tracker says so
in one warning line instead, and the unit's ledger marks nothing sent, so a later run with a
writable folder catches W&B up. In process, offline, with the system's temporary folder
pointed into the test's own."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from ablate_cli import needs_extra

from electra_ablate.infra.tracking import Ledger, TrackedUnit, Tracking
from electra_ablate.infra.tracking.fanout import turn_on_again


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    """W&B offline, its cache, config and data under the test's folder, and the system's
    temporary folder one of the test's (to see whether W&B fell back to it)."""
    for name in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(name)
    for name in ("cache", "config", "data"):
        (tmp_path / f"wandb-{name}").mkdir()
        monkeypatch.setenv(f"WANDB_{name.upper()}_DIR", str(tmp_path / f"wandb-{name}"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "systemp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "systemp"))
    turn_on_again()
    yield
    turn_on_again()
    if "wandb" in sys.modules:  # its settings are read once per process: not the next test's
        sys.modules["wandb"].teardown()


def send_a_row(folder: Path) -> dict:
    """A curve row sent to W&B for a unit in ``folder``; what its ledger then says W&B has."""
    folder.mkdir(exist_ok=True)
    unit = TrackedUnit("k0123456789", "toy", "electra", {"run_id": "abc"}, folder)
    with Tracking(["wandb"], unit, Ledger(folder / "tracking.json", unit.key)) as board:
        board.curve("train", 4, {"loss": 1.0})
    try:
        entries = json.loads((folder / "tracking.json").read_text())
    except FileNotFoundError:
        return {}
    return entries.get(unit.key, {}).get("wandb", {}).get("curves", {})


def unwritable(tmp_path: Path, how: str) -> Path:
    if how == "under a file":
        (tmp_path / "a-file").write_text("")
        return tmp_path / "a-file" / "wandb"
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o500)
    return folder


@pytest.mark.slow  # process: wandb's own (git)
@needs_extra("wandb", "wandb")
@pytest.mark.parametrize("how", ["under a file", "read-only"])
def test_an_unwritable_offline_folder_is_said_and_its_rows_stay_unsent(
    tmp_path, monkeypatch, capsys, how
):
    asked = unwritable(tmp_path, how)
    monkeypatch.setenv("WANDB_DIR", str(asked))
    assert send_a_row(tmp_path / "unit") == {}
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("warning: tracker wandb failed opening its run for electra")
    assert f"cannot write to {asked}" in lines[0] and "catches it up" in lines[0]
    assert not list((tmp_path / "systemp").rglob("*.wandb"))  # nothing kept where none syncs
    # a later run, the folder writable: the row goes there, and the ledger says so
    turn_on_again()
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "writable"))
    assert send_a_row(tmp_path / "unit") == {"train": 4}
    assert list((tmp_path / "writable").glob("wandb/offline-run-*/run-k0123456789.wandb"))
    assert capsys.readouterr().err == ""


@pytest.mark.slow  # process: wandb's own (git)
@needs_extra("wandb", "wandb")
def test_offline_by_wandb_offline_and_falling_back_is_said_too(tmp_path, monkeypatch, capsys):
    """``wandb offline`` (a settings file, not ``$WANDB_MODE``) into an unwritable folder: the
    run W&B opened elsewhere is found out after the fact, and said the same way."""
    monkeypatch.delenv("WANDB_MODE")
    (tmp_path / "wandb-config" / "settings").write_text("[default]\nmode = offline\n")
    asked = unwritable(tmp_path, "under a file")
    monkeypatch.setenv("WANDB_DIR", str(asked))
    assert send_a_row(tmp_path / "unit") == {}
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert line.startswith("warning: tracker wandb failed opening its run for electra")
    assert f"cannot write to {asked}" in line
    assert f"W&B would have kept the run in {tmp_path / 'systemp'}" in line  # found after
