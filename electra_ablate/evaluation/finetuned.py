"""Tasks scored by fine-tuning the kept encoder with a fresh head on the ``[CLS]`` vector, as the
ELECTRA paper scores GLUE.

A family of such tasks says only how to read and encode its data (``encode``) and how to score
predictions (``score``); everything else is done here, the same way for every family and for
``ablate run`` and ``ablate finetune`` alike: the job's identity (the recipe and the caps), the
encoding with the kept encoder's own tokenizer (cached per process), one capping path (the
recipe's training cap inside ``finetune_task``, the spec's evaluation cap here), and the
dry-run's cost estimate and the schedule's untimed one (``relative_cost``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from electra_ablate.data.paths import file_hash
from electra_ablate.evaluation.finetune.batching import as_examples
from electra_ablate.evaluation.finetune.loop import finetune_task, supported_max_len
from electra_ablate.evaluation.task import (
    EVAL_EXAMPLE_COST,
    MAJORITY_BASELINE,
    MAJORITY_SHARE,
    Progress,
    Task,
    TaskSettings,
    capped,
    family_of,
)
from electra_ablate.infra.errors import InputError
from electra_ablate.pretraining.engine.precision import resolve_precision

if TYPE_CHECKING:
    from electra_ablate.checkpoints.kept import LoadedKept

TIMED_EXAMPLES = 64
"""Training examples of the short real fine-tune that ``estimate_seconds`` times and scales."""
ACCELERATOR_TIMED = 640
"""On an accelerator, the longer of the two timed fine-tunes (``estimate_seconds``)."""


_ENCODED: dict[tuple, Any] = {}  # (task, data, tokenizer contents, length) -> EncodedSplits


class EncodedSplits(Protocol):
    """Token ids of a task's splits, each a column mapping (``input_ids``, ``token_type_ids``,
    ``label``, ``length``), unpadded and truncated to the encoder's length."""

    @property
    def train(self) -> Any: ...

    @property
    def validation(self) -> Any: ...


