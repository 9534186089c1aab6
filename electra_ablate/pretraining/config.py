"""The ``pretrain`` section of a study spec: what the engine needs to train any objective.

It lives with the objective axis, below the study, so that the engine imports its own settings
and no torch is needed to validate a spec (``electra_ablate.spec`` composes it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from electra_ablate.backbone.config import Precision
from electra_ablate.infra.spec_model import SpecModel

# Output layers that ``pretrain.prior_bias`` can start at the data's priors: the main model's MLM
# heads, a generator's MLM head, and binary heads (replaced-token detection, copy gates).
PriorKind = Literal["mlm", "generator", "detection"]


class PretrainSpec(SpecModel):
    """How every objective of a study pre-trains: the optimiser and schedule (part of a run's
    identity) and how a run reports and where it runs (not part of it)."""

    batch_size: int = Field(128, gt=0, description="sequences per step, over all ranks")
    learning_rate: float = Field(5e-4, gt=0, description="peak learning rate")
    warmup_fraction: float = Field(
        0.01, ge=0, lt=1, description="linear warm-up, as a share of each stage's steps"
    )
    warmup_steps: int | None = Field(
        None,
        ge=0,
        description="linear warm-up over this many steps of each stage, whatever the budget "
        "(replaces warmup_fraction; the paper: 10000). Longer than a stage's steps it is refused "
        "unless warmup_beyond_run says the run is meant so. Left out of a run's id while unset",
    )
    warmup_beyond_run: bool = Field(
        False,
        description="allow warmup_steps longer than a run (or a stage): the run is then the "
        "first steps of a longer schedule (the paper's 10,000-step warm-up on a short run), "
        "its rate never reaching the peak; the dry run, the run and the report say the rate "
        "it reaches. Without it such a warm-up is refused at planning. In no run's id: it "
        "changes no weights",
    )
    schedule: Literal["linear", "cosine", "constant"] = Field(
        "linear", description="decay after warm-up: linear to zero (BERT, ELECTRA), cosine, none"
    )
    weight_decay: float = Field(0.01, ge=0, description="AdamW, never on LayerNorm or bias")
    adam_betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW beta1, beta2")
    adam_eps: float = Field(1e-6, gt=0, description="AdamW epsilon")
    grad_clip: float = Field(1.0, gt=0, description="global gradient-norm clip")
    prior_bias: list[PriorKind] = Field(
        default_factory=list,
        description="output biases that start at the data's priors instead of zero (the "
        "original code's init): mlm heads at log token frequencies, the generator's too, "
        "detection heads at the base replaced rate. A deviation; every report states it",
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0], min_length=1, description="one run per objective and seed"
    )
    # Below: how a run reports and where it runs. None of it changes the trained weights, so
    # none of it is part of a run's identity (``electra_ablate.infra.identity.IDENTITY_EXCLUDED``).
    log_every: int = Field(50, gt=0, description="steps per logged (averaged) metrics row")
    eval_batches: int = Field(8, ge=0, description="held-out batches evaluated at checkpoints")
    resume_every: int = Field(
        200, ge=0, description="steps between resumable states (0: only at checkpoints)"
    )
    num_threads: int | None = Field(
        None, gt=0, description="torch threads (default: torch's); split among --workers"
    )
    deterministic: bool = Field(
        False,
        description="deterministic CUDA kernels, so that a resumed run ends with the weights of "
        "an unbroken one on a GPU too (always so on a CPU); slower",
    )
    compile: bool | Literal["auto", "reduce-overhead"] = Field(
        "auto",
        description="torch.compile the training forward: auto, true or false; random draws "
        "stay eager-mode, so only rounding changes. reduce-overhead also replays the step as "
        "CUDA graphs (CUDA only; 80 ELECTRA-Small steps/s on an H200 against 21 compiled). "
        "auto: CUDA graphs on one CUDA process, compiled under DDP, eager on the CPU; each run "
        "records the mode it ran (done.json compile_mode). Not part of a run's identity",
    )
    precision: Precision = Field(
        "auto",
        description="autocast of the matrix products: auto (bf16 on CUDA, fp32 on CPU), bf16, "
        "fp16 (with a gradient scaler, for GPUs without bf16) or fp32; weights, losses and "
        "metrics stay fp32. Like the device, not part of a run's identity; each run records it",
    )
