"""Every objective's training forward compiles to one graph: no graph break, so ``torch.compile``
can fuse the whole step, and no data-dependent shape that would recompile it batch after batch.

Before the padding check moved to the host and ROC-AUC became sync-free, ELECTRA's forward split
into 24 graphs (23 breaks).
"""

from __future__ import annotations

import json

import pytest
import torch
from engine_helpers import CFG, UNIFORM, make_trainer
from objective_names import BUILT_IN

from electra_ablate.conformance import contract_batch
from electra_ablate.pretraining.engine.compiling import use_compile
from electra_ablate.pretraining.registry import build_objective

dynamo = pytest.importorskip("torch._dynamo", reason="torch without dynamo (torch.compile)")

ONE_LAYER = CFG.with_overrides(num_layers=1)
"""Compiling costs time per traced op, and every layer traces the same ops: one layer shows any
graph break or compiled-step difference that two would, in about half the compile time."""

FULL_WIDTH_GENERATOR = {"generator_size": 1.0}
"""The compiled step's generator at the discriminator's width: its layer's kernels then have the
discriminator's shapes and are compiled once for both (46 kernels instead of 55 from a cold
cache, each a g++ run of about a second). The width changes no op that is traced or drawn; the
default (a quarter width) is traced by ``test_the_training_forward_is_one_graph``."""

CASES = [(name, {}, 0) for name in BUILT_IN] + [
    ("two_stage", {}, 1),
    ("adversarial", {"mle_warmup": 0.3}, 0),
    ("electra", {"generator": "unigram"}, 0),
]


@pytest.mark.slow  # compiles (tests/slow_rule.py)
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "full"])
@pytest.mark.parametrize(("name", "params", "stage"), CASES)
def test_the_training_forward_is_one_graph(name, params, stage, padded):
    torch.manual_seed(0)
    objective = build_objective(name, ONE_LAYER, params, UNIFORM)
    objective.enter_stage(stage)
    objective.train()
    batch = contract_batch(CFG.vocab_size, batch_size=2, seq_len=24)
    if not padded:
        batch = {k: v for k, v in batch.items() if k != "attention_mask"}
        batch["input_ids"] = batch["input_ids"].masked_fill(batch["input_ids"] == 0, 7)
    dynamo.reset()
    explained = dynamo.explain(objective)(batch)
    reasons = [b.reason for b in explained.break_reasons]
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), reasons


@pytest.mark.slow
def test_a_compiled_step_draws_what_eager_draws_and_computes_the_same(tmp_path):
    """pretrain.compile changes rounding only: same masks and samples (eager random numbers),
    the same losses and metrics to float tolerance, over a few optimizer steps."""
    runs = {}
    for option in (False, True):
        trainer = make_trainer(
            tmp_path / str(option),
            "electra",
            backbone=ONE_LAYER,
            params=FULL_WIDTH_GENERATOR,
            compile=option,
            steps_of_budget=6,
        )
        summary = trainer.train()
        assert summary["compiled"] is option
        rows = (tmp_path / str(option) / "metrics.jsonl").read_text().splitlines()
        runs[option] = [json.loads(r) for r in rows]
    for eager, fused in zip(runs[False], runs[True], strict=True):
        for key, value in eager.items():
            if key not in ("tokens_per_s",) and isinstance(value, float):
                assert fused[key] == pytest.approx(value, rel=1e-3, abs=1e-5), key


def test_compile_is_on_by_default_on_cuda_only():
    assert use_compile("auto", torch.device("cuda")) and not use_compile(
        "auto", torch.device("cpu")
    )
    assert use_compile(True, torch.device("cpu")) and not use_compile(False, torch.device("cuda"))
