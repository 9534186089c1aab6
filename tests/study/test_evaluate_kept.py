"""``ablate finetune`` is an adapter (issue 42, item 4): its planning, running and summarising
live in ``electra_ablate.study.evaluate_kept``; the command keeps its options and its printing."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from electra_ablate.cli import app
from electra_ablate.commands import finetune as command
from electra_ablate.study import evaluate_kept as study_finetune


def test_the_help_text_states_the_defaults_the_study_applies():
    assert command.DEFAULT_TASKS == study_finetune.DEFAULT_TASKS
    assert command.DEFAULT_SEEDS == study_finetune.DEFAULT_SEEDS


def test_the_command_hands_its_options_to_evaluate_kept_and_prints_what_it_returns(monkeypatch):
    calls = []
    report = {"checkpoint": "kept/1", "tasks": {}, "families": {}}

    def recorded(*args):
        calls.append(args)
        return report

    monkeypatch.setattr(study_finetune, "evaluate_kept", recorded)
    result = CliRunner().invoke(
        app,
        ["finetune", "kept/1", "--tasks", "rte", "--seeds", "0,1", "--epochs", "2", "--json"],
    )
    assert result.exit_code == 0, result.output
    (args,) = calls  # one call does the work: the command plans and runs nothing itself
    checkpoint, spec, tasks, seeds, glue, cap, epochs, lr, device, from_scratch = args
    assert (checkpoint, spec, tasks, seeds, epochs, from_scratch) == (
        "kept/1",
        None,
        "rte",
        "0,1",
        2,
        False,
    )
    assert (glue, cap, lr, device) == (None, None, None, None)
    assert json.loads(result.output) == report
