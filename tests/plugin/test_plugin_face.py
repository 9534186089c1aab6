"""``electra_ablate.plugin`` is the one face for plugin authors (issue 42, item 2): the built-in
objectives dogfood it and the example plugin (its code and its tests) imports nothing else of
this project, so that no internal file can move without the face noticing."""

from __future__ import annotations

import ast
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from objective_names import MODULE_PREFIX

import electra_ablate.plugin as plugin
from electra_ablate.pretraining.registry import ENTRY_POINT_GROUP

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "random_rtd_plugin"
PLUGIN_FILES = sorted((ROOT / "objectives").glob("*.py")) + sorted(EXAMPLE.rglob("*.py"))
ALLOWED = ("electra_ablate.plugin", "electra_ablate.objectives")


def foreign_imports(source: str) -> list[str]:
    """The ``electra_ablate`` modules a source imports other than the face and the built-in
    objectives (an objective may build on another: electra_15 on electra), anywhere in the file,
    function bodies included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module == "electra_ablate":  # from electra_ablate import testing
                modules = [f"electra_ablate.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            if module.split(".")[0] != "electra_ablate":
                continue
            if not any(module == a or module.startswith(a + ".") for a in ALLOWED):
                found.append(module)
    return found


def test_the_check_sees_every_way_of_reaching_past_the_face():
    planted = """
from electra_ablate.plugin import Objective
from electra_ablate.objectives.electra import Electra
import electra_ablate.backbone.model
from electra_ablate import testing

def later():
    from electra_ablate.pretraining.components import masking
"""
    assert foreign_imports(planted) == [
        "electra_ablate.backbone.model",
        "electra_ablate.testing",
        "electra_ablate.pretraining.components",
    ]


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_objectives_and_the_example_plugin_import_only_the_face(path):
    assert foreign_imports(path.read_text(encoding="utf-8")) == []


def test_the_files_checked_include_every_built_in_and_the_example():
    names = {p.name for p in PLUGIN_FILES}
    built_in = {
        ep.module.removeprefix(MODULE_PREFIX) + ".py"
        for ep in entry_points(group=ENTRY_POINT_GROUP)
        if ep.module.startswith(MODULE_PREFIX)
    }
    assert built_in and built_in <= names
    assert {"synthetic.py", "test_contract.py"} <= names


def test_every_name_the_face_lists_is_there_and_every_import_is_listed():
    imported = {
        alias.asname or alias.name
        for node in ast.parse(Path(plugin.__file__).read_text(encoding="utf-8")).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert set(plugin.__all__) == imported
    assert [name for name in plugin.__all__ if not hasattr(plugin, name)] == []


def test_the_face_holds_what_an_objective_and_a_task_author_reach_for():
    needed = {
        "Objective", "ObjectiveParams", "StepOutput", "KeptModel", "ModelPass", "Batch",
        "Stage", "StageSplit", "OutputPrior", "BackboneConfig", "Vocab", "Discriminator",
        "Task", "TaskFamily", "TaskSettings", "FinetunedTask", "LoadedKept",
        "check_objective", "check_task", "RULES", "TASK_RULES", "ContractError",
        "available_objectives", "get_objective", "available_tasks", "get_task",
        "InputError", "DataError", "AblateError",
    }  # fmt: skip
    assert needed <= set(plugin.__all__)
