"""A slow command says what it is doing (issue 43); a quick one, or one that fails on bad input
with its one line of error, prints nothing more."""

from __future__ import annotations

import time

from electra_ablate.infra import progress


def test_a_plain_status_line_appears_after_the_delay_with_the_latest_text(capsys, monkeypatch):
    monkeypatch.setattr(progress, "STATUS_DELAY_S", 0.05)
    with progress.status_line("preparing the data", "plain") as say:
        say("timing electra")
        time.sleep(0.3)
        say("timing rte")
    assert capsys.readouterr().err.splitlines() == ["timing electra ...", "timing rte ..."]


def test_a_quick_block_prints_nothing(capsys, monkeypatch):
    monkeypatch.setattr(progress, "STATUS_DELAY_S", 5.0)
    with progress.status_line("preparing the data", "plain") as say:
        say("timing electra")
    time.sleep(0.05)
    assert capsys.readouterr().err == ""


def test_off_prints_nothing(capsys, monkeypatch):
    monkeypatch.setattr(progress, "STATUS_DELAY_S", 0.0)
    with progress.status_line("preparing the data", "off") as say:
        time.sleep(0.05)
        say("timing electra")
    assert capsys.readouterr().err == ""
