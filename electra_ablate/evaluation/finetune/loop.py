"""Fine-tune a kept encoder on one task with one seed; the task scores the dev predictions."""

from __future__ import annotations

import copy
import functools
import math
import time
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F

from electra_ablate.backbone.config import BackboneConfig, Precision
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.evaluation.finetune.batching import (
    Examples,
    as_examples,
    collate,
    eval_batches,
    train_batches,
)
from electra_ablate.evaluation.finetune.classifier import GlueClassifier, layerwise_param_groups
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.infra.errors import InputError, TrainingDiverged
from electra_ablate.pretraining.engine.compiling import CUDA_GRAPHS, compiled
from electra_ablate.pretraining.engine.precision import autocast, grad_scaler

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")

Progress = Callable[[int, int], None]
"""Called after every optimizer step with (steps done, total steps)."""
Padding = Callable[[int], int]
"""The length a batch is padded to, given its longest example's (``padded_length``, bound to a
recipe and an encoder)."""


class TaskInfo(Protocol):
    """What fine-tuning needs of a task (``evaluation.finetuned.FinetunedTask`` provides it):
    its outputs, and how to score predictions (so this loop never knows which task it runs)."""

    @property
    def name(self) -> str: ...

    @property
    def num_labels(self) -> int: ...

    @property
    def is_regression(self) -> bool: ...

    def score(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]: ...

    def prediction_facts(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]: ...


def supported_max_len(recipe: FinetuneRecipe, backbone: BackboneConfig) -> int:
    """Longest example the encoder can take under this recipe: encode GLUE to this length."""
    return min(recipe.max_len, backbone.max_seq_len)


def padded_length(recipe: FinetuneRecipe, backbone: BackboneConfig, longest: int) -> int:
    """What a batch whose longest example has ``longest`` tokens is padded to: that length
    under ``padding: dynamic``; the longest supported example under ``max_len``; under
    ``buckets`` the smallest of ``length_buckets`` that holds it, a bucket past what the encoder
    takes cut to that (so a few lengths, each one CUDA graph under ``reduce-overhead``). The one
    rule every fine-tuning batch, training and evaluation, is padded by."""
    limit = supported_max_len(recipe, backbone)
    if recipe.padding == "max_len":
        return limit
    if recipe.padding == "buckets":
        if recipe.length_buckets is None:  # a recipe built without validation (model_copy)
            raise InputError("finetune.recipe: padding: buckets needs length_buckets")
        bucket = next((b for b in recipe.length_buckets if b >= longest), limit)
        return min(bucket, limit)
    return longest


def finetune_task(
    kept: LoadedKept,
    task: TaskInfo,
    train_examples: Any,
    eval_examples: Any,
    recipe: FinetuneRecipe,
    seed: int,
    device: str | torch.device = "cpu",
    progress: Progress | None = None,
) -> dict[str, float]:
    """Every dev metric ``task.score`` gives (0-100 scale), what the predictions are made of
    (``task.prediction_facts``: a classifier's majority share and baseline), plus
    ``train_examples``, ``epochs``, ``train_seconds`` and ``wall_seconds``.

    Examples are anything ``as_examples`` accepts, already truncated to ``supported_max_len``.
    The kept model is copied, never changed. The seed fixes the head initialisation, dropout and
    batch order; the caller's global torch RNG state is left as it was. The recipe's precision
    (``auto``: fp32 on CPU, bf16 autocast on CUDA). ``compile: reduce-overhead`` off CUDA is
    refused: torch would quietly compile without CUDA graphs.
    """
    start = time.perf_counter()
    device = torch.device(device)
    if recipe.compile == CUDA_GRAPHS and device.type != "cuda":
        raise InputError(
            f"finetune.recipe.compile: {CUDA_GRAPHS} replays CUDA graphs and needs a CUDA "
            f"device, but this fine-tune runs on {device.type}"
        )
    train = as_examples(train_examples).capped(recipe.cap_for(task.name))
    evaluation = as_examples(eval_examples)
    max_len = supported_max_len(recipe, kept.model.encoder.cfg)
    _check_split(task.name, "train", train, max_len)
    _check_split(task.name, "eval", evaluation, max_len)
    pad: Padding = functools.partial(padded_length, recipe, kept.model.encoder.cfg)

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        fit = functools.partial(_trained, kept, train, task, recipe, seed, device, pad, progress)
        try:
            model = fit(recipe.compile)
        except _CompilerFailed as e:  # the same fine-tune, eager, from its seed
            warnings.warn(f"torch.compile failed ({e}); this fine-tune runs eager", stacklevel=2)
            model = fit(False)
        train_seconds = time.perf_counter() - start
        outputs = predict(model, evaluation, recipe.eval_batch_size, device, pad, recipe.precision)

    if not np.isfinite(outputs).all():
        raise TrainingDiverged(f"fine-tuning {task.name} (seed {seed}) gave non-finite outputs")
    predictions = outputs[:, 0] if task.is_regression else outputs.argmax(axis=1)
    return {
        **task.score(predictions, evaluation.labels),
        **task.prediction_facts(predictions, evaluation.labels),
        "train_examples": len(train),
        "epochs": recipe.epochs_for(task.name),
        "train_seconds": train_seconds,
        "wall_seconds": time.perf_counter() - start,
    }


