"""``finetune.recipe.padding: buckets``: every fine-tuning batch padded to the smallest of a few
fixed lengths (``length_buckets``) that holds it, so that a step replayed as CUDA graphs
(``compile: reduce-overhead``) records one graph per bucket, not one per batch length.

Padding is masked, so with dropout off a bucketed fine-tune computes what a dynamic one does, to
rounding; with dropout on its masks have other shapes, hence other draws and other numbers, so a
bucketed job has an id of its own, and the ids of every other job stay as they were. A bucketed
fine-tune compiled gives the eager one's scores (the CUDA-graph twin is in tests/test_cuda.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from ablate_cli import SMOKE
from test_finetune import CLASSIFY, marker_rows, micro_kept

from electra_ablate.evaluation.finetune import loop
from electra_ablate.evaluation.finetune.batching import as_examples, collate, train_batches
from electra_ablate.evaluation.finetune.loop import finetune_task, new_classifier, padded_length
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.run import plan_job
from electra_ablate.evaluation.task import TaskSettings, get_task
from electra_ablate.infra.errors import InputError, SpecError
from electra_ablate.spec import parse_spec
from electra_ablate.study.context import Study, refuse_cuda_graphs_off_cuda

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: small matmuls, one thread

BUCKETS = (8, 16, 32, 64)
"""The marker rows are 6 to 21 tokens long: three of these buckets are used."""
DYNAMIC = FinetuneRecipe(lr=3e-3, epochs=2, batch_size=8, task_epochs={}, max_len=64)
BUCKETED = FinetuneRecipe(
    **{**DYNAMIC.model_dump(), "padding": "buckets", "length_buckets": BUCKETS}
)
CPU = torch.device("cpu")


def scores(result: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in result.items() if k not in {"train_seconds", "wall_seconds"}}


@pytest.fixture
def padded_lengths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every batch a fine-tune collates (training and evaluation)."""
    lengths: list[int] = []
    real = loop.collate

    def recorded(*args, **kwargs) -> dict[str, torch.Tensor]:
        batch = real(*args, **kwargs)
        lengths.append(int(batch["input_ids"].shape[1]))
        return batch

    monkeypatch.setattr(loop, "collate", recorded)
    return lengths


