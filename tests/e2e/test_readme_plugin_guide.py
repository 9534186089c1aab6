"""The plugin guide alone is enough (issues 43, 42): the inline objective of docs/extending.md
keeps the whole contract, and its inline task declares itself and evaluates a kept encoder,
exactly as printed; both import only from the plugin face."""

from __future__ import annotations

import re
from pathlib import Path

from electra_ablate.conformance import (
    check_objective,
    check_task_declares,
    check_task_evaluate,
    contract_settings,
)
from electra_ablate.conformance.task import _contract_kept
from electra_ablate.evaluation.task import Task, TaskFamily
from electra_ablate.pretraining.objective import Objective

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of the guide's section headed ``## {section}``."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    end = len(text) if end == -1 else end
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


def defined(code: str, base: type) -> list:
    namespace: dict = {"__name__": "guide_example"}
    exec(compile(code, "docs/extending.md", "exec"), namespace)  # noqa: S102 - the guide's code
    return [
        v
        for v in namespace.values()
        if isinstance(v, type) and issubclass(v, base) and v is not base
    ]


def test_the_guides_objective_keeps_the_contract():
    blocks = [b for b in python_blocks("Add your own objective") if "class " in b]
    assert len(blocks) == 1
    (objective,) = defined(blocks[0], Objective)
    rules = check_objective(objective)
    assert "finetune" in " ".join(rules) and objective.output_priors is not Objective.output_priors


def test_the_guides_task_declares_itself_and_evaluates_a_kept_encoder(tmp_path):
    blocks = [b for b in python_blocks("Add your own evaluation task") if "class " in b]
    assert len(blocks) == 1
    namespace: dict = {"__name__": "guide_example"}
    exec(compile(blocks[0], "docs/extending.md", "exec"), namespace)  # noqa: S102
    family = next(v for v in namespace.values() if isinstance(v, TaskFamily))
    (task,) = family.tasks()
    assert isinstance(task, Task)
    settings = contract_settings(task)
    check_task_declares(task, settings)
    kept = _contract_kept(tmp_path, "discriminator")
    metrics = check_task_evaluate(task, settings, kept)
    assert set(task.metrics) <= set(metrics)


def test_the_guides_code_imports_only_the_plugin_face():
    """A plugin written from the guide keeps working when the project's modules move."""
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    imports = [
        line.split()[1]
        for block in blocks
        for line in block.splitlines()
        if line.startswith(("from electra_ablate", "import electra_ablate"))
    ]
    assert imports and set(imports) == {"electra_ablate.plugin"}, imports