class _CompilerFailed(Exception):
    """The compiled step's first call raised: the compiler's error (they have no common type),
    or the model's own, which the eager retry then raises again."""


def _trained(
    kept: LoadedKept,
    train: Examples,
    task: TaskInfo,
    recipe: FinetuneRecipe,
    seed: int,
    device: torch.device,
    pad: Padding,
    progress: Progress | None,
    compile_option: bool | str,
) -> GlueClassifier:
    """The classifier built from the seed and fine-tuned; with ``compile``, through
    ``torch.compile`` (dynamic shapes: one compilation for every batch length; under
    ``reduce-overhead`` one CUDA graph recorded per batch shape, hence ``padding: buckets``)."""
    torch.manual_seed(seed)
    model = new_classifier(kept, task, recipe, device)
    forward = compiled(model, compile_option, dynamic=True) if compile_option else model
    rng = np.random.default_rng(seed)
    _train(model, forward, train, task, recipe, rng, device, pad, progress)
    return model


def _train(
    model: GlueClassifier,
    forward: Callable[..., torch.Tensor],
    train: Examples,
    task: TaskInfo,
    recipe: FinetuneRecipe,
    rng: np.random.Generator,
    device: torch.device,
    pad: Padding,
    progress: Progress | None,
) -> None:
    epochs = recipe.epochs_for(task.name)
    total_steps = epochs * math.ceil(len(train) / recipe.batch_size)
    optimizer = make_optimizer(model, recipe)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _warmup_then_linear_decay(total_steps, recipe.warmup_fraction)
    )
    scaler = grad_scaler(device, recipe.precision)  # fp16 only
    lengths = train.lengths
    model.train()
    step = 0
    for _ in range(epochs):
        for indices in train_batches(lengths, recipe.batch_size, recipe.sort_chunk_batches, rng):
            batch = collate(train, indices, pad(int(lengths[indices].max())))
            if forward is not model:
                batch = masked(batch)
            try:
                train_step(
                    model, batch, optimizer, scaler, task.is_regression, recipe, device, forward
                )
            except Exception as e:
                if step > 0 or forward is model:
                    raise
                message = str(e).strip()
                first_line = message.splitlines()[0][:300] if message else ""
                raise _CompilerFailed(f"{type(e).__name__}: {first_line}") from e
            schedule.step()
            step += 1
            if progress is not None:
                progress(step, total_steps)


def new_classifier(
    kept: LoadedKept, task: TaskInfo, recipe: FinetuneRecipe, device: torch.device
) -> GlueClassifier:
    """A copy of the kept encoder under a new head for ``task``, on ``device``; its head starts
    from the global torch RNG, which the caller seeds."""
    num_outputs = 1 if task.is_regression else task.num_labels
    model = GlueClassifier(copy.deepcopy(kept.model.encoder), num_outputs, recipe.head_dropout)
    return model.to(device)


