"""How a resolved spec departs from the paper and the original code (docs/design.md), as one
phrase per departure: what every report's header lists, and what each unit's trackers record
with its configuration. Read from the spec as plain JSON (``study.json``'s, or a unit's
``model_dump``), so a study's record and a running study say the same.

A generic collector: each fact lives with its owner (the schedule's and the optimiser's with
``PretrainSpec``, the initialisers' with the backbone, the vocabulary's with ``TokenizerSpec``,
an objective's with its params: ``params_departures``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import INIT_DEPARTURE
from electra_ablate.data.config import TokenizerSpec
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.task import probe_tasks
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.departures import params_departures

PAPER_DROPOUT = 0.1
SCHEDULE_FIELDS = (
    "learning_rate",
    "warmup_fraction",
    "warmup_steps",
    "decay_horizon_steps",
    "schedule",
    "adam_bias_correction",
)
"""The ``pretrain`` fields the schedule's and the optimiser's departures are read from (a
``study.json`` of an older version may hold others this one no longer reads)."""


def deviations(spec: Mapping[str, Any]) -> list[str]:
    """How one resolved spec departs from the paper and the original code (docs/design.md);
    the CPU-scale size, budget and caps are stated elsewhere in the header."""
    out = []
    overrides = spec.get("backbone", {}).get("overrides", {}) or {}
    backbone = preset(spec.get("backbone", {}).get("preset", "tiny")).with_overrides(**overrides)
    if backbone.layer_norm == "pre":
        out.append("pre-LN encoder (the paper: post-LN)")
    for field, name in (("dropout", "dropout"), ("attention_dropout", "attention dropout")):
        value = getattr(backbone, field)
        if value != PAPER_DROPOUT:
            out.append(f"{name} {value:g} in pre-training (the paper: {PAPER_DROPOUT:g})")
    pretrain = spec.get("pretrain", {})
    kinds = pretrain.get("prior_bias") or []
    if kinds:
        note = " (so the generator starts as a unigram sampler)" if "generator" in kinds else ""
        out.append(
            f"output biases of the {', '.join(kinds)} heads start at the data's priors{note} "
            "(the original code: zero)"
        )
    schedule = PretrainSpec.model_validate(
        {k: v for k, v in pretrain.items() if k in SCHEDULE_FIELDS}
    )
    out += [d for d in (schedule.schedule_departure(), schedule.optimizer_departure()) if d]
    out.append(INIT_DEPARTURE)
    tokenizer = (spec.get("data") or {}).get("tokenizer") or {}
    if (vocabulary := TokenizerSpec.model_validate(tokenizer).departure()) is not None:
        out.append(vocabulary)
    device = spec.get("device", "auto")
    for where, precision in (("pre-training", pretrain.get("precision", "auto")),) + tuple(
        ("fine-tuning", (block.get("recipe") or {}).get("precision", "auto"))
        for block in fine_tuning_blocks(evaluation_blocks(spec))
    ):
        if precision == "auto" and device == "cuda":
            precision = "bf16"  # what auto resolves to there (engine.precision)
        if precision in ("bf16", "fp16"):
            out.append(f"{where} matrix products in {precision} autocast (the original code: fp32)")
    labels: dict[str, list[str]] = {}  # a departure and the labels it holds for, said once
    for entry in spec.get("objectives", []):
        label = entry.get("label") or entry.get("name")
        for departure in params_departures(entry.get("name", ""), entry.get("params") or {}):
            labels.setdefault(departure, []).append(f"`{label}`")
    out += [f"{', '.join(held)}: {departure}" for departure, held in labels.items()]
    for finetune in evaluation_blocks(spec):
        paper, ours = FinetuneRecipe(), FinetuneRecipe.model_validate(finetune.get("recipe", {}))
        for task in finetune.get("tasks", []):
            if ours.epochs_for(task) != paper.epochs_for(task):
                out.append(
                    f"{task} fine-tuned for {epochs(ours.epochs_for(task))} "
                    f"(the paper: {paper.epochs_for(task)})"
                )
        for field in ("lr", "layer_decay", "batch_size", "warmup_fraction", "weight_decay"):
            mine, theirs = getattr(ours, field), getattr(paper, field)
            if mine != theirs:
                out.append(f"fine-tuning {field} {mine} (the paper: {theirs})")
    return out


def epochs(n: int) -> str:
    return f"{n} epoch" if n == 1 else f"{n} epochs"


def evaluation_blocks(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The spec's ``finetune`` and ``evaluation`` sections that are set (``StudySpec``'s)."""
    return [block for block in (spec.get("finetune"), spec.get("evaluation")) if block]


def fine_tuning_blocks(blocks: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The blocks a fine-tuning recipe applies to: those with a task that fine-tunes (or with
    no task list, GLUE's default). A block of probes only carries the default recipe unused."""
    fine_tuning = []
    for block in blocks:
        tasks = list(block.get("tasks") or [])
        if not tasks or len(probe_tasks(tasks)) < len(tasks):
            fine_tuning.append(block)
    return fine_tuning
