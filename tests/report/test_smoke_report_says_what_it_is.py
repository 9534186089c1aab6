"""The smoke study's report says it is a plumbing check, and with one model per arm it says
once, not per claim or per cell, that nothing has an interval and what would resolve the claims
(issue 43)."""

from __future__ import annotations

import pytest
import yaml
from ablate_cli import SMOKE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke_text(smoke_report) -> str:
    """``report.md`` of the session's smoke study (``conftest.smoke_report``)."""
    return (smoke_report / "report.md").read_text(encoding="utf-8")


def test_the_smoke_report_header_shows_it_is_a_plumbing_check(smoke_text):
    description = yaml.safe_load(SMOKE.read_text())["description"]
    assert "plumbing check" in description
    assert smoke_text.startswith(f"# Study `smoke`\n\n*{description}*\n")
    assert "no interval: unresolved |" not in smoke_text  # no table of interval-less pairs
    assert smoke_text.count("Its cost: `ablate run") == 1  # one pilot command, not one per claim


def test_the_smoke_report_says_once_that_no_score_has_an_interval(smoke_text):
    # it said "no CI" in every score cell, difference and claim: 61 times, "no interval" 7
    assert "no CI" not in smoke_text and "†" not in smoke_text
    assert smoke_text.lower().count("no interval") <= 2
    assert smoke_text.count("*One model per objective*") == 1
    # one model each: no seeds column either, the note says so once
    assert "| Rank | Label | Objective | GLUE per model | vs none" in smoke_text
