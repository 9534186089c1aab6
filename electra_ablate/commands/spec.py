"""``ablate validate SPEC``: everything ``run`` would reject later, checked now; and
``ablate schema``: the spec's JSON Schema, for editors."""

from __future__ import annotations

import json
from pathlib import Path

import typer

SET_HELP = "change the spec: PATH=VALUE, e.g. pretrain.learning_rate=5e-4 (repeatable)"


def register(app: typer.Typer) -> None:
    @app.command("validate", short_help="Check a study spec and report every error in it.")
    def validate_command(
        spec: Path = typer.Argument(..., help="study spec (YAML)"),
        set_: list[str] = typer.Option([], "--set", metavar="PATH=VALUE", help=SET_HELP),
        data_check: bool = typer.Option(
            True,
            "--data-check/--no-data-check",
            help="also check ${VARS}, corpus paths and task data (skip to validate a spec "
            "meant for another machine)",
        ),
    ) -> None:
        """Check a study spec completely; exit 0 if valid, 2 with the offending field."""
        from electra_ablate.spec import load_spec, parse_set_options

        study = load_spec(spec, parse_set_options(set_), check_data=data_check)
        variants = f", {len(study.variants)} variant(s)" if study.variants else ""
        names = [task for block in study.evaluation_blocks() for task in block.tasks]
        tasks = ", ".join(names) or "none (pre-training only)"
        typer.echo(
            f"{spec}: valid — study {study.name!r}, {len(study.objectives)} objective(s)"
            f"{variants}, preset {study.backbone.preset}, tasks {tasks}"
            + ("" if data_check else " (data not checked)")
        )

    @app.command("schema", short_help="Print the study spec's JSON Schema.")
    def schema_command(
        markdown: bool = typer.Option(
            False, "--markdown", help="print a table of every key with its default instead"
        ),
    ) -> None:
        """Print the study spec's JSON Schema (for YAML language servers; see docs/specs.md)."""
        from electra_ablate.spec import StudySpec, reference_rows

        if markdown:
            typer.echo("| key | type | default | meaning |\n|---|---|---|---|")
            for row in reference_rows():
                typer.echo("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
            return

        schema = StudySpec.model_json_schema(mode="validation")
        schema["properties"].pop("spec_dir", None)
        schema["title"] = "electra-ablate study spec"
        typer.echo(json.dumps(schema, indent=2))
