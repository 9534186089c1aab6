"""How ``ablate run --dry-run`` times a fine-tuned task: on an accelerator the fixed cost of a
fine-tune (the model moved there, the first launches) must not be scaled with the training set,
as it was when two timed steps made GLUE-5 look thirty times longer than it ran on an H200."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from electra_ablate.conformance import contract_settings
from electra_ablate.conformance.task import _contract_kept
from electra_ablate.evaluation import finetuned
from electra_ablate.evaluation.finetune.batching import as_examples
from electra_ablate.evaluation.task import get_task

FIXED_S = 5.0  # what every fine-tune costs before its first step, whatever its length
PER_EXAMPLE_S = 0.001


def full_rte(shared_data, tmp_path):
    """RTE's whole training set (the contract's settings cap it to a few examples)."""
    task = get_task("rte")
    settings = contract_settings(task, {"glue": str(shared_data / "glue")})
    settings = replace(settings, recipe=settings.recipe.model_copy(update={"train_caps": {}}))
    kept = _contract_kept(tmp_path, "mlm")
    return task, settings, kept, len(as_examples(task.encoded(kept, settings).train))


@pytest.fixture
def timed_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``finetune_task`` replaced by a clock: FIXED_S plus PER_EXAMPLE_S per training example
    (the recipe's cap of the short fine-tune), plus one second of evaluation."""
    lengths: list[int] = []

    def fake(kept, task, train, evaluation, recipe, seed, device, *rest) -> dict[str, Any]:
        n = min(recipe.cap_for(task.name), len(train))
        lengths.append(n)
        seconds = FIXED_S + PER_EXAMPLE_S * n
        return {"train_seconds": seconds, "wall_seconds": seconds + 1.0}

    monkeypatch.setattr(finetuned, "finetune_task", fake)
    return lengths


def test_on_an_accelerator_the_fixed_cost_cancels_out(shared_data, tmp_path, timed_runs):
    task, settings, kept, train = full_rte(shared_data, tmp_path)
    assert train > finetuned.ACCELERATOR_TIMED
    epochs = settings.recipe.epochs_for("rte")
    estimate = task.estimate_seconds(kept, settings, "cuda")  # the fake never touches CUDA
    assert estimate == pytest.approx(PER_EXAMPLE_S * train * epochs + 1.0)
    # an untimed warm-up first, then the two timed lengths
    assert timed_runs == [finetuned.TIMED_EXAMPLES, finetuned.TIMED_EXAMPLES,
                          finetuned.ACCELERATOR_TIMED]  # fmt: skip


def test_on_the_cpu_one_short_fine_tune_is_scaled(shared_data, tmp_path, timed_runs):
    task, settings, kept, train = full_rte(shared_data, tmp_path)
    per_example = (FIXED_S + PER_EXAMPLE_S * finetuned.TIMED_EXAMPLES) / finetuned.TIMED_EXAMPLES
    expected = per_example * train * settings.recipe.epochs_for("rte") + 1.0
    assert task.estimate_seconds(kept, settings, "cpu") == pytest.approx(expected)
    assert timed_runs == [finetuned.TIMED_EXAMPLES]
