"""``ablate objectives``: every registered objective (built-in and third-party) with its params."""

from __future__ import annotations

import json

import typer

from electra_ablate.infra.tables import print_table


def describe_params(params_model: type) -> list[dict[str, object]]:
    rows = []
    for name, field in params_model.model_fields.items():
        default = field.get_default(call_default_factory=True)
        rows.append({"name": name, "default": default, "description": field.description or ""})
    return rows


def register(app: typer.Typer) -> None:
    @app.command("objectives", short_help="List the registered objectives with their params.")
    def objectives_command(
        as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    ) -> None:
        """List the registered objectives (built-in and third-party) with their params."""
        from electra_ablate.pretraining.registry import available_objectives  # imports torch

        listing = [
            {"name": name, "description": cls.description, "params": describe_params(cls.Params)}
            for name, cls in available_objectives().items()
        ]
        if as_json:
            typer.echo(json.dumps(listing, indent=2, default=str))
            return
        rows = [
            (
                item["name"],
                item["description"],
                ", ".join(f"{p['name']}={p['default']}" for p in item["params"]),
            )
            for item in listing
        ]
        print_table(("objective", "description", "params (defaults)"), rows)
