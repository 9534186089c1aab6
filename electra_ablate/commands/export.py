"""``ablate export``: a kept model as a Hugging Face ``transformers`` ELECTRA folder."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer


class ExportFormat(str, Enum):
    hf = "hf"


def register(app: typer.Typer) -> None:
    @app.command("export", short_help="Export a pre-trained encoder as a Hugging Face folder.")
    def export_command(
        checkpoint: Path = typer.Argument(..., help="kept-model directory (kept.json + weights)"),
        out: Path = typer.Option(..., "--out", help="folder to write (created or replaced)"),
        fmt: ExportFormat = typer.Option(ExportFormat.hf, "--format", help="output format"),
    ) -> None:
        """Export a pre-trained encoder as a Hugging Face folder: load it with
        ElectraForPreTraining.from_pretrained(OUT) and the like. A study's kept encoder that is
        missing or fails its checksum is rebuilt first."""
        from electra_ablate.checkpoints.export import export_hf
        from electra_ablate.study.integrity import repair_kept_folder

        repair_kept_folder(checkpoint)
        written = export_hf(checkpoint, out)
        architecture = json.loads((written / "config.json").read_text())["architectures"][0]
        typer.echo(f"exported {checkpoint} to {written} ({fmt.value}: {architecture})")
