"""The plugin keeps electra-ablate's contracts: the checks ``ablate check random_rtd`` and
``ablate check --task repeat_probe`` run, here in the plugin's own suite
(``pytest examples/random_rtd_plugin/tests``)."""

from __future__ import annotations

import pytest

pytest.importorskip("random_rtd_plugin", reason="the random_rtd plugin is not installed")

from electra_ablate.plugin import (  # noqa: E402
    RULES,
    TASK_RULES,
    available_objectives,
    available_tasks,
    check_objective,
    check_task,
)


@pytest.fixture(autouse=True)
def registered() -> None:
    """Importable is not enough: the contract looks the objective up by its entry point."""
    if "random_rtd" not in available_objectives():
        pytest.skip("random_rtd is not registered (install the plugin: pip install -e .)")


def test_random_rtd_keeps_the_objective_contract() -> None:
    assert check_objective("random_rtd") == list(RULES)


def test_random_rtd_keeps_the_contract_with_a_stronger_detection_loss() -> None:
    assert check_objective("random_rtd", {"disc_weight": 50.0, "mask_rate": 0.3}) == list(RULES)


def test_repeat_probe_keeps_the_evaluation_contract() -> None:
    if "repeat_probe" not in available_tasks():
        pytest.skip("repeat_probe is not registered (install the plugin: pip install -e .)")
    assert check_task("repeat_probe") == list(TASK_RULES)
