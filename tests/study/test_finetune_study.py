"""``ablate finetune`` is an adapter (issue 42, item 4): its planning, running and summarising
live in ``electra_ablate.study.finetune``; the command keeps its options and its printing."""

from __future__ import annotations

import ast
import inspect

from electra_ablate.commands import finetune as command
from electra_ablate.study import finetune as study_finetune


def test_the_help_text_states_the_defaults_the_study_applies():
    assert command.DEFAULT_TASKS == study_finetune.DEFAULT_TASKS
    assert command.DEFAULT_SEEDS == study_finetune.DEFAULT_SEEDS


def test_the_command_calls_one_function_and_plans_nothing_itself():
    tree = ast.parse(inspect.getsource(command))
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert defined == {"register", "finetune_command", "_print_table"}
    called = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert "finetune" in called
    assert not called & {"plan_job", "run_job", "plan_checkpoint", "finetune_checkpoint"}
