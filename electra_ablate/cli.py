"""The ``ablate`` command line. Each command group lives in ``electra_ablate/commands``; this
module wires them up and turns every user-facing error into one line and an exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from electra_ablate.errors import AblateError
from electra_ablate.objective import available_objectives
from electra_ablate.spec import load_spec

app = typer.Typer(
    name="ablate",
    help="Controlled ablations of text-encoder pre-training objectives at equal FLOPs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def describe_params(params_model: type) -> list[dict[str, object]]:
    rows = []
    for name, field in params_model.model_fields.items():
        default = field.get_default(call_default_factory=True)
        rows.append({"name": name, "default": default, "description": field.description or ""})
    return rows


@app.command("objectives")
def objectives_command(
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """List the registered objectives (built-in and third-party) with their params."""
    found = available_objectives()
    listing = [
        {"name": name, "description": cls.description, "params": describe_params(cls.Params)}
        for name, cls in found.items()
    ]
    if as_json:
        typer.echo(json.dumps(listing, indent=2, default=str))
        return
    table = Table("objective", "description", "params (defaults)")
    for item in listing:
        params = ", ".join(f"{p['name']}={p['default']}" for p in item["params"])
        table.add_row(item["name"], item["description"], params)
    Console().print(table)


@app.command("validate")
def validate_command(spec: Path = typer.Argument(..., help="study spec (YAML)")) -> None:
    """Check a study spec; exit 0 if valid, 2 with the offending field otherwise."""
    study = load_spec(spec)
    typer.echo(
        f"{spec}: valid — study {study.name!r}, {len(study.objectives)} objective(s), "
        f"preset {study.backbone.preset}, tasks {', '.join(study.finetune.tasks)}"
    )


def _register_commands() -> None:
    from electra_ablate.commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        module.register(app)


_register_commands()


def run_cli(args: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; user errors become one line on stderr."""
    try:
        app(args=args, standalone_mode=False)
    except AblateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        raise
    return 0


def main() -> None:
    sys.exit(run_cli())
