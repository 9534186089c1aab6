"""The fine-tuning recipe: ELECTRA-Small's GLUE hyper-parameters, every one overridable."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from electra_ablate.backbone.config import Precision


class FinetuneRecipe(BaseModel):
    """Defaults are the paper's ELECTRA-Small GLUE recipe (Clark et al. 2020, Table 7).

    ``train_caps`` limits a task's training set (a fixed random subset, the same for every seed
    and every checkpoint) so that CPU studies finish; a report must show the caps it ran under.
    ``padding="max_len"`` pads every batch to ``max_len``; it exists to measure what dynamic
    padding buys, not to be used.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    lr: float = Field(3e-4, gt=0.0, description="peak learning rate (the head's)")
    layer_decay: float = Field(0.8, gt=0.0, le=1.0, description="lr factor per layer from the top")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW beta1, beta2")
    eps: float = Field(1e-6, gt=0.0, description="AdamW epsilon")
    weight_decay: float = Field(0.0, ge=0.0, description="never on LayerNorm or bias")
    warmup_fraction: float = Field(0.1, ge=0.0, lt=1.0, description="share of the steps")
    epochs: int = Field(3, gt=0, description="epochs for tasks not in task_epochs")
    task_epochs: dict[str, PositiveInt] = Field(
        default_factory=lambda: {"rte": 10, "stsb": 10}, description="epochs per task"
    )
    batch_size: int = Field(32, gt=0)
    eval_batch_size: int = Field(128, gt=0)
    max_len: int = Field(128, gt=4, description="longest example in tokens (longer: truncated)")
    grad_clip: float = Field(1.0, gt=0.0)
    head_dropout: float = Field(0.1, ge=0.0, lt=1.0, description="dropout on the [CLS] vector")
    train_caps: dict[str, PositiveInt] = Field(
        default_factory=dict, description="max training examples per task (finetune.caps adds)"
    )
    padding: Literal["dynamic", "max_len"] = Field(
        "dynamic", description="pad each batch to its longest example, or always to max_len"
    )
    sort_chunk_batches: int = Field(
        100, gt=0, description="training batches per shuffled chunk sorted by length"
    )
    precision: Precision = Field(
        "auto",
        description="autocast: auto (bf16 on CUDA, fp32 on CPU), bf16, fp16 (with a gradient "
        "scaler) or fp32; the head, loss and weights stay fp32. Not part of a job's identity; "
        "each fine-tune records it (results column precision)",
    )

    compile: bool | Literal["reduce-overhead"] = Field(
        False,
        description="torch.compile the classifier's training step, once per process for every "
        "batch length (dynamic shapes), with eager-mode random numbers: true changes rounding "
        "only; reduce-overhead also replays the step as CUDA graphs (CUDA only, not yet "
        "measured). A compiler that fails leaves the fine-tune eager. Not part of a job's "
        "identity",
    )

    def epochs_for(self, task: str) -> int:
        return self.task_epochs.get(task, self.epochs)

    def cap_for(self, task: str) -> int | None:
        return self.train_caps.get(task)
