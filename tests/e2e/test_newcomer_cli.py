"""A newcomer's first commands (issue 43), through ``ablate``'s entry function: every error of a
spec in one pass, tables that never cut a name at 80 columns when piped, help that reads. In
this process (tests/ablate_cli.py): output captured is output piped, and the terminal's width
is read from ``COLUMNS`` as a process would read it."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from pathlib import Path

import ablate_cli
import pytest
from rich.console import Console

from electra_ablate.infra.tables import print_table

THREE_MISTAKES = """
name: t
data:
  corpus: {paths: ["corpus/*.txt"]}
  glue: glue
backbone: {preset: micro}
budgte: {steps: 10}
objectives:
  - {name: electar}
  - {name: electra_15, params: {generator_sise: 0.5, generator_size: 3}}
finetune: {tasks: [rte]}
"""


def ablate(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    """``ablate`` with its output piped (never a terminal) at ``columns`` columns."""
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("LINES", None)
    return ablate_cli.ablate(*args, env=env)


def test_validate_reports_every_error_of_a_spec_in_one_pass(tmp_path: Path):
    path = tmp_path / "spec.yaml"
    path.write_text(THREE_MISTAKES)
    result = ablate("validate", str(path), "--no-data-check")
    assert result.returncode == 2
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err
    for expected in (
        "budgte: unknown key (did you mean 'budget'?)",
        "budget: Field required",
        "objectives[0].name: unknown objective 'electar' (did you mean 'electra'?)",
        "objectives[1].params.generator_size: Input should be less than or equal to 1",
        "objectives[1].params.generator_sise: unknown key (did you mean 'generator_size'?)",
    ):
        assert expected in err


def test_validate_names_every_unknown_task_at_once(tmp_path: Path):
    path = tmp_path / "spec.yaml"
    text = THREE_MISTAKES.replace("budgte", "budget").replace("electar", "electra")
    path.write_text(
        text.replace("generator_sise: 0.5, generator_size: 3", "").replace(
            "tasks: [rte]", "tasks: [rtee, sts]"
        )
    )
    result = ablate("validate", str(path), "--no-data-check")
    assert result.returncode == 2
    assert "'rtee' (did you mean 'rte'?)" in result.stderr
    assert "'sts' (did you mean 'stsb'?)" in result.stderr


def cells(table: str, column: int) -> list[str]:
    """The stripped text of ``column`` in every row of a rich table (box-drawing borders)."""
    out = []
    for line in table.splitlines():
        parts = re.split(r"[│┃]", line)
        if len(parts) > column + 1:
            out.append(parts[column + 1].strip())
    return out


def test_tasks_prints_every_name_whole_and_each_tasks_params_at_80_columns():
    result = ablate("tasks")
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    listing = json.loads(ablate("tasks", "--json").stdout)
    names = set(cells(result.stdout, 0))
    for task in listing:
        assert task["name"] in names
        for param in task["params"]:
            assert f"{param['name']}={param['default']}" in result.stdout


def test_objectives_prints_every_name_whole_at_80_columns():
    result = ablate("objectives")
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout
    listing = json.loads(ablate("objectives", "--json").stdout)
    names = set(cells(result.stdout, 0))
    assert {o["name"] for o in listing} <= names


def test_a_name_wider_than_the_terminal_is_still_printed_whole():
    long = "an_objective_label_far_longer_than_a_narrow_terminal"
    console = Console(width=40, record=True, file=io.StringIO())
    print_table(("label", "note"), [(long, "a few words of note")], console=console)
    assert long in console.export_text()


@pytest.mark.parametrize("command", ["run", "validate", "report", "finetune", "tasks"])
def test_help_reads_as_prose_at_80_columns(command: str):
    result = ablate(command, "--help")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    if command in ("run", "validate"):
        flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())
        assert "pretrain.learning_rate=5e-4" in flat
