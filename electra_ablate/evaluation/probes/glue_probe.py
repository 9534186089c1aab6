"""Linear probes on GLUE: what a kept encoder's frozen sentence features make linearly readable,
on each task's full training set, at a small fraction of a fine-tune's cost.

At CPU budgets fine-tuning cannot tell small encoders apart (on ``tiny`` CoLA and MRPC sit at
their majority rates for every model, a BERT that predicts 28% of masked tokens included); a
probe asks a narrower question that stays answerable: with the encoder frozen, how much of the
task a linear model reads off its features. Each GLUE task ``t`` has a probe task ``t_probe``:

- features: ``frozen_features.pooled_features``, the final ``[CLS]`` state beside the mean of
  the final states over the example's tokens, of the examples encoded exactly as fine-tuning
  encodes them (``FinetunedTask.encoded``: the kept encoder's own tokenizer, the recipe's
  ``max_len``), with no cap: the whole training split, the whole dev split (a spec may still
  cap a probe task by name, in ``caps`` and ``eval_caps``);
- probe: ``linear_probe.logistic_probe`` for classes, ``ridge_probe`` for STS-B's scores,
  standardised, the L2 strength picked on a validation fold the seed draws (one evaluation per
  checkpoint: see ``GlueProbe.seeded``);
- scoring and headline: the GLUE task's own (``GlueTask.score``): Matthews correlation for CoLA,
  Spearman for STS-B, accuracy elsewhere, F1 beside for MRPC and QQP.

A family of its own (``glue_probe``), never averaged into the GLUE score: its aggregate, "GLUE
probe score", is the mean headline over the tasks GLUE's own score takes (WNLI left out), the
paper's way (``GLUE.in_aggregate``). GLUE's facts (tasks, metrics, data, fingerprints, the WNLI
exclusion) are all read from ``evaluation.glue``, never restated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from electra_ablate.evaluation.finetune.batching import as_examples
from electra_ablate.evaluation.glue.task import GLUE, GLUE_TASKS, GlueTask
from electra_ablate.evaluation.probes import frozen_features
from electra_ablate.evaluation.probes.frozen_features import (
    on_device,
    weights_digest,
)
from electra_ablate.evaluation.probes.linear_probe import logistic_probe, ridge_probe
from electra_ablate.evaluation.task import (
    PROBE_EXAMPLE_COST,
    Progress,
    Task,
    TaskFamily,
    TaskSettings,
    capped,
)

if TYPE_CHECKING:
    from electra_ablate.checkpoints.kept import LoadedKept

FAMILY = "glue_probe"
SUFFIX = "_probe"
TIMED_EXAMPLES = 512
"""Training examples whose features and probe fit ``estimate_seconds`` times and scales."""

_FEATURES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}  # the last (encoder, task) read


class GlueProbe(Task):
    """A linear probe on frozen pooled features for one GLUE task (see the module docstring)."""

    family = FAMILY
    needs = "frozen_features"
    seeded = False
    """Evaluated once per checkpoint, with the spec's first seed, which draws the validation fold
    that picks the probe's strength: on the objectives study's ELECTRA (``tiny``, full budget)
    seeds 0, 1, 2 gave CoLA 0 / 0 / 0, SST-2 57.8 / 57.8 / 57.8, MRPC 69.6 / 67.9 / 67.9, STS-B
    9.61 / 9.61 / 9.61, RTE 57.4 / 57.4 / 57.8, while each further seed cost SST-2 45-68 s of
    refitting: a spread over seeds would show almost nothing, at a real cost."""

    def __init__(self, glue: GlueTask) -> None:
        self.glue = glue
        self.name = f"{glue.name}{SUFFIX}"
        self.metrics = glue.metrics
        kind = "ridge" if glue.is_regression else "logistic"
        self.description = f"{glue.tsv_dir}: a {kind} probe on frozen pooled features, full sets"

    def identity(self, settings: TaskSettings) -> dict[str, Any]:
        """What changes its result besides encoder, seed and data: the length examples are
        encoded to (the fine-tuning recipe's ``max_len``, capped by the encoder's) and the caps a
        spec sets on this task (``caps``, ``eval_caps``: none by default, the full sets). A cap
        enters only when set, so the full-set probes keep the ids they were first evaluated
        under (the objectives study's probe records)."""
        caps = {"train_cap": settings.recipe.cap_for(self.name), "eval_cap": settings.eval_cap}
        return {"max_len": settings.recipe.max_len} | {k: v for k, v in caps.items() if v}

    def features(
        self, kept: LoadedKept, settings: TaskSettings, device: Any = "cpu"
    ) -> tuple[torch.Tensor, torch.Tensor, Any, Any]:
        """Pooled features and labels of the training and dev splits: the full sets, unless the
        spec caps this task (``Examples.capped``, the one capping path). The encoder runs on
        ``device``."""
        encoded = self.glue.encoded(kept, settings)
        train = as_examples(encoded.train).capped(settings.recipe.cap_for(self.name))
        dev = as_examples(encoded.validation).capped(settings.eval_cap)
        key = (weights_digest(kept.model.encoder), self.name, json.dumps(self.identity(settings)))
        if key not in _FEATURES:
            _FEATURES.clear()
            with on_device(kept.model, device):
                _FEATURES[key] = (
                    frozen_features.pooled_features(kept.model, train),
                    frozen_features.pooled_features(kept.model, dev),
                )
        train_x, dev_x = _FEATURES[key]
        return train_x, dev_x, train.labels, dev.labels

    def evaluate(
        self,
        kept: LoadedKept,
        settings: TaskSettings,
        seed: int,
        device: Any = "cpu",
        progress: Progress | None = None,
    ) -> dict[str, float]:
        import time

        start = time.perf_counter()
        train_x, dev_x, train_y, dev_y = self.features(kept, settings, device)
        probe = ridge_probe if self.glue.is_regression else logistic_probe
        on = torch.device(device)  # the probe is fitted where the encoder ran: a GPU's, in ms
        fit = probe(train_x.to(on), train_y, dev_x.to(on), seed=seed)
        scored = self.glue.score(fit.predictions, dev_y)
        return {
            **scored,
            "train_examples": len(train_y),
            "eval_examples": len(dev_y),
            "wall_seconds": time.perf_counter() - start,
        }

    def relative_cost(self, settings: TaskSettings) -> float:
        """Its training and dev examples, after the caps ``features`` applies, at
        ``PROBE_EXAMPLE_COST`` each (``Task.relative_cost``)."""
        counts = self.glue.example_counts(settings)
        if counts is None:
            return super().relative_cost(settings)
        train = capped(counts[0], settings.recipe.cap_for(self.name))
        return PROBE_EXAMPLE_COST * (train + capped(counts[1], settings.eval_cap))

    def estimate_seconds(self, kept: LoadedKept, settings: TaskSettings, device: Any) -> float:
        """Features and a probe fit on ``TIMED_EXAMPLES`` training examples, scaled to the full
        training and dev sets (both costs grow about linearly with the examples); a whole
        evaluation would cost a dry run minutes on SST-2."""
        import time

        encoded = self.glue.encoded(kept, settings)
        train, dev = as_examples(encoded.train), as_examples(encoded.validation)
        sample = train.subset(range(min(TIMED_EXAMPLES, len(train))))
        start = time.perf_counter()
        with on_device(kept.model, device):
            features = frozen_features.pooled_features(kept.model, sample)
        if self.glue.is_regression:
            ridge_probe(features, sample.labels, features[:1])
        elif len(set(sample.labels.tolist())) > 1:
            logistic_probe(features, sample.labels, features[:1])
        per_example = (time.perf_counter() - start) / max(1, len(sample))
        return per_example * (len(train) + len(dev))


class GlueProbeFamily(TaskFamily):
    name = FAMILY
    title = "GLUE probes"
    aggregate = "GLUE probe score"
    description = (
        "linear probes on frozen pooled features, full GLUE training sets; aggregate: mean "
        "headline over the tasks of the GLUE score (WNLI out), never part of the GLUE score"
    )

    def tasks(self) -> Sequence[GlueProbe]:
        return [GlueProbe(task) for task in GLUE_TASKS.values()]

    def in_aggregate(self, task: Task) -> bool:
        return GLUE.in_aggregate(_glue(task))

    def check(self, task: Task, settings: TaskSettings) -> None:
        GLUE.check(_glue(task), settings)

    def fingerprint(self, task: Task, settings: TaskSettings) -> str:
        return GLUE.fingerprint(_glue(task), settings)

    def bundle_folders(self, task: Task, settings: TaskSettings) -> dict[str, Path]:
        """The GLUE task's own folder: a probe reads the data fine-tuning reads."""
        return GLUE.bundle_folders(_glue(task), settings)


def _glue(task: Task) -> GlueTask:
    """The GLUE task a probe task reads."""
    return GLUE_TASKS[task.name.removesuffix(SUFFIX)]


GLUE_PROBE = GlueProbeFamily()
