"""A third-party task family for electra-ablate: one file plus an entry point.

``repeat_probe`` asks whether a kept encoder's frozen features tell if the last token of a
sequence repeats an earlier one. Sequences of random ordinary tokens are generated with a fixed
seed (nothing to download), half of them with the last token copied from an earlier position;
a logistic-regression probe is fitted on the mean-pooled hidden states of three quarters and
scored on the rest. The ``majority`` reference predicts the more frequent training label: the
floor any encoder's features must beat.

Registered in this package's ``pyproject.toml``::

    [project.entry-points."electra_ablate.tasks"]
    synthetic = "random_rtd_plugin.synthetic:SYNTHETIC"

after which ``ablate tasks`` lists it and a spec can name it under ``evaluation.tasks``, with no
change to electra-ablate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from electra_ablate.plugin import (
    LoadedKept,
    Task,
    TaskFamily,
    TaskSettings,
)

DATA_SEED = 1234  # the sequences are the same for every encoder, study and machine


class RepeatParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    examples: int = Field(400, ge=40, description="sequences generated (3/4 train the probe)")
    length: int = Field(12, ge=3, le=60, description="ordinary tokens per sequence")


class RepeatProbe(Task):
    name = "repeat_probe"
    family = "synthetic"
    description = "does the last token repeat an earlier one? a linear probe on frozen features"
    needs = "frozen_features"
    metrics = ("accuracy", "auc")
    seeded = False  # fixed data, fixed split, deterministic probe: one evaluation per encoder
    references = ("majority",)
    Params = RepeatParams

    def identity(self, settings: TaskSettings) -> dict[str, Any]:
        return {"params": RepeatParams.model_validate(settings.params).model_dump()}

    def sequences(self, settings: TaskSettings, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """``[CLS] t_1 .. t_n [SEP]`` rows of distinct ordinary tokens (ids 5 and up), the odd
        rows with ``t_n`` copied from an earlier position; and their labels."""
        params = RepeatParams.model_validate(settings.params)
        rng = np.random.default_rng(DATA_SEED)
        rows = np.empty((params.examples, params.length + 2), dtype=np.int64)
        labels = np.arange(params.examples) % 2
        for i, repeat in enumerate(labels):
            tokens = rng.choice(np.arange(5, vocab_size), size=params.length, replace=False)
            if repeat:
                tokens[-1] = tokens[rng.integers(0, params.length - 1)]
            rows[i] = [2, *tokens, 3]  # [CLS] ... [SEP]
        return rows, labels

    def evaluate(
        self,
        kept: LoadedKept,
        settings: TaskSettings,
        seed: int,
        device: Any = "cpu",
        progress: Any = None,
    ) -> dict[str, float]:
        import torch

        rows, labels = self.sequences(settings, kept.model.encoder.cfg.vocab_size)
        encoder = kept.model.encoder
        mode = encoder.training
        encoder.eval()
        with torch.no_grad():
            ids = torch.from_numpy(rows)
            hidden = encoder(ids, torch.zeros_like(ids), torch.ones_like(ids))
        encoder.train(mode)
        return probe_scores(hidden.mean(dim=1).numpy(), labels)

    def evaluate_reference(
        self, reference: str, settings: TaskSettings, seed: int, tokenizer_dir: Path
    ) -> dict[str, float]:
        _, labels = self.sequences(settings, vocab_size=1000)
        split = len(labels) * 3 // 4
        majority = int(labels[:split].mean() >= 0.5)
        test = labels[split:]
        return {"accuracy": 100.0 * float((test == majority).mean()), "auc": 50.0}


def probe_scores(features: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy and ROC-AUC (x100) of a logistic regression fitted on the first 3/4."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler

    split = len(labels) * 3 // 4
    scaler = StandardScaler().fit(features[:split])
    probe = LogisticRegression(max_iter=2000).fit(
        scaler.transform(features[:split]), labels[:split]
    )
    test = scaler.transform(features[split:])
    accuracy = probe.score(test, labels[split:])
    auc = roc_auc_score(labels[split:], probe.decision_function(test))
    return {"accuracy": 100.0 * float(accuracy), "auc": 100.0 * float(auc)}


class SyntheticFamily(TaskFamily):
    name = "synthetic"
    title = "Synthetic"
    aggregate = "synthetic score"
    description = "generated sequences, probed on frozen features (an example plugin family)"

    def tasks(self) -> list[Task]:
        return [RepeatProbe()]

    def fingerprint(self, task: Task, settings: TaskSettings) -> str:
        return f"generated:seed={DATA_SEED}"


SYNTHETIC = SyntheticFamily()
