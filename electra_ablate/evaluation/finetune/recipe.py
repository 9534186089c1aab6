"""The fine-tuning recipe: ELECTRA-Small's GLUE hyper-parameters, every one overridable."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, PositiveInt, field_validator, model_validator

from electra_ablate.backbone.config import Precision
from electra_ablate.infra.spec_model import SpecModel


class FinetuneRecipe(SpecModel):
    """Defaults are the paper's ELECTRA-Small GLUE recipe (Clark et al. 2020, Table 7).

    ``train_caps`` limits a task's training set (a fixed random subset, the same for every seed
    and every checkpoint) so that CPU studies finish; a report must show the caps it ran under.
    ``padding="max_len"`` pads every batch to ``max_len``; it exists to measure what dynamic
    padding buys, not to be used. ``padding="buckets"`` pads every batch to the smallest of
    ``length_buckets`` that holds its longest example, so that a step replayed as CUDA graphs
    (``compile="reduce-overhead"``) records one graph per bucket rather than one per distinct
    batch length; it is not the default until a GPU stretch has timed it.
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
    padding: Literal["dynamic", "max_len", "buckets"] = Field(
        "dynamic",
        description="pad each batch to its longest example, always to max_len, or to the "
        "smallest of length_buckets that holds its longest example (a few fixed lengths, so "
        "that compile: reduce-overhead records one CUDA graph per bucket; not yet timed on a "
        "GPU, so not the default). Part of a job's identity: padding moves dropout's draws",
    )
    length_buckets: list[PositiveInt] | None = Field(
        None,
        min_length=1,
        description="padding: buckets only, and needed there: the padded lengths, increasing, "
        "the largest equal to max_len (e.g. [32, 64, 128]); in a job's identity only then",
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
        "only; reduce-overhead also replays the step as CUDA graphs (CUDA only, refused "
        "elsewhere; one graph per distinct batch shape, so use it with padding: buckets; not "
        "yet timed, so not the default). A compiler that fails leaves the fine-tune eager. Not "
        "part of a job's identity",
    )

    @field_validator("length_buckets")
    @classmethod
    def _increasing(cls, buckets: list[int] | None) -> list[int] | None:
        if buckets is not None and buckets != sorted(set(buckets)):
            raise ValueError(
                f"{buckets}: the lengths must increase (sorted, each once), "
                f"e.g. {sorted(set(buckets))}"
            )
        return buckets

    @model_validator(mode="after")
    def _buckets_with_bucket_padding(self) -> FinetuneRecipe:
        """Buckets are read under ``padding: buckets`` only, and every example must fit one:
        a bucket list left beside another padding would quietly do nothing."""
        if self.padding != "buckets":
            if self.length_buckets is not None:
                raise ValueError(
                    f"length_buckets is read only under padding: buckets (padding is "
                    f"{self.padding}): set padding: buckets or drop length_buckets"
                )
            return self
        if self.length_buckets is None:
            raise ValueError(
                f"padding: buckets needs length_buckets, increasing lengths whose largest is "
                f"max_len (e.g. [{self.max_len // 4}, {self.max_len // 2}, {self.max_len}])"
            )
        if self.length_buckets[-1] != self.max_len:
            raise ValueError(
                f"length_buckets {self.length_buckets}: the largest must equal max_len "
                f"({self.max_len}), so that every example has a bucket and none is padded "
                "past it"
            )
        return self

    def epochs_for(self, task: str) -> int:
        return self.task_epochs.get(task, self.epochs)

    def epochs_overridden(self, tasks: list[str]) -> dict[str, int]:
        """The tasks of ``tasks`` that ``task_epochs`` gives other epochs than ``epochs``, with
        theirs: the default gives RTE and STS-B 10 whatever ``epochs`` says (the paper's), so
        a study that sets ``epochs`` is told (``StudySpec.plan_notes``)."""
        return {
            task: self.task_epochs[task]
            for task in tasks
            if task in self.task_epochs and self.task_epochs[task] != self.epochs
        }

    def cap_for(self, task: str) -> int | None:
        return self.train_caps.get(task)