def masked(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``batch`` with an attention mask, all ones where the collate left it out (no row padded):
    a compiled step always takes the masked path, so one graph serves every batch."""
    if "attention_mask" in batch:
        return batch
    return {**batch, "attention_mask": torch.ones_like(batch["input_ids"])}


def make_optimizer(model: GlueClassifier, recipe: FinetuneRecipe) -> torch.optim.AdamW:
    """AdamW over the layer-wise learning-rate groups, fused: one kernel per group for all its
    tensors (a third of a tiny model's step on the CPU otherwise)."""
    return torch.optim.AdamW(
        layerwise_param_groups(model, recipe.lr, recipe.layer_decay, recipe.weight_decay),
        betas=recipe.betas,
        eps=recipe.eps,
        fused=True,
    )


def train_step(
    model: GlueClassifier,
    batch: dict[str, torch.Tensor],
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    is_regression: bool,
    recipe: FinetuneRecipe,
    device: torch.device,
    forward: Callable[..., torch.Tensor] | None = None,
) -> torch.Tensor:
    """One optimizer step on one collated batch: forward (``model``, or its compiled
    ``forward``) under the recipe's autocast, backward, gradient clipping, the update. Its own
    function so that ``bench/op_count.py`` counts the host operations of exactly the step a
    fine-tune runs. Returns the loss (on the device: no host sync)."""
    labels = batch["labels"].to(device, non_blocking=True)
    logits = _logits(model if forward is None else forward, batch, device, recipe.precision)
    loss = _loss(logits, labels, is_regression)
    optimizer.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        scaler.step(optimizer)
        scaler.update()
    return loss.detach()


@torch.inference_mode()
def predict(
    model: GlueClassifier,
    examples: Examples,
    batch_size: int,
    device: torch.device,
    pad: Padding | None = None,
    precision: Precision = "auto",
) -> np.ndarray:
    """Raw outputs [N, num_outputs] in the examples' order, computed in length order; each batch
    padded to ``pad`` of its longest example (``None``: to that example)."""
    model.eval()
    outputs = np.empty((len(examples), model.head.out_features), dtype=np.float32)
    lengths = examples.lengths
    for indices in eval_batches(lengths, batch_size):
        pad_to = pad(int(lengths[indices].max())) if pad is not None else None
        logits = _logits(model, collate(examples, indices, pad_to), device, precision)
        outputs[indices] = logits.cpu().numpy()
    return outputs


def _check_split(task: str, split: str, examples: Examples, max_len: int) -> None:
    if len(examples) == 0:
        raise InputError(f"{task}: the {split} split has no examples")
    longest = int(examples.lengths.max())
    if longest > max_len:
        raise InputError(
            f"{task}: a {split} example has {longest} tokens, more than this model and recipe "
            f"take ({max_len}); encode GLUE with max_len={max_len}"
        )


def _warmup_then_linear_decay(total_steps: int, warmup_fraction: float) -> Callable[[int], float]:
    warmup = int(warmup_fraction * total_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return step / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return factor


def _loss(logits: torch.Tensor, labels: torch.Tensor, is_regression: bool) -> torch.Tensor:
    if is_regression:
        return F.mse_loss(logits.squeeze(-1), labels.float())
    return F.cross_entropy(logits, labels.long())


def _logits(
    model: Callable[..., torch.Tensor],
    batch: dict[str, torch.Tensor],
    device: torch.device,
    precision: Precision = "auto",
) -> torch.Tensor:
    """fp32 logits; the encoder runs under the recipe's autocast (``auto``: bf16 on CUDA, fp32
    on CPU, where bf16 is far slower)."""
    # no attention_mask: no row is padded (the collate decides; see model.padding_mask)
    inputs = [batch[k].to(device, non_blocking=True) if k in batch else None for k in MODEL_INPUTS]
    with autocast(device, precision):
        return model(*inputs).float()
