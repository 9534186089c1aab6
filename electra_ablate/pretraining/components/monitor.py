"""The collapse monitor: whether an encoder still tells its positions apart and whether a binary
head still responds to them.

A replaced-token detector whose held-out ROC-AUC sits at 0.5 has either an encoder whose final
states no longer differ across positions (encoder collapse) or a head that ignores what it is
given (dead units, one logit everywhere). Both give the same loss; these statistics tell them
apart. Each is a 0-dim tensor computed on the device, so a training step that does not log
never waits for the host.

The kept encoder's spread is logged by every objective as ``enc_spread``
(``kept_encoder_metrics``: ``masked_lm.MaskedLM.predict`` and ``discriminator.Discriminator``
compute it from the pass they already make), a detector's head as ``disc_head_*``. Their
thresholds, and where each number was measured, are in
``electra_ablate.pretraining.metric_names.COLLAPSE_SIGNALS``; read them on held-out rows, since
training rows are taken with dropout on, which alone spreads the states.
"""

from __future__ import annotations

import torch

from electra_ablate.pretraining.objective import Batch

INACTIVE_BELOW = -3.0
"""A GELU unit whose input is below this passes on less than 0.004 in magnitude and a gradient
below 0.012: inactive for the head's purposes."""


@torch.no_grad()
def encoder_spread(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """How much the final states [B, L, H] differ across the positions ``mask`` [B, L] marks.

    Per sequence, the standard deviation of each unit across its marked positions, averaged
    over units, over the root mean square of those states: 0 when every position has the same
    state (a collapsed encoder), about 1 when positions are as different as states can be.
    Averaged over the sequences with two or more marked positions.
    """
    h = hidden.float()
    m = mask.to(h.dtype).unsqueeze(-1)  # [B, L, 1]
    count = m.sum(dim=1)  # [B, 1]
    mean = (h * m).sum(dim=1) / count.clamp(min=1)  # [B, H]
    var = (((h - mean.unsqueeze(1)) ** 2) * m).sum(dim=1) / count.clamp(min=1)  # [B, H]
    rms = ((h**2) * m).sum(dim=(1, 2)) / (count.squeeze(-1) * h.shape[-1]).clamp(min=1)
    spread = var.sqrt().mean(dim=-1) / rms.sqrt().clamp(min=1e-12)  # [B]
    usable = (count.squeeze(-1) >= 2).to(h.dtype)
    return (spread * usable).sum() / usable.sum().clamp(min=1)


@torch.no_grad()
def head_stats(
    pre_activation: torch.Tensor, logits: torch.Tensor, mask: torch.Tensor, prefix: str
) -> dict[str, torch.Tensor]:
    """A binary head's state at the positions ``mask`` [B, L] marks: ``{prefix}_inactive``, the
    share of its hidden units' inputs ([B, L, H], before the GELU) below ``INACTIVE_BELOW``, and
    ``{prefix}_logit_spread``, the standard deviation of its logits [B, L] over those positions
    (0: one answer everywhere, whatever the input)."""
    m = mask.bool()
    n = m.sum().clamp(min=1).to(torch.float32)
    inactive = ((pre_activation.float() < INACTIVE_BELOW) & m.unsqueeze(-1)).sum()
    share = inactive.to(torch.float32) / (n * pre_activation.shape[-1])
    z = logits.float()
    mean = (z * m).sum() / n
    spread = ((((z - mean) ** 2) * m).sum() / n).sqrt()
    return {f"{prefix}_inactive": share, f"{prefix}_logit_spread": spread}


def real_positions(batch: Batch) -> torch.Tensor:
    """The batch's real (non-pad) positions [B, L]: its ``attention_mask``, or every position of
    a batch that carries none (its rows are all full, ``objective.Batch``)."""
    mask = batch.get("attention_mask")
    return torch.ones_like(batch["input_ids"], dtype=torch.bool) if mask is None else mask.bool()


def kept_encoder_metrics(hidden: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
    """``enc_spread``: ``encoder_spread`` of the kept encoder's final states [B, L, H] over the
    batch's real positions; one name for every objective, so runs compare in one column."""
    return {"enc_spread": encoder_spread(hidden, real_positions(batch))}
