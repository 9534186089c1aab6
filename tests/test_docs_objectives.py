"""The objectives a newcomer reads about are the installed ones: the table of built-in
objectives on the README and on the documentation site's home page (``docs/index.md``) is one
table, written twice, with one row per built-in objective (``objective_names.BUILT_IN``, the
entry points); and the smoke study, which both pages say runs every objective, names them all.

The tables keep the paper's order (BERT's MLM first, ELECTRA and its variants after), not the
entry points' sorted one: a new built-in needs a row in both, where its story places it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ablate_cli import SMOKE
from objective_names import BUILT_IN

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/index.md")
HEADER = "| objective | what the kept model learns from |"
ROW = re.compile(r"^\| `(?P<name>[a-z0-9_]+)` \| (?P<text>.+) \|$")


def objective_rows(page: str) -> list[tuple[str, str]]:
    """The (name, description) rows of the page's objectives table, in order."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    assert lines.count(HEADER) == 1, f"{page}: one objectives table, headed {HEADER!r}"
    rows = []
    for line in lines[lines.index(HEADER) + 2 :]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        match = ROW.match(line)
        assert match, f"{page}: not an objective's row: {line!r}"
        rows.append((match["name"], match["text"]))
    return rows


@pytest.mark.parametrize("page", PAGES)
def test_the_table_has_one_row_per_built_in_objective(page):
    names = [name for name, _ in objective_rows(page)]
    assert sorted(names) == sorted(BUILT_IN), f"{page}'s objectives table"


def test_the_readme_and_the_site_show_the_same_table():
    readme, site = (objective_rows(page) for page in PAGES)
    assert readme == site


def test_the_smoke_study_runs_every_built_in_objective():
    spec = yaml.safe_load(SMOKE.read_text(encoding="utf-8"))
    assert sorted(entry["name"] for entry in spec["objectives"]) == sorted(BUILT_IN)
