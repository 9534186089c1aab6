"""The README's plugin guide alone is enough (issue 43): its inline objective keeps the whole
contract, and its inline task declares itself and evaluates a kept encoder, exactly as printed."""

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

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of the README section headed ``## {section}``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {section}\n")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


def defined(code: str, base: type) -> list:
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    return [
        v
        for v in namespace.values()
        if isinstance(v, type) and issubclass(v, base) and v is not base
    ]


def test_the_readmes_objective_keeps_the_contract():
    blocks = [b for b in python_blocks("Add your own objective") if "class " in b]
    assert len(blocks) == 1
    (objective,) = defined(blocks[0], Objective)
    rules = check_objective(objective)
    assert "finetune" in " ".join(rules) and objective.output_priors is not Objective.output_priors


def test_the_readmes_task_declares_itself_and_evaluates_a_kept_encoder(tmp_path):
    blocks = [b for b in python_blocks("Add your own evaluation task") if "class " in b]
    assert len(blocks) == 1
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # noqa: S102
    family = next(v for v in namespace.values() if isinstance(v, TaskFamily))
    (task,) = family.tasks()
    assert isinstance(task, Task)
    settings = contract_settings(task)
    check_task_declares(task, settings)
    kept = _contract_kept(tmp_path, "discriminator")
    metrics = check_task_evaluate(task, settings, kept)
    assert set(task.metrics) <= set(metrics)
