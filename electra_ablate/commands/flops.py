"""``ablate flops``: the pre-training and inference FLOPs of an objective on a preset, to size a
budget or to check a figure against the paper before anything is trained. The numbers come from
``electra_ablate.pretraining.flops_report``; the command parses options and prints them."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import typer

from electra_ablate.backbone.config import PRESETS


class Convention(str, Enum):
    paper = "paper"
    standard = "standard"


def register(app: typer.Typer) -> None:
    @app.command("flops", short_help="Print the training and inference FLOPs of one setup.")
    def flops_command(
        model: str = typer.Option(..., "--model", help=f"backbone preset: {', '.join(PRESETS)}"),
        objective: str = typer.Option(
            ..., "--objective", help="registered objective name, or package.module:Class"
        ),
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
        from electra_ablate.pretraining.flops_report import flops_report

        report = flops_report(
            model, objective, steps, batch, seq, generator_size, vocab, convention.value
        )
        if as_json:
            typer.echo(json.dumps(report, indent=2))
        else:
            from rich.console import Console

            Console().print(_table(report))


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
