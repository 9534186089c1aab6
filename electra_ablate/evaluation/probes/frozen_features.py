"""What a frozen kept encoder computes, for probes that fit nothing inside it.

Every function runs the encoder in eval mode (no dropout), without gradients, in batches of at
most ``FEATURE_BATCH_TOKENS`` padded tokens (memory bounded by one batch of activations plus the
returned features), on the device the model sits on, and returns fp32 tensors on the CPU. The
model's own training flag is put back afterwards, and its weights are never touched, so the same
``KeptModel`` can be probed again, fine-tuned or exported.

Packed pre-training text is run as pre-training runs it (``data.batches``): its token types, and
an attention mask that hides padding (``on_device`` puts the model where a probe runs it). GLUE
examples are padded per batch (the fine-tuning
collate, in length order), so short sentences cost little.

Batches are sized in tokens, not rows: a batch of short GLUE sentences then holds hundreds of
them, and the encoder runs few large matrix products instead of many small ones. Measured on
CoLA's 8,551 training sentences (mean 15 tokens) with a ``tiny`` encoder on 2 busy CPU cores
(load ~16): 64 rows per batch 177 s, 512 rows 32 s at 2 threads; 16-19 s at 1 thread either way.
On a shared machine, one intra-op thread (``threads.torch_threads(1)``) is the caller's best
choice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from electra_ablate.backbone.tokens import SpecialTokens
from electra_ablate.evaluation.finetune.batching import as_examples, collate
from electra_ablate.pretraining.objective import KeptModel

FEATURE_BATCH_TOKENS = 64 * 128
"""Padded tokens per forward pass (64 packed sequences of 128): at ``small`` (H=256) one batch's
activations are tens of MB."""

PAD_ID = SpecialTokens().pad

_HEAD_CHUNK = 8192  # token states per head call when applying a detection head to features


@contextmanager
def _frozen(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode and no autograd for the block; the model's own mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@contextmanager
def on_device(model: KeptModel, device: Any) -> Iterator[None]:
    """The kept encoder and head on ``device`` for the block (a probe's encoder passes: seconds
    on a GPU where a CPU takes minutes), then back where they were, so that whoever holds the
    model next (another probe, a fine-tune, an export) finds it as it left it."""
    home, target = _device(model.encoder), torch.device(device)
    modules = [m for m in (model.encoder, model.head) if m is not None]
    for module in modules:
        module.to(target)
    try:
        yield
    finally:
        for module in modules:
            module.to(home)


def _rows_as_long(values: torch.Tensor | np.ndarray, rows: slice) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values[rows].detach().cpu().long()
    return torch.from_numpy(np.array(values[rows], dtype=np.int64))  # a copy: Arrow is read-only


def _packed_batches(
    input_ids: torch.Tensor | np.ndarray,
    token_type_ids: torch.Tensor | np.ndarray | None,
    pad_id: int,
    batch_tokens: int,
) -> Iterator[tuple[slice, dict[str, torch.Tensor]]]:
    """(rows, encoder inputs) for each batch of fixed-length [N, L] sequences."""
    if len(np.shape(input_ids)) != 2:
        raise ValueError(f"input_ids must be [N, L], got shape {tuple(np.shape(input_ids))}")
    rows_per_batch = max(1, batch_tokens // max(1, np.shape(input_ids)[1]))
    for start in range(0, len(input_ids), rows_per_batch):
        rows = slice(start, start + rows_per_batch)
        ids = _rows_as_long(input_ids, rows)
        if token_type_ids is None:
            types = torch.zeros_like(ids)
        else:
            types = _rows_as_long(token_type_ids, rows)
        yield rows, {"input_ids": ids, "token_type_ids": types, "attention_mask": ids != pad_id}


def _hidden(model: KeptModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Final hidden states [B, L, H] of the encoder on one batch, on the model's device."""
    device = _device(model.encoder)
    mask = batch.get("attention_mask")  # absent where the batch has no padding
    return model.encoder(
        batch["input_ids"].to(device),
        batch["token_type_ids"].to(device),
        None if mask is None else mask.to(device),
    )


