"""``ablate --help`` lists every command with a whole sentence (issue 43): at 80 columns, piped,
click shortens a summary that does not fit its column to its first words and "...", so each
command carries a ``short_help`` short enough to be printed whole."""

from __future__ import annotations

import os

import pytest
import typer
from ablate_cli import E2E, ablate

from electra_ablate.cli import app

pytestmark = E2E


def command_list(*args: str) -> dict[str, str]:
    """The ``Commands:`` section of ``ablate ARGS --help`` piped at 80 columns: each command's
    name and the rest of its line. A summary wrapped onto a second line is kept as its own
    entry under the empty name, so it fails the one-line check."""
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("LINES", None)
    result = ablate(*args, "--help", env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, result.stdout
    listed: dict[str, str] = {}
    for line in lines[lines.index("Commands:") + 1 :]:
        if not line.strip():
            break
        name, _, summary = line.strip().partition(" ")
        key = name if line.startswith("  ") and not line.startswith("   ") else ""
        listed[key] = summary.strip() if key else line.strip()
    return listed


@pytest.mark.parametrize("args", [(), ("data",)], ids=["ablate", "ablate data"])
def test_every_command_is_listed_with_a_whole_sentence_at_80_columns(args):
    listed = command_list(*args)
    group = typer.main.get_command(app)
    for name in args:
        group = group.commands[name]
    assert set(listed) == set(group.commands), listed  # every command, none wrapped
    for name, summary in listed.items():
        assert summary, name
        assert "..." not in summary and "…" not in summary, (name, summary)
        assert summary.endswith("."), (name, summary)  # a sentence, not a cut-off phrase
