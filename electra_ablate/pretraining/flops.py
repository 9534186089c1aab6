"""Training and inference FLOPs of an objective, computed from its config, plus a measured check.

Budgets, checkpoints and plot axes are in pre-training FLOPs, so every objective describes one
training step as a list of encoder passes (``Objective.flops_plan``) and this module prices them.
Two conventions:

``paper``
    The ELECTRA paper's accounting (Clark et al. 2020, its released ``flops_computation.py``):
    a multiply-add is 2 FLOPs, backward costs the same as forward (train = 2 x forward), embedding
    lookups are dense one-hot matmuls (2·E·(V + L + types) per token), and elementwise work is
    counted per element: LayerNorm 5, GELU 8, softmax 5, dropout 4, bias / residual / attention
    scale 1. The MLM output layer and its softmax run only at the predicted positions. We price
    *our* architecture in that convention, so it differs from the paper's script in small ways:
    the attention LayerNorm is counted per element (the script counts 5 per token), the MLM
    output bias and the discriminator logit bias are counted, and the number of predicted
    positions is whatever the objective declares (our ``max_predictions(0.15, 128)`` = 19 slots,
    the script's 0.15625·128 = 20). All of it moves the totals by well under 1%; the tests pin
    the paper's figures within 3% (BERT-Small 1.4e18 train holds with 19 or 20 slots).

    ELECTRA-Small's 1.4e18 train FLOPs is ambiguous: the paper's hyper-parameter table gives it a
    1/4-width generator, and the paper's own script with that generator gives 1.29e18 (7.5% low);
    a 1/2-width generator gives 1.40e18. Both are tested, and which one a run uses is simply its
    ``generator_size``.

``standard``
    The usual 6·N·D accounting: forward = 2 x (weights of every Linear used) per token, plus the
    attention matmuls (2·2·L·H per token per layer for QKᵀ and AV); backward = 2 x forward;
    embedding lookups are sparse (0) and elementwise work is ignored. ``measure_step_flops``
    counts what torch runs with ``torch.utils.flop_counter``; on every built-in objective the two
    agree to 0.01% (the only gap is the adversarial objective's one-logit baseline head).

Inference FLOPs are the encoder's forward pass for one example without any head, which is what
the paper's "infer FLOPs" column measures to within rounding (its script adds a per-token
binary classifier worth under 0.5% of an ELECTRA-Small forward pass).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.pretraining.objective import Batch, ModelPass, Objective, Stage

Convention = Literal["paper", "standard"]
CONVENTIONS: tuple[Convention, ...] = ("paper", "standard")

# Elementwise FLOPs per element in the paper convention.
DROPOUT = 4  # random number, compare, apply mask, rescale
LAYER_NORM = 5  # mean, variance (square and sum), scale, shift
GELU = 8  # the tanh approximation
SOFTMAX = 5  # subtract max, exp, sum, divide
TARGET_PICK = 2  # cross-entropy's dot product with a one-hot target

# A trained pass costs forward + backward: the paper takes backward = forward, standard = 2x.
TRAIN_MULTIPLIER: dict[Convention, int] = {"paper": 2, "standard": 3}


def pass_flops(p: ModelPass, seq_len: int, convention: Convention) -> float:
    """FLOPs one sequence costs in this pass: forward, plus backward when the pass is trained."""
    forward = encoder_forward_flops(p.config, seq_len, convention)
    paper = convention == "paper"
    per_position = _head_flops(p.config, p.head, paper)
    per_position += sum(_dense(n_in, n_out, paper) for n_in, n_out in p.extra_linears)
    forward += p.predicted * per_position
    return float(forward * (TRAIN_MULTIPLIER[convention] if p.trained else 1))


def step_flops(
    plan: list[ModelPass], seq_len: int, batch_size: int, convention: Convention
) -> float:
    """FLOPs of one training step on ``batch_size`` sequences of ``seq_len`` tokens."""
    return batch_size * sum(pass_flops(p, seq_len, convention) for p in plan)


def inference_flops(config: BackboneConfig, seq_len: int, convention: Convention) -> float:
    """Forward FLOPs of the encoder alone on one example (the paper's "infer FLOPs")."""
    return encoder_forward_flops(config, seq_len, convention)


def objective_flops(objective: Objective, seq_len: int, batch_size: int) -> dict[str, float]:
    """Per-step FLOPs of the objective's current stage in both conventions."""
    plan = objective.flops_plan(seq_len)
    return {c: step_flops(plan, seq_len, batch_size, c) for c in CONVENTIONS}


def stage_step_flops(
    objective: Objective, seq_len: int, batch_size: int, convention: Convention
) -> list[tuple[Stage, float]]:
    """Per-step FLOPs of every stage of the objective.

    Only ``stage_index`` is switched (and restored), never ``enter_stage``: entering a stage may
    freeze or copy weights, which pricing a plan must not do to a live objective.
    """
    current = objective.stage_index
    priced = []
    try:
        for index, stage in enumerate(objective.stages()):
            objective.stage_index = index
            plan = objective.flops_plan(seq_len)
            priced.append((stage, step_flops(plan, seq_len, batch_size, convention)))
    finally:
        objective.stage_index = current
    return priced


def training_flops(
    objective: Objective, seq_len: int, batch_size: int, steps: int, convention: Convention
) -> float:
    """FLOPs of ``steps`` training steps: each stage gets ``fraction`` of the steps, or (split
    by FLOPs) of the FLOPs that the steps cost at the stages' average price."""
    priced = stage_step_flops(objective, seq_len, batch_size, convention)
    if objective.stage_split() == "steps":
        return steps * sum(stage.fraction * flops for stage, flops in priced)
    return steps / sum(stage.fraction / flops for stage, flops in priced)


def encoder_forward_flops(config: BackboneConfig, seq_len: int, convention: Convention) -> float:
    """Forward FLOPs of embeddings, E->H projection and all blocks for one sequence, no head."""
    paper = convention == "paper"
    e, h = config.embedding_size, config.hidden_size
    per_token = _embedding_flops(config, seq_len, paper)
    if e != h:
        per_token += _dense(e, h, paper)
    per_token += config.num_layers * _block_flops(config, seq_len, paper)
    if paper and config.layer_norm == "pre":
        per_token += LAYER_NORM * h  # the final LayerNorm after the last block
    return float(seq_len * per_token)


def _dense(n_in: int, n_out: int, paper: bool) -> float:
    """One row through a Linear layer; its bias add counts only in the paper convention."""
    return 2 * n_in * n_out + (n_out if paper else 0)


def _embedding_flops(config: BackboneConfig, seq_len: int, paper: bool) -> float:
    """Per token: lookups as one-hot matmuls, the two adds, LayerNorm, dropout (paper only)."""
    if not paper:
        return 0.0
    e = config.embedding_size
    lookups = 2 * e * (config.vocab_size + seq_len + config.type_vocab_size)
    return lookups + 2 * e + (LAYER_NORM + DROPOUT) * e


def _block_flops(config: BackboneConfig, seq_len: int, paper: bool) -> float:
    """Per token, one post-LN transformer block."""
    h, ffn = config.hidden_size, config.intermediate_size
    flops = _dense(h, 3 * h, paper) + _dense(h, h, paper) + _dense(h, ffn, paper)
    flops += _dense(ffn, h, paper)
    flops += 2 * (2 * h * seq_len)  # QKᵀ and attention-weighted values, all heads together
    if paper:
        flops += config.num_heads * seq_len * (1 + SOFTMAX + DROPOUT)  # scale, softmax, dropout
        flops += GELU * ffn
        flops += 2 * (DROPOUT + 1 + LAYER_NORM) * h  # each sublayer: dropout, residual, LN
    return flops


def _head_flops(config: BackboneConfig, head: str, paper: bool) -> float:
    """Per position the head runs at."""
    h, e, v = config.hidden_size, config.embedding_size, config.vocab_size
    mlm = _dense(h, e, paper) + _dense(e, v, paper)
    if paper:
        mlm += (GELU + LAYER_NORM) * e + (SOFTMAX + TARGET_PICK) * v
    heads = {
        "mlm": mlm,
        "binary": _dense(h, h, paper) + _dense(h, 1, paper) + (GELU * h if paper else 0),
        "none": 0.0,
    }
    if head not in heads:
        raise ValueError(f"unknown head {head!r} in a ModelPass; expected one of {list(heads)}")
    return heads[head]


# Fused SDPA kernels, counted as the model's matmuls: QKᵀ and AV forward, the four gradient
# matmuls backward. torch's own formulas for the CUDA kernels add the scores that the kernel
# recomputes in backward; that recomputation is an implementation choice, not model FLOPs (the
# math path, used with attention dropout, never does it), so it is left out here too.
def _sdpa_forward(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _sdpa_backward(
    grad_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs
) -> int:
    return 2 * sdpa_flop_count(query_shape, key_shape, value_shape)


_aten = torch.ops.aten
SDPA_FORMULAS: dict[object, Callable[..., int]] = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_forward,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_backward,
    _aten._scaled_dot_product_flash_attention_backward: _sdpa_backward,
    _aten._scaled_dot_product_efficient_attention_backward: _sdpa_backward,
    _aten._scaled_dot_product_cudnn_attention_backward: _sdpa_backward,
}


def measure_step_flops(objective: Objective, batch: Batch) -> float:
    """FLOPs torch actually runs for one training step (forward + backward of the loss).

    Counted with ``FlopCounterMode`` (matmuls and attention only, i.e. the ``standard``
    convention). Gradients the step produced are cleared afterwards.
    """
    counter = FlopCounterMode(display=False, custom_mapping=SDPA_FORMULAS)
    with counter:
        objective(batch).loss.backward()
    objective.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())
