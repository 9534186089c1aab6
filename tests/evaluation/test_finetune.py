import numpy as np
import pytest
import torch

from electra_ablate.backbone.config import PRESETS
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.evaluation.finetune.batching import (
    as_examples,
    collate,
    eval_batches,
    train_batches,
)
from electra_ablate.evaluation.finetune.classifier import GlueClassifier, layerwise_param_groups
from electra_ablate.evaluation.finetune.loop import finetune_task, masked, predict
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.task import GLUE_TASKS
from electra_ablate.evaluation.task import MAJORITY_BASELINE, MAJORITY_SHARE, PREDICTION_FACTS
from electra_ablate.infra.errors import AblateError
from electra_ablate.pretraining.objective import KeptModel

MARKER = 7
VOCAB = 64


CLASSIFY = GLUE_TASKS["sst2"]  # the task scores the predictions: accuracy
REGRESS = GLUE_TASKS["stsb"]  # Spearman and Pearson
# a few hundred steps' worth of signal for a random micro encoder, about a second on CPU
FAST = FinetuneRecipe(lr=3e-3, epochs=6, batch_size=16, task_epochs={})


@pytest.fixture(autouse=True)
def one_thread():
    """Micro models gain nothing from intra-op threads; on a shared 2-core machine they make
    these tests ~10x slower through contention."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def marker_rows(n: int, seed: int, regression: bool = False) -> list[dict]:
    """Random token sequences; the label is whether (or how often) token 7 appears."""
    rng = np.random.default_rng(seed)
    others = [t for t in range(5, VOCAB) if t != MARKER]
    rows = []
    for _ in range(n):
        body = [int(t) for t in rng.choice(others, size=int(rng.integers(4, 20)))]
        markers = int(rng.integers(0, 4)) if regression else int(rng.random() < 0.5)
        for position in rng.choice(len(body), size=markers, replace=False):
            body[position] = MARKER
        count = body.count(MARKER)
        ids = [2, *body, 3]
        label = float(count) if regression else int(count > 0)
        rows.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "label": label})
    return rows


def micro_kept(**overrides) -> LoadedKept:
    torch.manual_seed(0)
    cfg = PRESETS["micro"].with_overrides(vocab_size=VOCAB, **overrides)
    return LoadedKept(KeptModel(Encoder(cfg), "discriminator", TokenBinaryHead(cfg)), {}, None)


def test_layerwise_lr_factors_run_from_head_to_embeddings():
    kept = micro_kept(embedding_size=16)  # E != H, so the projection exists
    model = GlueClassifier(kept.model.encoder, 2, 0.1)
    groups = layerwise_param_groups(model, lr=1e-3, layer_decay=0.8, weight_decay=0.0)
    scale = {name: g["lr_scale"] for g in groups for name in g["names"]}
    assert set(scale) == {name for name, _ in model.named_parameters()}
    expected = {
        "head.": 1.0,
        "encoder.layers.1.": 0.8,
        "encoder.layers.0.": 0.8**2,
        "encoder.embeddings.": 0.8**3,
        "encoder.project.": 0.8**3,
    }
    for name, factor in scale.items():
        prefix = next(p for p in expected if name.startswith(p))
        assert factor == pytest.approx(expected[prefix]), name
    assert all(g["lr"] == pytest.approx(1e-3 * g["lr_scale"]) for g in groups)
    assert all(g["weight_decay"] == 0.0 for g in groups)


def test_weight_decay_skips_biases_and_layer_norms():
    model = GlueClassifier(micro_kept().model.encoder, 2, 0.1)
    groups = layerwise_param_groups(model, lr=1e-3, layer_decay=0.8, weight_decay=0.01)
    decay = {name: g["weight_decay"] for g in groups for name in g["names"]}
    assert decay["encoder.layers.0.attention_norm.weight"] == 0.0
    assert decay["encoder.layers.0.ffn_in.bias"] == 0.0
    assert decay["head.bias"] == 0.0
    assert decay["encoder.layers.0.ffn_in.weight"] == 0.01
    assert decay["encoder.embeddings.word.weight"] == 0.01
    assert decay["head.weight"] == 0.01


def test_train_batches_cover_every_example_once_in_length_buckets():
    lengths = np.random.default_rng(0).integers(3, 100, size=1000)
    epoch = train_batches(lengths, batch_size=32, chunk_batches=8, rng=np.random.default_rng(1))
    assert len(epoch) == 32  # ceil(1000 / 32)
    assert sorted(np.concatenate(epoch).tolist()) == list(range(1000))
    # sorted within chunks of 8 batches: a batch spans about 1/8 of the length range
    unsorted = np.mean([np.ptp(lengths[i : i + 32]) for i in range(0, 1000, 32)])
    assert np.mean([np.ptp(lengths[b]) for b in epoch]) < unsorted / 4
    again = train_batches(lengths, batch_size=32, chunk_batches=8, rng=np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(epoch, again, strict=True))


def test_dynamic_padding_predicts_as_fixed_padding_on_fewer_tokens():
    kept = micro_kept()
    model = GlueClassifier(kept.model.encoder, 3, 0.1)
    examples = as_examples(marker_rows(100, seed=0))
    max_len = kept.model.encoder.cfg.max_seq_len
    dynamic = predict(model, examples, batch_size=16, device=torch.device("cpu"))
    fixed = predict(model, examples, 16, torch.device("cpu"), pad=lambda longest: max_len)
    np.testing.assert_allclose(dynamic, fixed, atol=1e-5)

    def tokens(pad_to):
        return sum(
            collate(examples, b, pad_to)["input_ids"].numel()
            for b in eval_batches(examples.lengths, 16)
        )

    assert tokens(None) < 0.5 * tokens(max_len)


def test_head_learns_a_separable_task_beyond_the_majority_class():
    train, dev = marker_rows(300, seed=0), marker_rows(200, seed=1)
    majority = 100 * max(np.mean([r["label"] for r in dev]), 1 - np.mean([r["label"] for r in dev]))
    result = finetune_task(micro_kept(), CLASSIFY, train, dev, FAST, seed=0)
    assert result["accuracy"] > majority + 20
    assert result["train_examples"] == 300 and result["epochs"] == 6


def test_regression_learns_with_mse():
    train, dev = marker_rows(300, 0, regression=True), marker_rows(200, 1, regression=True)
    result = finetune_task(micro_kept(), REGRESS, train, dev, FAST, seed=0)
    assert set(result) >= {"spearman", "pearson"}
    assert result["spearman"] > 60


def test_same_seed_same_result_and_the_kept_model_is_untouched():
    kept = micro_kept()
    before = {k: v.clone() for k, v in kept.model.encoder.state_dict().items()}
    recipe = FAST.model_copy(update={"epochs": 1})
    train, dev = marker_rows(64, 0), marker_rows(64, 1)
    torch.manual_seed(123)
    outside = torch.rand(1)
    first = finetune_task(kept, CLASSIFY, train, dev, recipe, seed=3)
    torch.manual_seed(123)
    second = finetune_task(kept, CLASSIFY, train, dev, recipe, seed=3)
    assert torch.rand(1) == outside  # the caller's RNG stream is left as it was
    timing = {"train_seconds", "wall_seconds"}
    assert {k: v for k, v in first.items() if k not in timing} == {
        k: v for k, v in second.items() if k not in timing
    }
    for key, value in kept.model.encoder.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_seeds_change_the_run():
    recipe = FAST.model_copy(update={"epochs": 1})
    train, dev = marker_rows(64, 0, regression=True), marker_rows(64, 1, regression=True)
    kept = micro_kept()
    runs = {finetune_task(kept, REGRESS, train, dev, recipe, seed=s)["pearson"] for s in (0, 1)}
    assert len(runs) == 2


def test_train_cap_takes_the_same_subset_for_every_seed():
    recipe = FAST.model_copy(update={"epochs": 1, "train_caps": {"sst2": 40}})
    examples = as_examples(marker_rows(100, 0))
    assert examples.capped(40).input_ids == examples.capped(40).input_ids
    assert len(examples.capped(40)) == 40 and examples.capped(None) is examples
    result = finetune_task(micro_kept(), CLASSIFY, examples, marker_rows(20, 1), recipe, seed=0)
    assert result["train_examples"] == 40


def test_examples_too_long_for_the_model_are_a_clear_error():
    too_long = [{"input_ids": [2] + [9] * 70 + [3], "token_type_ids": [0] * 72, "label": 0}]
    with pytest.raises(AblateError, match="encode GLUE with max_len=64"):
        finetune_task(micro_kept(), CLASSIFY, too_long, too_long, FAST, seed=0)


def test_as_examples_reads_rows_and_columns_alike():
    rows = marker_rows(5, 0)
    columns = {key: [r[key] for r in rows] for key in rows[0]}
    from_rows, from_columns = as_examples(rows), as_examples(columns)
    assert from_rows.input_ids == from_columns.input_ids
    np.testing.assert_array_equal(from_rows.labels, from_columns.labels)
    np.testing.assert_array_equal(from_rows.lengths, [len(r["input_ids"]) for r in rows])


def test_recipe_rejects_unknown_fields_and_knows_per_task_epochs():
    recipe = FinetuneRecipe()
    assert [recipe.epochs_for(t) for t in ("rte", "stsb", "cola")] == [10, 10, 3]
    with pytest.raises(ValueError):
        FinetuneRecipe(learning_rate=1e-4)


def test_masked_gives_a_compiled_step_a_mask_without_changing_the_batch():
    """A compiled step always takes the masked path (one graph for padded and full batches): an
    unpadded batch gets an all-ones mask, a padded one keeps its own, the caller's is untouched."""
    ids = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]])
    full = {"input_ids": ids, "labels": torch.tensor([0, 1])}
    with_mask = masked(full)
    assert "attention_mask" not in full
    assert torch.equal(with_mask["attention_mask"], torch.ones_like(ids))
    assert with_mask["input_ids"] is ids
    padded = {**full, "attention_mask": (ids != 0).long()}
    assert masked(padded)["attention_mask"] is padded["attention_mask"]


