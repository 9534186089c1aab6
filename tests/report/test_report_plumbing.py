"""A study whose description says it is a plumbing check (``studies/smoke.yaml``) sets no
published scores beside its own (issue 54): its GLUE table has no "Paper Table 5" column and no
published ordering, and one line says why; any other study keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from shared_reports import described_study
from test_report import table_row

from electra_ablate.report import write_report
from electra_ablate.report.header import PLUMBING_CLAIMS, plumbing_check

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plumbing_text(plumbing) -> str:
    """The synthetic study described as ``studies/smoke.yaml`` is (``conftest.plumbing``)."""
    return plumbing.text


@pytest.fixture(scope="module")
def science_text(tmp_path_factory) -> str:
    """The synthetic study described as any other study, written once for the tests that read
    it."""
    directory = tmp_path_factory.mktemp("runs") / "science"
    described_study(directory, "BERT against ELECTRA at 2.5e13 FLOPs")
    return write_report(directory).read_text(encoding="utf-8")


def test_the_smoke_studies_say_they_are_plumbing_checks():
    for name in ("smoke", "smoke_hub"):
        spec = yaml.safe_load((ROOT / "studies" / f"{name}.yaml").read_text())
        assert plumbing_check({"spec": spec}), name
    for path in sorted((ROOT / "studies").glob("*.yaml")):
        if not path.name.startswith("smoke"):
            assert not plumbing_check({"spec": yaml.safe_load(path.read_text())}), path.name


def test_the_signal_is_the_phrase_in_any_case_and_spacing():
    assert plumbing_check({"spec": {"description": "A Plumbing\n  Check of the CLI"}})
    assert not plumbing_check({"spec": {"description": "a check of the plumbing"}})
    assert not plumbing_check({"spec": {}}) and not plumbing_check({})


def test_a_plumbing_check_has_no_paper_column_and_says_why(plumbing_text):
    head = table_row(plumbing_text, "Rank | Label")
    assert "Paper Table 5" not in head
    assert head.endswith("| wnli (accuracy, not in GLUE; every model 99.0 at 100%) |")
    # the same row as test_report's, without the published 85.0 at its end
    assert table_row(plumbing_text, "1 | ELECTRA").endswith(
        "| 70.0 (69.0–72.0) | 90.0 (89.0–92.0) | 99.0 (99.0–99.0) |"
    )
    assert "82.2" not in table_row(plumbing_text, "3 | BERT")
    assert "**Paper Table 5 ordering**" not in plumbing_text
    assert "compare the ordering, not the absolute values" not in plumbing_text
    assert (
        "*No Paper Table 5 column*: this study describes itself as a plumbing check (its spec's "
        "description says so), so its numbers only show that every step ran; they are not "
        "comparable with published GLUE scores"
    ) in plumbing_text
    assert plumbing_text.count("*No Paper Table 5 column*") == 1
    # where the paper's numbers come from is still said, at the end
    assert "## The paper's reference points\n\n- Paper Table 5: " in plumbing_text


def test_any_other_study_keeps_the_paper_column(science_text):
    text = science_text
    assert table_row(text, "Rank | Label").endswith("| Paper Table 5 |")
    assert table_row(text, "1 | ELECTRA").endswith("| 85.0 |")
    assert "**Paper Table 5 ordering**" in text
    assert "No Paper Table 5 column" not in text


def test_a_plumbing_checks_claims_table_is_set_apart_from_the_paper(plumbing_text, science_text):
    claims = plumbing_text.split("## The paper's claims", 1)[1].split("\n## ", 1)[0]
    assert claims.count(PLUMBING_CLAIMS) == 1
    assert PLUMBING_CLAIMS not in science_text
