"""The report wing's shared reports, as ``conftest.py`` hands them to tests: a study written
once and its report drawn once, the figures kept for the tests that read their titles and
legends (issue 70)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from ablate_cli import SMOKE
from matplotlib.figure import Figure
from test_report import make_study_dir

from electra_ablate.report import plots, write_report


@dataclass
class Drawn:
    """A report written once for the tests that read it: its markdown and the figures it saved."""

    text: str
    figures: dict[str, Figure]
    report: Path  # its folder


def draw(directory: Path) -> Drawn:
    """Write ``directory``'s report, its figures saved as ever, and keep each figure saved for
    the tests that read its titles and legends."""
    figures: dict[str, Figure] = {}
    save = plots.save_figure

    def keep(fig: Figure, out: Path, stem: str) -> list[Path]:
        figures.setdefault(stem, fig)
        return save(fig, out, stem)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "save_figure", keep)
        report = write_report(directory)
    return Drawn(report.read_text(encoding="utf-8"), figures, report.parent)


def smoke_description() -> str:
    """``studies/smoke.yaml``'s description: it says the study is a plumbing check."""
    return yaml.safe_load(SMOKE.read_text())["description"]


def described_study(directory: Path, description: str) -> Path:
    """The synthetic study with ``description`` as its spec's description."""
    make_study_dir(directory)
    study = json.loads((directory / "study.json").read_text())
    study["spec"]["description"] = description
    (directory / "study.json").write_text(json.dumps(study))
    return directory
