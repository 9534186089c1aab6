"""``bench/collapse_reference.py``: our ELECTRA beside `transformers`' on the chain task. The
reference is tied as the paper ties it and has our model's shape, the held-out AUC is the
Mann-Whitney figure, and a run on ``micro`` for a few steps writes every arm of both
implementations with the detector's figures and the collapse monitor at the same steps."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="needs the hf extra (transformers)")

PATH = Path(__file__).resolve().parents[2] / "bench" / "collapse_reference.py"
spec = importlib.util.spec_from_file_location("collapse_reference", PATH)
collapse_reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collapse_reference)

FEW = [
    *("--preset", "micro", "--vocab", "64", "--seq", "16", "--batch", "8", "--steps", "3"),
    *("--eval-every", "2", "--eval-batches", "2", "--short-warmup", "1", "--long-warmup", "2"),
    *("--horizon", "0"),
]
FIGURES = {"auc", "nats_learnt", "spread", "disc_inactive", "disc_logit_spread"}


def test_the_reference_shares_embeddings_as_the_paper_and_has_our_shape():
    args = collapse_reference.parse(FEW)
    task = collapse_reference.make_task(args)
    ours, reference = (
        collapse_reference.build(i, task["backbone"], task["vocab"], 0)
        for i in collapse_reference.IMPLEMENTATIONS
    )
    disc, gen = reference.disc, reference.gen
    assert gen.electra.embeddings is disc.electra.embeddings  # token, position, type, LayerNorm
    assert gen.generator_lm_head.weight is disc.electra.embeddings.word_embeddings.weight
    assert gen.config.hidden_size == task["backbone"].hidden_size // 4

    def shape(model: torch.nn.Module) -> list[int]:  # parameters per decay group, shared once
        decay = [p.numel() for _, p in model.trainable_parameters() if p.ndim >= 2]
        return [sum(decay), sum(p.numel() for _, p in model.trainable_parameters()) - sum(decay)]

    assert shape(ours) == shape(reference)


def test_the_auc_counts_ties_half_and_agrees_with_the_pairwise_count():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, 200).astype(float)  # many ties
    labels = rng.integers(0, 2, 200)
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    assert collapse_reference.roc_auc(scores, labels) == pytest.approx(pairs)
    assert collapse_reference.roc_auc(np.zeros(10), labels[:10]) == 0.5  # a constant detector


def test_a_micro_bench_writes_both_implementations_at_the_same_steps(tmp_path):
    out = tmp_path / "bench.json"
    result = collapse_reference.main([*FEW, "--json-out", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["complete"] and result["task"]["distinct_heldout"] == 16
    runs = {(r["implementation"], r["arm"]): r for r in result["runs"]}
    arms = ("base", "long_warmup", "low_lr")
    assert set(runs) == {(i, a) for i in collapse_reference.IMPLEMENTATIONS for a in arms}
    for run in runs.values():
        assert [row["step"] for row in run["log"]] == [0, 2, 3]
        assert all(set(row) >= FIGURES for row in run["log"])
    assert all("own_auc" in row for row in runs["ours", "base"]["log"])
    # one factor at a time: the arms differ from base in the rate or the warm-up only
    base, long, low = (runs["ours", a] for a in ("base", "long_warmup", "low_lr"))
    assert (long["lr"], long["warmup_steps"]) == (base["lr"], 2)
    assert (low["lr"], low["warmup_steps"]) == (2e-4, base["warmup_steps"])
    # seeded: the same held-out figures before training for both arms of one implementation
    assert base["log"][0] == long["log"][0] == low["log"][0]
