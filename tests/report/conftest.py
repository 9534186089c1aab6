"""Reports the report wing's modules share: each written once per test worker for every test
that reads it, since a report costs about two CPU-seconds, most of it drawing figures (issue
70). The tests read these folders and never write into them; a test that changes a study
writes its own. The helpers that write them are in ``shared_reports.py``."""

from __future__ import annotations

import json

import pytest
from shared_reports import Drawn, described_study, draw, smoke_description
from test_report import make_study_dir, one_seed_study, probe_rows

from electra_ablate.analysis.results import write_table


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory) -> Drawn:
    """The synthetic study's report (``test_report.make_study_dir``): three fine-tuning seeds
    per label, in the study folder's ``report``."""
    return draw(make_study_dir(tmp_path_factory.mktemp("runs") / "synthetic"))


@pytest.fixture(scope="session")
def one_seed(tmp_path_factory) -> Drawn:
    """The synthetic study's report with one fine-tuning seed: one model per label, written
    over an earlier report's efficiency figure, which it no longer draws."""
    directory = one_seed_study(tmp_path_factory.mktemp("one") / "synthetic")
    report = directory / "report"
    report.mkdir()
    for fmt in ("png", "svg"):  # left by an earlier report that drew it
        (report / f"glue_efficiency.{fmt}").write_text("stale")
    return draw(directory)


@pytest.fixture(scope="session")
def plumbing(tmp_path_factory) -> Drawn:
    """The synthetic study described as the smoke study is: a plumbing check."""
    directory = tmp_path_factory.mktemp("runs") / "plumbing"
    return draw(described_study(directory, smoke_description()))


@pytest.fixture(scope="session")
def probed(tmp_path_factory) -> Drawn:
    """The synthetic study with an RTD probe beside GLUE (``test_report.probe_rows``), whose
    study records the probes' own recipe beside the fine-tuning one."""
    directory = make_study_dir(tmp_path_factory.mktemp("runs") / "probed")
    write_table(directory / "results.parquet", probe_rows())
    study = json.loads((directory / "study.json").read_text())
    study["evaluation"] = {"tasks": ["rtd_unigram"], "recipe": {"lr": 1e-4, "epochs": 3}}
    (directory / "study.json").write_text(json.dumps(study))
    return draw(directory)