def token_features(
    model: KeptModel,
    input_ids: torch.Tensor | np.ndarray,
    token_type_ids: torch.Tensor | np.ndarray | None = None,
    *,
    where: torch.Tensor | None = None,
    pad_id: int = PAD_ID,
    batch_tokens: int = FEATURE_BATCH_TOKENS,
) -> torch.Tensor:
    """Final-layer hidden states of each token of ``input_ids`` [N, L].

    Without ``where``: [N, L, H]. With ``where`` ([N, L] bool): only those positions, [M, H] in
    row-major order (the order of ``scores[where]``), so a probe over the replaceable tokens of
    a large split never holds every position's features.
    """
    if where is not None and tuple(where.shape) != tuple(np.shape(input_ids)):
        raise ValueError(f"where {tuple(where.shape)} must match input_ids {np.shape(input_ids)}")
    parts = []
    with _frozen(model.encoder):
        for rows, batch in _packed_batches(input_ids, token_type_ids, pad_id, batch_tokens):
            hidden = _hidden(model, batch).float().cpu()
            parts.append(hidden if where is None else hidden[where[rows].cpu()])
    if not parts:
        width = model.encoder.cfg.hidden_size
        shape = (0, width) if where is not None else (0, np.shape(input_ids)[1], width)
        return torch.zeros(shape)
    return torch.cat(parts)


def detection_logits(model: KeptModel, features: torch.Tensor) -> torch.Tensor:
    """The "replaced" logits of a kept discriminator's own detection head on frozen token features
    (``token_features``' output, [N, L, H] or [M, H]), shaped like ``features`` without H.

    The head reads one token's state at a time (dense, GELU, one logit), so it applies to the
    features a probe already has: one encoder pass serves the probe and the head. Scored on a
    fixed corruption beside the probe, it shows whether the head the discriminator trained
    on-policy also detects replacements it never trained against.
    """
    if model.role != "discriminator":
        raise ValueError(f"detection logits need a kept discriminator, not role {model.role!r}")
    device = _device(model.head)
    parts = []
    with _frozen(model.head):
        for chunk in features.reshape(-1, features.shape[-1]).split(_HEAD_CHUNK):
            parts.append(model.head(chunk.to(device)).float().cpu())
    logits = torch.cat(parts) if parts else torch.zeros(0)
    return logits.reshape(features.shape[:-1])


def length_batches(lengths: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Example indices in length order, cut into batches whose padded size (rows x longest)
    stays within ``batch_tokens`` (a longer example gets a batch of its own)."""
    order = np.argsort(lengths, kind="stable")
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or (end - start + 1) * lengths[order[end]] > batch_tokens:
            batches.append(order[start:end])
            start = end
    return batches


def pooled_features(
    model: KeptModel, examples: Any, *, batch_tokens: int = FEATURE_BATCH_TOKENS
) -> torch.Tensor:
    """[N, 2H] sequence features of encoded examples (``EncodedGlue.train`` / ``.validation``,
    or anything ``finetune.batching.as_examples`` takes), in the examples' order.

    The pooling is the final [CLS] state concatenated with the mean of the final states over the
    example's tokens (padding left out). [CLS] is what a fine-tuned classifier reads, but in a
    frozen encoder it was trained to summarise nothing (no objective here has a sentence-level
    loss), so on its own it would measure the pooling rather than the encoder; the mean carries
    what every token's state holds. The probe, given both, can use either.
    """
    data = as_examples(examples)
    if len(data) == 0:
        return torch.zeros((0, 2 * model.encoder.cfg.hidden_size))
    out = torch.empty((len(data), 2 * model.encoder.cfg.hidden_size))
    with _frozen(model.encoder):
        for indices in length_batches(data.lengths, batch_tokens):
            batch = collate(data, indices)
            hidden = _hidden(model, batch).float().cpu()
            mask = (batch["input_ids"] != PAD_ID).unsqueeze(-1).float()  # the tokens, no padding
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            out[torch.from_numpy(indices)] = torch.cat([hidden[:, 0], mean], dim=1)
    return out


def weights_digest(model: torch.nn.Module) -> str:
    """A content hash of a module's parameters and buffers: what a probe caches features under,
    so that the seeds of one checkpoint share one encoder pass and two different encoders (a
    checkpoint and ``--from-scratch`` weights in the same folder) never share one."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()
