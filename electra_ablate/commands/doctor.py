"""``ablate doctor``: the software, the devices, attention, compile and a timed micro run."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("doctor", short_help="Check this machine: torch, CUDA, devices and speed.")
    def doctor_command(
        steps: int = typer.Option(20, "--steps", min=1, help="timed micro pre-training steps"),
        compile_check: bool = typer.Option(
            True, "--compile/--no-compile", help="check that torch.compile builds and runs"
        ),
        json_out: Path | None = typer.Option(
            None, "--json", metavar="FILE", help="also write the findings as JSON"
        ),
    ) -> None:
        """What this machine offers a study: torch and CUDA, each device with its bf16/fp16
        support, the attention kernel for the GPU study's shapes, torch.compile, and a timed
        micro pre-training run per device. Problems are rows of the report; it exits 0."""
        from rich.console import Console
        from rich.table import Table

        from electra_ablate.infra.storage import atomic_write_text
        from electra_ablate.pretraining.doctor import diagnose

        report = diagnose(steps, compile_check)
        console = Console()
        software = Table("package", "version", title="software", show_edge=False)
        for name, version in report.software.items():
            style = "red" if version.startswith("MISSING") else None
            software.add_row(name, version, style=style)
        console.print(software)
        for device in report.devices:
            facts = ", ".join(f"{k} {v}" for k, v in device.facts.items())
            table = Table(
                "check", "", "result", title=f"{device.device}: {device.name}", show_edge=False
            )
            table.caption = facts
            for check in device.checks:
                mark = "[green]ok[/]" if check.ok else "[red]FAILED[/]"
                table.add_row(check.name, mark, check.detail)
            console.print(table)
        if json_out is not None:
            atomic_write_text(json_out, json.dumps(report.as_dict(), indent=2))
