"""The pre-training and inference FLOPs of an objective on a preset, before anything is trained:
what ``ablate flops`` prints, to size a budget or to check a figure against the paper.

The objective is built on the meta device (shapes without memory, so ``large`` costs nothing),
its steps split between its stages as a study would split them (``engine.plan.plan_run``), and
each stage priced from its ``flops_plan`` (``pretraining.flops``).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from electra_ablate.backbone.config import PRESETS
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.infra.errors import InputError, did_you_mean
from electra_ablate.pretraining.engine.plan import plan_run
from electra_ablate.pretraining.flops import inference_flops, stage_step_flops, training_flops
from electra_ablate.pretraining.objective import Objective
from electra_ablate.pretraining.registry import build_on_meta, get_objective


def flops_report(
    model: str,
    objective_name: str,
    steps: int,
    batch: int,
    seq: int,
    generator_size: float | None,
    vocab: int,
    convention: str,
) -> dict[str, Any]:
    """Everything ``ablate flops`` prints, as a JSON-ready dict."""
    objective = _build(model, objective_name, generator_size, vocab, seq)
    budget = training_flops(objective, seq, batch, steps, convention)
    plan = plan_run(objective, budget, convention, batch, seq, [1.0])
    priced = stage_step_flops(objective, seq, batch, convention)
    stages = [
        {"name": stage.name, "fraction": stage.fraction, "steps": n, "per_step_flops": flops}
        for (stage, flops), n in zip(priced, plan.stage_steps, strict=True)
    ]
    train = sum(s["steps"] * s["per_step_flops"] for s in stages)
    objective.stage_index = len(priced) - 1  # the encoder kept at the end of training
    kept = objective.kept_model().encoder.cfg
    return {
        "model": model,
        "objective": objective_name,
        "params": objective.params.model_dump(),
        "convention": convention,
        "steps": plan.total_steps,
        "split_by": objective.stage_split(),
        "batch": batch,
        "seq": seq,
        "train_flops": train,
        "per_step_flops": train / plan.total_steps,
        "infer_flops": inference_flops(kept, seq, convention),
        "stages": stages,
    }


def _build(model: str, name: str, generator_size: float | None, vocab: int, seq: int) -> Objective:
    """The objective on the meta device: shapes without memory, so ``large`` costs nothing."""

    if model not in PRESETS:
        raise InputError(
            f"unknown model preset {model!r}{did_you_mean(model, PRESETS)}; "
            f"choose one of {', '.join(PRESETS)}"
        )
    base = PRESETS[model]
    backbone = base.with_overrides(vocab_size=vocab, max_seq_len=max(base.max_seq_len, seq))
    params: dict[str, Any] = {}
    if generator_size is not None:
        if "generator_size" not in get_objective(name).Params.model_fields:
            raise InputError(f"objective {name!r} has no generator_size parameter")
        params["generator_size"] = generator_size
    tokens = Vocab.uniform(backbone.vocab_size)  # token statistics do not change FLOPs
    try:
        return build_on_meta(name, backbone, params, tokens)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or name
        raise InputError(f"objective {name!r}: {field}: {first['msg']}") from None
