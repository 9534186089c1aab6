"""The smoke study's report says it is a plumbing check, and with one model per arm it says
once, not per claim, what would resolve the claims (issue 43)."""

from __future__ import annotations

import pytest
import yaml
from ablate_cli import SMOKE, ablate

pytestmark = pytest.mark.slow


def test_the_smoke_report_header_shows_it_is_a_plumbing_check(smoke_study, smoke_env, tmp_path):
    out = tmp_path / "report"
    result = ablate("report", smoke_study, "--out", out, env=smoke_env, timeout=600)
    assert result.returncode == 0, result.stderr
    text = (out / "report.md").read_text(encoding="utf-8")
    description = yaml.safe_load(SMOKE.read_text())["description"]
    assert "plumbing check" in description
    assert text.startswith(f"# Study `smoke`\n\n*{description}*\n")
    assert "no interval: unresolved |" not in text  # no table of interval-less pairs
    assert text.count("Its cost: `ablate run") == 1  # one pilot command, not one per claim
