"""The ``pretrain`` section of a study spec: what the engine needs to train any objective.

It lives with the objective axis, below the study, so that the engine imports its own settings
and no torch is needed to validate a spec (``electra_ablate.spec`` composes it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from electra_ablate.backbone.config import Precision
from electra_ablate.infra.spec_model import SpecModel

# Output layers that ``pretrain.prior_bias`` can start at the data's priors: the main model's MLM
# heads, a generator's MLM head, and binary heads (replaced-token detection, copy gates).
PriorKind = Literal["mlm", "generator", "detection"]

# The original code's schedule (configure_pretraining.py, model/optimization.py): a 10,000-step
# warm-up and a linear decay from step 0 to zero at the 1,000,000th step (ELECTRA-Small).
PAPER_WARMUP_STEPS = 10_000
PAPER_DECAY_HORIZON_STEPS = 1_000_000

ScheduleShape = Literal["budget", "paper", "per-run"]


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
    decay_horizon_steps: int | None = Field(
        None,
        gt=0,
        description="the paper's schedule shape: the rate decays linearly from step 0 to zero "
        "at this step (the paper: 1000000) for every objective, times a linear warm-up over "
        "warmup_steps (unset: warmup_fraction of the horizon), so each run, and each rung of a "
        "budget sweep, is the first steps of one long schedule (the original code's "
        "polynomial decay). Setting it is the explicit request that accepts a warm-up longer "
        "than the run. Unset: the budget shape (warm-up a share of the run, decay to zero at "
        "the budget's end). Linear schedule only; left out of a run's id while unset",
    )
    schedule: Literal["linear", "cosine", "constant"] = Field(
        "linear", description="decay after warm-up: linear to zero (BERT, ELECTRA), cosine, none"
    )
    weight_decay: float = Field(0.01, ge=0, description="AdamW, never on LayerNorm or bias")
    adam_betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW beta1, beta2")
    adam_eps: float = Field(1e-6, gt=0, description="AdamW epsilon")
    adam_bias_correction: bool | None = Field(
        None,
        description="false: the original code's AdamWeightDecayOptimizer, whose moments are "
        "never bias-corrected (its early steps 3-6x larger than corrected Adam's); unset "
        "or true: torch's AdamW, bias-corrected (a departure every report states). true is "
        "stored as unset, so both name the same runs; left out of a run's id while unset",
    )
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

    @field_validator("adam_bias_correction")
    @classmethod
    def _corrected_is_the_default(cls, value: bool | None) -> bool | None:
        """true is torch's AdamW, what unset means: stored as unset, so it names the same runs."""
        return None if value else value

    @model_validator(mode="after")
    def _horizon_is_linear(self) -> PretrainSpec:
        if self.decay_horizon_steps is not None and self.schedule != "linear":
            raise ValueError(
                "pretrain.decay_horizon_steps is the paper's linear decay: it needs "
                f"schedule: linear, not {self.schedule}"
            )
        return self

    @property
    def schedule_shape(self) -> ScheduleShape:
        """Which of the three shapes the schedule has: ``budget`` (the primary, compute-matched
        one: warm-up a share of each run, decay to zero at its end, which is the budget's),
        ``paper`` (one long schedule over ``decay_horizon_steps``, each run its first steps) or
        ``per-run`` (``warmup_steps`` alone: an absolute warm-up and decay at each run's own
        end, so objectives of different step counts at one budget get different shapes)."""
        if self.decay_horizon_steps is not None:
            return "paper"
        return "per-run" if self.warmup_steps is not None else "budget"

    def schedule_text(self) -> str:
        """The schedule in words, as the recipe row, the dry run and the deviations say it:
        ``budget shape: warm-up 1% of each run, linear decay to zero at the budget's end``."""
        if self.schedule_shape == "paper":
            return (
                f"paper shape: warm-up {warmup_of_horizon(self):,} steps, linear decay from "
                f"step 0 to zero at step {self.decay_horizon_steps:,}, the same for every "
                "objective (each run its first steps)"
            )
        per_run = self.schedule_shape == "per-run"
        warmup = (
            f"{self.warmup_steps:,} steps"
            if per_run
            else f"{self.warmup_fraction * 100:g}% of each run"
        )
        end = "each run's end" if per_run else "the budget's end"
        decay = {
            "linear": f"linear decay to zero at {end}",
            "cosine": f"cosine decay to zero at {end}",
            "constant": "constant after it",
        }[self.schedule]
        return f"{'per-run warm-up' if per_run else 'budget shape'}: warm-up {warmup}, {decay}"

    def schedule_departure(self) -> str | None:
        """How the schedule departs from the original code's (a 10,000-step warm-up and a
        1,000,000-step linear decay from step 0), or None when it is that one."""
        if (
            self.schedule_shape == "paper"
            and self.decay_horizon_steps == PAPER_DECAY_HORIZON_STEPS
            and warmup_of_horizon(self) == PAPER_WARMUP_STEPS
        ):
            return None
        return (
            f"learning-rate schedule, {self.schedule_text()} (the paper: warm-up "
            f"{PAPER_WARMUP_STEPS:,} steps, linear decay from step 0 to zero at step "
            f"{PAPER_DECAY_HORIZON_STEPS:,}, each run its first steps)"
        )

    def optimizer_departure(self) -> str | None:
        """The optimiser's departure from the original code's, or None when it has none."""
        if self.adam_bias_correction is False:
            return None
        return (
            "bias-corrected AdamW (the original code: Adam without bias correction, "
            "pretrain.adam_bias_correction: false)"
        )


def warmup_of_horizon(spec: PretrainSpec) -> int:
    """The warm-up of the paper shape: ``warmup_steps``, else ``warmup_fraction`` of the
    horizon (1% of 1,000,000 is the paper's 10,000)."""
    if spec.warmup_steps is not None:
        return spec.warmup_steps
    return round(spec.warmup_fraction * (spec.decay_horizon_steps or 0))
