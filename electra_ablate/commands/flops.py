"""``ablate flops``: the pre-training and inference FLOPs of an objective on a preset, to size a
budget or to check a figure against the paper before anything is trained."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import typer

from electra_ablate.backbone.config import PRESETS
from electra_ablate.infra.errors import InputError, did_you_mean


class Convention(str, Enum):
    paper = "paper"
    standard = "standard"


def register(app: typer.Typer) -> None:
    @app.command("flops", short_help="Print the training and inference FLOPs of one setup.")
    def flops_command(
        model: str = typer.Option(..., "--model", help=f"backbone preset: {', '.join(PRESETS)}"),
        objective: str = typer.Option(..., "--objective", help="registered objective name"),
        steps: int = typer.Option(..., "--steps", min=1, help="training steps"),
        batch: int = typer.Option(..., "--batch", min=1, help="sequences per step"),
        seq: int = typer.Option(..., "--seq", min=1, help="tokens per sequence"),
        generator_size: float | None = typer.Option(
            None, "--generator-size", help="generator width / main width (objectives with one)"
        ),
        vocab: int = typer.Option(30522, "--vocab", min=6, help="vocabulary size"),
        convention: Convention = typer.Option(Convention.paper, "--convention"),
        as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    ) -> None:
        """Training FLOPs for STEPS x BATCH sequences and inference FLOPs per example.

        Staged objectives split the steps between their stages as a study would (by steps or by
        FLOPs, as the objective declares). Inference FLOPs are the kept encoder's forward pass
        without a head (the paper's figure).
        """
        report = flops_report(
            model, objective, steps, batch, seq, generator_size, vocab, convention.value
        )
        if as_json:
            typer.echo(json.dumps(report, indent=2))
        else:
            from rich.console import Console

            Console().print(_table(report))


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
    from electra_ablate.pretraining.engine.plan import plan_run
    from electra_ablate.pretraining.flops import inference_flops, stage_step_flops, training_flops

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


def _build(model: str, name: str, generator_size: float | None, vocab: int, seq: int):
    """The objective on the meta device: shapes without memory, so ``large`` costs nothing."""
    import torch
    from pydantic import ValidationError

    from electra_ablate.backbone.tokens import Vocab
    from electra_ablate.pretraining.objective import build_objective, get_objective

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
        with torch.device("meta"):
            return build_objective(name, backbone, params, tokens)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or name
        raise InputError(f"objective {name!r}: {field}: {first['msg']}") from None


def _table(report: dict[str, Any]):
    from rich.table import Table

    table = Table(
        "quantity",
        "FLOPs",
        title=f"{report['objective']} on {report['model']} ({report['convention']} convention)",
        caption=f"{report['steps']} steps x {report['batch']} x {report['seq']} tokens",
    )
    table.add_row("train", f"{report['train_flops']:.3e}")
    table.add_row("per step", f"{report['per_step_flops']:.3e}")
    if len(report["stages"]) > 1:
        for stage in report["stages"]:
            table.add_row(
                f"  per step, {stage['name']} ({stage['steps']} steps)",
                f"{stage['per_step_flops']:.3e}",
            )
    table.add_row("inference per example", f"{report['infer_flops']:.3e}")
    return table
