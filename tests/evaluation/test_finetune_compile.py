"""``finetune.recipe.compile``: a compiled fine-tune is the eager fine-tune of the same seed,
to rounding: the same head initialisation, batch order and dropout draws (eager-mode random
numbers), one compilation for every batch length; and a compiler that fails leaves the
fine-tune eager, with the eager scores."""

from __future__ import annotations

import numpy as np
import pytest
from test_finetune import MARKER, marker_rows, micro_kept

from electra_ablate.evaluation.finetune import loop
from electra_ablate.evaluation.finetune.loop import finetune_task
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.task import GLUE_TASKS
from electra_ablate.evaluation.task import TaskSettings, get_task

pytest.importorskip("torch._dynamo", reason="torch without dynamo (torch.compile)")

RECIPE = FinetuneRecipe(lr=3e-3, epochs=4, batch_size=8, task_epochs={})


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: small matmuls, one thread


def pair_rows(n: int, seed: int) -> list[dict]:
    """Two segments, ``[CLS] A [SEP] B [SEP]`` with token types 0 and 1: the label is whether
    the marker is in the second one."""
    rng = np.random.default_rng(seed)
    rows = []
    for row in marker_rows(n, seed):
        first = [int(t) for t in rng.integers(8, 60, size=int(rng.integers(2, 9)))]
        second = row["input_ids"][1:]
        ids = [2, *first, 3, *second]
        types = [0] * (len(first) + 2) + [1] * len(second)
        rows.append({"input_ids": ids, "token_type_ids": types, "label": int(MARKER in second)})
    return rows


CASES = {
    "classification": (GLUE_TASKS["sst2"], lambda seed: marker_rows(96, seed)),
    "pair": (GLUE_TASKS["mrpc"], lambda seed: pair_rows(96, seed)),
    "regression": (GLUE_TASKS["stsb"], lambda seed: marker_rows(96, seed, regression=True)),
}


def scores(result: dict[str, float]) -> dict[str, float]:
    timing = {"train_seconds", "wall_seconds"}
    return {k: v for k, v in result.items() if k not in timing}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_compiled_fine_tune_scores_what_the_eager_one_scores(case, recwarn):
    task, rows = CASES[case]
    kept = micro_kept(num_layers=1)  # one layer compiles in about half the time of two
    train, dev = rows(0), rows(1)
    eager = finetune_task(kept, task, train, dev, RECIPE, seed=3)
    compiled = finetune_task(kept, task, train, dev, RECIPE.model_copy(update={"compile": True}), 3)
    assert not [w for w in recwarn if "torch.compile failed" in str(w.message)]
    # 0.1 points: rounding moves a regression's predictions by ~1e-6 after its 48 steps, which
    # swaps near-tied ranks in Spearman's correlation (measured: 0.05 points; Pearson 0.002)
    assert scores(compiled) == pytest.approx(scores(eager), abs=0.1)


def test_a_compiler_that_fails_leaves_the_fine_tune_eager_from_its_seed(monkeypatch):
    task, rows = CASES["classification"]
    kept = micro_kept()
    eager = finetune_task(kept, task, rows(0), rows(1), RECIPE, seed=3)

    def broken_compiler(module, mode=True, dynamic=False):
        def forward(*args):
            _ = module(*args)  # draws what a forward draws before the "compiler" gives up
            raise RuntimeError("no C++ compiler\nsecond line")

        return forward

    monkeypatch.setattr(loop, "compiled", broken_compiler)
    recipe = RECIPE.model_copy(update={"compile": True})
    with pytest.warns(
        UserWarning, match=r"torch.compile failed \(RuntimeError: no C\+\+ compiler\)"
    ):
        fallen_back = finetune_task(kept, task, rows(0), rows(1), recipe, seed=3)
    assert scores(fallen_back) == scores(eager)


def test_compile_is_not_part_of_a_fine_tune_jobs_identity():
    """It changes rounding and speed, never what is learnt: a study that turns it on reuses
    every finished fine-tune, and the committed results keep their ids."""
    eager = TaskSettings(recipe=RECIPE)
    compiled = TaskSettings(recipe=RECIPE.model_copy(update={"compile": "reduce-overhead"}))
    task = get_task("rte")
    assert task.identity(eager) == task.identity(compiled)
