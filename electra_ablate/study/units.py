"""The units of work a study is made of, and their identities.

A ``RunUnit`` is one pre-training run (an objective entry, under one variant, at one seed); a
``BaselineUnit`` is the no-pre-training row (a freshly initialised encoder of the same
backbone); a ``ReferenceUnit`` is a task's reference scorer, which needs no encoder (a
count-based detector scored on the same data). Their evaluations are
``evaluation.run.EvaluationJob``s (checkpoint, task, seed).
Each is named by a hash of exactly what changes its result, so re-running a study skips
finished work, resumes unfinished work, and an edit re-runs only what it changes. How often a
run logs, evaluates or saves state, and how many threads it uses, are not part of that
identity; nor is the code that computes it, which is recorded beside the id and checked before
finished work is reused (``electra_ablate.study.code_change``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.data.pretraining import PretrainingData
from electra_ablate.infra.identity import IDENTITY_EXCLUDED as IDENTITY_EXCLUDED
from electra_ablate.infra.identity import config_hash as config_hash
from electra_ablate.infra.layout import BASELINE_FRACTION, RunLayout
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.spec import FinetuneSpec, ObjectiveEntry, StudySpec

BASELINE_OBJECTIVE = "none"
BASELINE_LABEL = "no pre-training"


@dataclass
class VariantData:
    """What one data setting gives every unit planned on it: the tokenizer and packed
    sequences, the vocabulary, the backbone sized to that vocabulary, and the task data
    fingerprints (per task, for job ids). Made once, by ``plan.plan_study``."""

    data: PretrainingData
    vocab: Vocab
    backbone: BackboneConfig
    task_fingerprints: dict[str, str] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """The data fingerprint (``data.pretraining.data_fingerprint``: a hash of the tokenizer's
        files and every packed sequence), part of every run, baseline and reference id: a unit
        trained on other data is another unit, whichever cache or machine built the data."""
        return self.data.summary["fingerprint"]


def variant_label(label: str, variant: str | None) -> str:
    """How a unit is named in tables and plots: ``electra`` or ``electra@pre_ln``."""
    return label if variant is None else f"{label}@{variant}"


@dataclass(frozen=True)
class RunUnit:
    """One pre-training run."""

    variant: str | None
    spec: StudySpec  # the variant's resolved spec
    entry: ObjectiveEntry
    seed: int
    plan: RunPlan
    config: dict[str, Any]  # everything its identity is a hash of
    run_id: str
    layout: RunLayout
    data: VariantData | None = field(default=None, compare=False, repr=False)  # see prepared

    @property
    def label(self) -> str:
        return variant_label(self.entry.display, self.variant)

    @property
    def backbone(self) -> BackboneConfig:
        return prepared(self).backbone

    @property
    def objective(self) -> str:
        return self.entry.name

    @property
    def done(self) -> bool:
        return self.layout.done.exists()

    def kept_dir(self, fraction: float) -> Path:
        return self.layout.kept(fraction)

    def fractions(self, block: FinetuneSpec) -> list[float]:
        """The budget fractions ``block`` evaluates (its choice, else every checkpoint)."""
        return sorted(block.checkpoints or [f for f, _ in self.plan.checkpoints])


@dataclass(frozen=True)
class BaselineUnit:
    """The no-pre-training baseline of one variant: its backbone, freshly initialised."""

    variant: str | None
    spec: StudySpec
    config: dict[str, Any]
    run_id: str
    layout: RunLayout
    data: VariantData | None = field(default=None, compare=False, repr=False)  # see prepared
    seed: int = 0
    objective: str = BASELINE_OBJECTIVE

    @property
    def label(self) -> str:
        return variant_label(BASELINE_LABEL, self.variant)

    @property
    def backbone(self) -> BackboneConfig:
        return prepared(self).backbone

    @property
    def done(self) -> bool:
        return (self.kept_dir(BASELINE_FRACTION) / "kept.json").exists()

    def kept_dir(self, fraction: float) -> Path:
        return self.layout.kept(fraction)

    def fractions(self, block: FinetuneSpec) -> list[float]:
        return [BASELINE_FRACTION] if block.baseline else []


@dataclass(frozen=True)
class ReferenceUnit:
    """A reference scorer that tasks of the study declare (``Task.references``), on one data
    setting: its rows carry the reference's name as objective and label, at budget 0."""

    variant: str | None
    spec: StudySpec
    reference: str
    run_id: str
    layout: RunLayout
    data: VariantData | None = field(default=None, compare=False, repr=False)  # see prepared
    seed: int = 0
    done: bool = True  # nothing to train

    @property
    def objective(self) -> str:
        return self.reference

    @property
    def label(self) -> str:
        return variant_label(self.reference, self.variant)

    def fractions(self, block: FinetuneSpec) -> list[float]:
        return [BASELINE_FRACTION]


Unit = RunUnit | BaselineUnit | ReferenceUnit


def prepared(unit: Unit) -> VariantData:
    """The data ``plan.plan_study`` gave ``unit``: carried, never compared (the unit's id holds
    the data's fingerprint). A merge names units from their records alone and gives them none:
    nothing trains or evaluates those."""
    if unit.data is None:
        raise RuntimeError(f"{unit.label} was not planned by plan_study: it carries no data")
    return unit.data
