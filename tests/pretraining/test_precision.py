"""Precision as an option: under bf16 autocast (run here on the CPU) every objective keeps its
losses, sampling distributions, metrics and weights in fp32 and stays finite; fp16 trains with a
gradient scaler; a fine-tune runs under bf16; a pre-LN encoder's residual stream stays fp32."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from engine_helpers import CFG, UNIFORM, make_trainer
from objective_names import BUILT_IN

from electra_ablate.backbone.config import PRESETS
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.conformance import contract_batch
from electra_ablate.evaluation.finetune.loop import finetune_task
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.task import GLUE_TASKS
from electra_ablate.pretraining.components import generator as generator_module
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.precision import autocast, grad_scaler, resolve_precision
from electra_ablate.pretraining.objective import KeptModel
from electra_ablate.pretraining.registry import build_objective
from electra_ablate.report.header import deviations

CASES = [(name, {}, 0) for name in BUILT_IN] + [
    ("two_stage", {}, 1),
    ("adversarial", {"mle_warmup": 0.3}, 0),
    ("electra", {"generator": "unigram"}, 0),
]


def test_auto_is_bf16_on_cuda_and_fp32_on_the_cpu():
    assert resolve_precision("auto", torch.device("cuda")) == "bf16"
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert resolve_precision("fp16", torch.device("cpu")) == "fp16"
    assert PretrainSpec().precision == "auto" and FinetuneRecipe().precision == "auto"
    assert grad_scaler(torch.device("cpu"), "bf16") is None
    assert grad_scaler(torch.device("cpu"), "fp16") is not None


@pytest.mark.parametrize(("name", "params", "stage"), CASES)
def test_bf16_autocast_keeps_losses_sampling_and_metrics_in_fp32(monkeypatch, name, params, stage):
    torch.manual_seed(0)
    objective = build_objective(name, CFG, params, UNIFORM)
    objective.enter_stage(stage)
    objective.train()
    sampled_from = []
    sample = generator_module.sample_tokens
    monkeypatch.setattr(
        generator_module,
        "sample_tokens",
        lambda log_probs: sampled_from.append(log_probs.dtype) or sample(log_probs),
    )
    with autocast(torch.device("cpu"), "bf16"):
        out = objective(contract_batch(CFG.vocab_size, batch_size=3, seq_len=24))
    assert out.loss.dtype == torch.float32 and torch.isfinite(out.loss)
    for metric, value in out.metrics.items():
        assert value.dtype == torch.float32, metric
        assert torch.isfinite(value), metric
    assert all(dtype == torch.float32 for dtype in sampled_from)
    out.loss.backward()
    for p in objective.parameters():
        assert p.dtype == torch.float32
        assert p.grad is None or bool(torch.isfinite(p.grad).all())


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_training_under_reduced_precision_keeps_fp32_finite_weights(tmp_path, precision):
    trainer = make_trainer(tmp_path, "electra", precision=precision, steps_of_budget=8)
    summary = trainer.train()
    assert summary["precision"] == precision
    assert (trainer.scaler is not None) == (precision == "fp16")
    for p in trainer.objective.parameters():
        assert p.dtype == torch.float32 and bool(torch.isfinite(p).all())
    rows = [json.loads(r) for r in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # (fp16's first steps overflow on purpose: the scaler skips them, their grad_norm is inf)
    losses = [v for row in rows for k, v in row.items() if k.endswith("loss")]
    assert losses and all(v is not None and math.isfinite(v) for v in losses)


def test_a_resumed_fp16_run_restores_its_loss_scale(tmp_path):
    trainer = make_trainer(tmp_path, "bert_mlm", precision="fp16", steps_of_budget=8)
    trainer.train(stop_at=3)  # a state at step 3 (resume_every)
    scale = trainer.scaler.get_scale()
    resumed = make_trainer(tmp_path, "bert_mlm", precision="fp16", steps_of_budget=8)
    resumed.start_or_resume()
    assert resumed.step == 3 and resumed.scaler.get_scale() == scale


def test_a_fine_tune_under_bf16_autocast_is_finite():
    torch.manual_seed(0)
    cfg = PRESETS["micro"].with_overrides(vocab_size=64)
    kept = LoadedKept(KeptModel(Encoder(cfg), "discriminator", TokenBinaryHead(cfg)), {}, None)
    rng = np.random.default_rng(0)
    rows = [
        {"input_ids": [2, *rng.integers(5, 64, 6).tolist(), 3], "token_type_ids": [0] * 8}
        | {"label": int(i % 2)}
        for i in range(24)
    ]
    recipe = FinetuneRecipe(epochs=1, batch_size=8, task_epochs={}, precision="bf16")
    result = finetune_task(kept, GLUE_TASKS["sst2"], rows, rows, recipe, seed=0)
    assert math.isfinite(result["accuracy"])
    assert all(p.dtype == torch.float32 for p in kept.model.encoder.parameters())


def test_pre_ln_with_an_embedding_projection_keeps_the_residual_in_fp32():
    """Defect 10: under autocast the E->H projection outputs bf16, and pre-LN added every
    sublayer onto that bf16 stream."""
    cfg = CFG.with_overrides(layer_norm="pre", embedding_size=16, hidden_size=32)
    encoder = Encoder(cfg)
    seen = []
    encoder.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0].dtype))
    encoder.layers[-1].register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    with autocast(torch.device("cpu"), "bf16"):
        encoder(torch.randint(5, CFG.vocab_size, (2, 12)))
    assert seen == [torch.float32, torch.float32]


def test_the_report_names_reduced_precision_as_a_deviation():
    glue = {"tasks": ["sst2"]}
    assert not [d for d in deviations({"finetune": glue}) if "autocast" in d]
    on_gpu = deviations({"device": "cuda", "finetune": glue})
    assert "pre-training matrix products in bf16 autocast (the original code: fp32)" in on_gpu
    assert "fine-tuning matrix products in bf16 autocast (the original code: fp32)" in on_gpu
    fp16 = deviations({"pretrain": {"precision": "fp16"}, "finetune": glue})
    assert [d for d in fp16 if "autocast" in d] == [
        "pre-training matrix products in fp16 autocast (the original code: fp32)"
    ]