class FinetunedTask(Task):
    """A task whose score is a fine-tuned head's: classification (``num_labels`` classes) or
    regression (``num_labels`` = 1)."""

    needs = "finetuned_head"
    num_labels: int

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    def encode(
        self, settings: TaskSettings, tokenizer_dir: Path, max_len: int
    ) -> EncodedSplits:  # pragma: no cover - interface
        raise NotImplementedError

    def score(
        self, predictions: np.ndarray, labels: np.ndarray
    ) -> dict[str, float]:  # pragma: no cover - interface
        """Every metric in ``metrics`` from class ids (or scores, for regression)."""
        raise NotImplementedError

    def prediction_facts(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """What the dev predictions are made of (``evaluation.task.PREDICTION_FACTS``): the
        share of them in the most frequent predicted class and the headline score of always
        predicting ``labels``' majority class (ties: the lower class id); none for regression,
        which has no classes. So that a report can tell a learnt score from a constant one."""
        if self.is_regression:
            return {}
        predicted = np.bincount(np.asarray(predictions, dtype=np.int64), minlength=self.num_labels)
        truth = np.asarray(labels, dtype=np.int64)
        majority = int(np.bincount(truth, minlength=self.num_labels).argmax())
        baseline = self.score(np.full_like(truth, majority), truth)[self.headline]
        return {
            MAJORITY_SHARE: 100.0 * float(predicted.max()) / max(1, int(predicted.sum())),
            MAJORITY_BASELINE: float(baseline),
        }

    def example_counts(self, settings: TaskSettings) -> tuple[int, int] | None:
        """The training and evaluation examples of the task's data before any cap, read
        cheaply (a file's row count, not its rows), or None where a family cannot say:
        ``relative_cost`` reads them. Default: None."""
        return None

    def majority_risk(self, settings: TaskSettings) -> str | None:
        """``Task.majority_risk``: the training examples the cap and epochs leave, when
        under the floor its family measured (``TaskFamily.majority_floors``); None for
        regression, an unmeasured task or unreadable data."""
        floor = None if self.is_regression else family_of(self).majority_floors.get(self.name)
        counts = self.example_counts(settings) if floor is not None else None
        if floor is None or counts is None:
            return None
        recipe = settings.recipe
        train = capped(counts[0], recipe.cap_for(self.name))
        epochs = recipe.epochs_for(self.name)
        seen = train * epochs
        if seen >= floor.examples_seen:
            return None
        return (
            f"{train:,} training examples × {epochs} epoch{'s' if epochs != 1 else ''} = "
            f"{seen:,} seen, under the {floor.examples_seen:,} at which a committed study's "
            f"model first predicted more than one class ({floor.source}): every model, the "
            "no-pre-training baseline included, is likely to score the majority class"
        )

    def relative_cost(self, settings: TaskSettings) -> float:
        """Training examples after the cap times the recipe's epochs, plus the evaluation
        examples after theirs at ``EVAL_EXAMPLE_COST`` each (``Task.relative_cost``)."""
        counts = self.example_counts(settings)
        if counts is None:
            return super().relative_cost(settings)
        recipe = settings.recipe
        train = capped(counts[0], recipe.cap_for(self.name)) * recipe.epochs_for(self.name)
        return train + EVAL_EXAMPLE_COST * capped(counts[1], settings.eval_cap)

    def identity(self, settings: TaskSettings) -> dict[str, Any]:
        """The recipe, less how it runs (precision, compile) and its per-task fields (this
        task's cap and epochs stand beside it). ``length_buckets`` enters only under
        ``padding: buckets``, where it sets the padded lengths and so dropout's draws: the jobs
        of every other padding keep the ids they had before the key existed."""
        recipe = settings.recipe
        left_out = {"train_caps", "task_epochs", "precision", "compile"}
        if recipe.padding != "buckets":
            left_out.add("length_buckets")
        return {
            "recipe": recipe.model_dump(mode="json", exclude=left_out),
            "train_cap": recipe.cap_for(self.name),
            "epochs": recipe.epochs_for(self.name),
            "eval_cap": settings.eval_cap,
        }

    def precision(self, settings: TaskSettings, device: Any) -> str | None:
        """The recipe's precision as ``finetune_task`` resolves it on ``device`` (auto: bf16 on
        CUDA, fp32 elsewhere)."""
        return resolve_precision(settings.recipe.precision, torch.device(device))

    def encoded(self, kept: LoadedKept, settings: TaskSettings) -> EncodedSplits:
        """The task's splits encoded with the kept encoder's own tokenizer, to the longest
        example the encoder and recipe take; cached per process by the tokenizer's contents."""
        tokenizer = Path(kept.tokenizer_dir) / "tokenizer.json"
        if not tokenizer.is_file():
            raise InputError(f"the kept encoder has no {tokenizer.name} to encode {self.name} with")
        max_len = supported_max_len(settings.recipe, kept.model.encoder.cfg)
        data = json.dumps([dict(settings.sources), str(settings.spec_dir)], sort_keys=True)
        key = (self.family, self.name, data, file_hash(tokenizer), max_len)
        if key not in _ENCODED:
            _ENCODED[key] = self.encode(settings, Path(kept.tokenizer_dir), max_len)
        return _ENCODED[key]

    def evaluate(
        self,
        kept: LoadedKept,
        settings: TaskSettings,
        seed: int,
        device: Any = "cpu",
        progress: Progress | None = None,
    ) -> dict[str, float]:
        encoded = self.encoded(kept, settings)
        evaluation = as_examples(encoded.validation).capped(settings.eval_cap)
        metrics = finetune_task(
            kept, self, encoded.train, evaluation, settings.recipe, seed, device, progress
        )
        return {**metrics, "eval_examples": len(evaluation)}

    def estimate_seconds(self, kept: LoadedKept, settings: TaskSettings, device: Any) -> float:
        """A short real fine-tune (``TIMED_EXAMPLES`` examples, one epoch), scaled to the
        capped training set and the recipe's epochs, plus one evaluation.

        On an accelerator a fine-tune's fixed cost (the model moved there, kernels loaded, the
        first launches) is far larger than two steps, and a two-step timing scaled to the
        training set overestimated GLUE-5 thirtyfold on an H200 (reports/gpu_sessions/2026-11-26-a).
        There the cost per example is the difference between two short fine-tunes of
        ``TIMED_EXAMPLES`` and ``ACCELERATOR_TIMED`` examples (after an untimed one), which
        the fixed cost cancels from."""
        encoded = self.encoded(kept, settings)
        recipe = settings.recipe
        train = as_examples(encoded.train).capped(recipe.cap_for(self.name))
        evaluation = as_examples(encoded.validation).capped(settings.eval_cap)

        def short(examples: int) -> dict[str, Any]:
            cut = recipe.model_copy(
                update={"train_caps": {self.name: examples}, "task_epochs": {self.name: 1}}
            )
            return finetune_task(kept, self, train, evaluation, cut, 0, device)

        accelerator = torch.device(device).type != "cpu" and len(train) > TIMED_EXAMPLES
        if accelerator:  # once untimed: the process's first launches load its kernels
            short(TIMED_EXAMPLES)
        result = short(TIMED_EXAMPLES)
        per_example = result["train_seconds"] / min(TIMED_EXAMPLES, len(train))
        if accelerator:
            longer = short(ACCELERATOR_TIMED)
            extra = min(ACCELERATOR_TIMED, len(train)) - TIMED_EXAMPLES
            per_example = max(longer["train_seconds"] - result["train_seconds"], 0.0) / extra
        evaluation_s = result["wall_seconds"] - result["train_seconds"]
        return per_example * len(train) * recipe.epochs_for(self.name) + evaluation_s