@pytest.fixture
def losses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every training loss of a fine-tune, in order."""
    seen: list[float] = []
    real = loop._loss

    def recorded(logits: torch.Tensor, labels: torch.Tensor, is_regression: bool) -> torch.Tensor:
        loss = real(logits, labels, is_regression)
        seen.append(float(loss.detach()))
        return loss

    monkeypatch.setattr(loop, "_loss", recorded)
    return seen


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        ({"padding": "buckets"}, "padding: buckets needs length_buckets"),
        ({"length_buckets": [32, 64, 128]}, "length_buckets is read only under padding: buckets"),
        ({"padding": "max_len", "length_buckets": [128]}, "(padding is max_len)"),
        ({"padding": "buckets", "length_buckets": [64, 32, 128]}, "must increase"),
        ({"padding": "buckets", "length_buckets": [32, 32, 128]}, "must increase"),
        ({"padding": "buckets", "length_buckets": [0, 128]}, "greater than 0"),
        ({"padding": "buckets", "length_buckets": []}, "at least 1 item"),
        ({"padding": "buckets", "length_buckets": [32, 64]}, "must equal max_len (128)"),
        ({"padding": "buckets", "length_buckets": [32, 256]}, "must equal max_len (128)"),
    ],
)
def test_a_bad_bucket_setting_is_one_line_naming_the_key(recipe, message):
    raw = yaml.safe_load(SMOKE.read_text())
    raw["finetune"]["recipe"] = {**raw["finetune"].get("recipe", {}), **recipe}
    with pytest.raises(SpecError) as refused:
        parse_spec(raw)
    text = str(refused.value)
    assert "\n" not in text and "finetune.recipe" in text and message in text, text


def test_the_recipe_takes_buckets_and_keeps_its_defaults():
    assert FinetuneRecipe().padding == "dynamic" and FinetuneRecipe().compile is False
    recipe = FinetuneRecipe(padding="buckets", length_buckets=[32, 64, 128])
    assert recipe.length_buckets == [32, 64, 128]
    assert FinetuneRecipe(max_len=64, padding="buckets", length_buckets=[64]).length_buckets == [64]


def test_padded_length_is_the_smallest_bucket_that_holds_the_batch():
    kept = micro_kept()  # max_seq_len 64
    cfg = kept.model.encoder.cfg
    recipe = FinetuneRecipe(padding="buckets", length_buckets=[16, 32, 100, 128])
    wide = cfg.with_overrides(max_seq_len=128)
    assert [padded_length(recipe, wide, n) for n in (3, 16, 17, 32, 33, 100, 101, 128)] == [
        16, 16, 32, 32, 100, 100, 128, 128,
    ]  # fmt: skip
    # the encoder takes 64: the buckets past it are cut to 64, which holds every example
    assert [padded_length(recipe, cfg, n) for n in (3, 17, 33, 64)] == [16, 32, 64, 64]
    dynamic, fixed = FinetuneRecipe(), FinetuneRecipe(padding="max_len")
    assert [padded_length(dynamic, cfg, n) for n in (3, 33)] == [3, 33]
    assert [padded_length(fixed, cfg, n) for n in (3, 33)] == [64, 64]


def test_every_batch_of_a_bucketed_fine_tune_is_a_bucket_long(padded_lengths):
    train, dev = marker_rows(96, 0), marker_rows(64, 1)
    finetune_task(micro_kept(), CLASSIFY, train, dev, BUCKETED, seed=3)
    assert set(padded_lengths) <= set(BUCKETS) and len(set(padded_lengths)) == 3
    padded_lengths.clear()
    finetune_task(micro_kept(), CLASSIFY, train, dev, DYNAMIC, seed=3)
    assert len(set(padded_lengths)) > 3  # dynamic padding: a length of its own for most batches


def test_padding_to_a_bucket_changes_no_loss_and_no_gradient_without_dropout():
    """Padding is masked: the same rows padded to their longest and to their bucket give the
    first step's loss and every gradient to rounding."""
    kept = micro_kept(dropout=0.0, attention_dropout=0.0)
    cfg = kept.model.encoder.cfg
    train = as_examples(marker_rows(96, 0))
    rng = np.random.default_rng(3)
    indices = train_batches(train.lengths, 8, DYNAMIC.sort_chunk_batches, rng)[0]
    longest = int(train.lengths[indices].max())

    def first_step(recipe: FinetuneRecipe) -> tuple[int, float, dict[str, torch.Tensor]]:
        torch.manual_seed(3)
        model = new_classifier(kept, CLASSIFY, recipe.model_copy(update={"head_dropout": 0.0}), CPU)
        batch = collate(train, indices, padded_length(recipe, cfg, longest))
        loss = loop._loss(loop._logits(model.train(), batch, CPU), batch["labels"], False)
        loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        return int(batch["input_ids"].shape[1]), float(loss.detach()), grads

    length, loss, grads = first_step(DYNAMIC)
    bucket_length, bucket_loss, bucket_grads = first_step(BUCKETED)
    assert bucket_length > length == longest  # the batch really is padded further
    assert bucket_loss == pytest.approx(loss, rel=1e-5)
    assert grads.keys() == bucket_grads.keys() and len(grads) > 10
    for name, grad in grads.items():
        torch.testing.assert_close(bucket_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_without_dropout_a_bucketed_fine_tune_is_the_dynamic_one_and_with_it_is_not(losses):
    """Without dropout the whole fine-tune is the dynamic one to rounding; with dropout (the
    recipe's) the masks have the padded shapes and the numbers part: why padding is in the id."""
    train, dev = marker_rows(96, 0), marker_rows(64, 1)
    kept = micro_kept(dropout=0.0, attention_dropout=0.0)
    off = {"head_dropout": 0.0}
    dynamic = finetune_task(kept, CLASSIFY, train, dev, DYNAMIC.model_copy(update=off), 3)
    dynamic_losses = losses[:]
    losses.clear()
    bucketed = finetune_task(kept, CLASSIFY, train, dev, BUCKETED.model_copy(update=off), 3)
    assert len(losses) == len(dynamic_losses) == 24
    assert losses == pytest.approx(dynamic_losses, rel=1e-4)
    assert scores(bucketed) == pytest.approx(scores(dynamic), abs=0.1)

    kept = micro_kept()
    losses.clear()
    finetune_task(kept, CLASSIFY, train, dev, DYNAMIC, 3)
    dynamic_losses = losses[:]
    losses.clear()
    finetune_task(kept, CLASSIFY, train, dev, BUCKETED, 3)
    assert losses[0] != pytest.approx(dynamic_losses[0], rel=1e-4)


def job_id(recipe: FinetuneRecipe) -> str:
    settings = TaskSettings(recipe=recipe)
    return plan_job("run", 1.0, None, get_task("rte"), 0, settings, "data").job_id


def test_a_bucketed_job_has_its_own_id_and_no_other_id_moves():
    task = get_task("rte")
    for recipe in (FinetuneRecipe(), FinetuneRecipe(padding="max_len")):
        assert "length_buckets" not in task.identity(TaskSettings(recipe=recipe))["recipe"]
    dynamic = job_id(FinetuneRecipe())
    bucketed = job_id(FinetuneRecipe(padding="buckets", length_buckets=[32, 64, 128]))
    other_buckets = job_id(FinetuneRecipe(padding="buckets", length_buckets=[64, 128]))
    assert len({dynamic, bucketed, other_buckets}) == 3
    # how it runs is not what it computes: compiled or not, the bucketed job is the same job
    graphs = FinetuneRecipe(padding="buckets", length_buckets=[32, 64, 128], compile=True)
    assert job_id(graphs) == bucketed


def test_cuda_graphs_off_cuda_are_refused_before_any_work(tmp_path):
    """``compile: reduce-overhead`` on the CPU would quietly compile without graphs: a
    fine-tune refuses it, and so does a study, before it pre-trains anything."""
    recipe = BUCKETED.model_copy(update={"compile": "reduce-overhead"})
    rows = marker_rows(8, 0)
    with pytest.raises(InputError, match="finetune.recipe.compile: reduce-overhead replays CUDA"):
        finetune_task(micro_kept(), CLASSIFY, rows, rows, recipe, seed=0)
    raw = yaml.safe_load(SMOKE.read_text())
    raw["finetune"]["recipe"] = {**raw["finetune"].get("recipe", {}), "compile": "reduce-overhead"}
    spec = parse_spec(raw)
    study = Study(spec, SMOKE, tmp_path / "study", "cpu")
    with pytest.raises(InputError, match="^finetune.recipe.compile: reduce-overhead captures"):
        refuse_cuda_graphs_off_cuda(spec, study.device)


@pytest.mark.slow
def test_a_compiled_bucketed_fine_tune_scores_what_the_eager_one_scores(
    padded_lengths, losses, recwarn
):
    """The eager twin of a CUDA-graph fine-tune: compiled (dynamic shapes, eager random
    numbers), a bucketed fine-tune takes the eager one's steps to rounding, on bucket-long
    batches only."""
    pytest.importorskip("torch._dynamo", reason="torch without dynamo (torch.compile)")
    kept = micro_kept(num_layers=1)  # one layer compiles in about half the time of two
    train, dev = marker_rows(96, 0), marker_rows(64, 1)
    eager = finetune_task(kept, CLASSIFY, train, dev, BUCKETED, seed=3)
    eager_losses = losses[:]
    losses.clear()
    padded_lengths.clear()
    compiled = BUCKETED.model_copy(update={"compile": True})
    fused = finetune_task(kept, CLASSIFY, train, dev, compiled, seed=3)
    assert not [w for w in recwarn if "torch.compile failed" in str(w.message)]
    assert set(padded_lengths) <= set(BUCKETS)
    assert losses[0] == pytest.approx(eager_losses[0], rel=1e-4)
    assert losses == pytest.approx(eager_losses, rel=1e-2)
    assert scores(fused) == pytest.approx(scores(eager), abs=0.1)