def test_prediction_facts_give_the_majority_share_and_the_majority_class_baseline():
    """What a classification score is made of (issue 72): the share of dev predictions in the
    most frequent predicted class, and the headline score of always predicting the dev set's
    majority class; a regression task has neither."""
    labels = np.array([1, 1, 1, 0])
    cola = GLUE_TASKS["cola"]  # headline Matthews: a constant prediction scores 0
    facts = cola.prediction_facts(np.array([0, 0, 0, 0]), labels)
    assert facts == {MAJORITY_SHARE: 100.0, MAJORITY_BASELINE: 0.0}
    facts = CLASSIFY.prediction_facts(np.array([0, 1, 1, 1, 0]), np.array([0, 0, 0, 1, 1]))
    assert facts == {MAJORITY_SHARE: 60.0, MAJORITY_BASELINE: 60.0}  # accuracy of all-0
    assert REGRESS.prediction_facts(np.array([0.5, 1.0]), np.array([1.0, 2.0])) == {}
    assert set(PREDICTION_FACTS) == {MAJORITY_SHARE, MAJORITY_BASELINE}


def test_a_finetune_records_its_prediction_facts_beside_its_metrics():
    train, dev = marker_rows(64, 0), marker_rows(64, 1)
    one_epoch = FAST.model_copy(update={"epochs": 1})
    result = finetune_task(micro_kept(), CLASSIFY, train, dev, one_epoch, seed=0)
    share = float(np.mean([r["label"] for r in dev]))
    assert result[MAJORITY_BASELINE] == pytest.approx(100 * max(share, 1 - share))
    assert 50.0 <= result[MAJORITY_SHARE] <= 100.0
    regression = marker_rows(64, 1, regression=True)
    scored = finetune_task(micro_kept(), REGRESS, regression, regression, one_epoch, seed=0)
    assert not set(PREDICTION_FACTS) & set(scored)
