"""``ablate tasks``: every registered evaluation task (built-in and third-party), by family."""

from __future__ import annotations

import json
from typing import Any

import typer

from electra_ablate.infra.tables import print_table


def describe_tasks() -> list[dict[str, Any]]:
    """One entry per task: its family and what the family aggregates, what it needs from a kept
    encoder, its metrics (headline first), seeds, references and params."""
    from electra_ablate.commands.objectives import describe_params
    from electra_ablate.evaluation.task import available_families

    listing = []
    for family in available_families().values():
        for task in family.tasks():
            listing.append(
                {
                    "name": task.name,
                    "family": family.name,
                    "aggregate": family.aggregate if family.in_aggregate(task) else None,
                    "needs": task.needs,
                    "headline": task.headline,
                    "metrics": list(task.metrics),
                    "seeded": task.seeded,
                    "references": list(task.references),
                    "params": describe_params(task.Params) if task.Params is not None else [],
                    "description": task.description,
                }
            )
    return listing


def register(app: typer.Typer) -> None:
    @app.command("tasks", short_help="List the registered evaluation tasks with their params.")
    def tasks_command(
        as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    ) -> None:
        """List the registered evaluation tasks (built-in and third-party) by family, with
        each task's params and their defaults."""
        listing = describe_tasks()
        if as_json:
            typer.echo(json.dumps(listing, indent=2, default=str))
            return
        rows = []
        for item in listing:
            metrics = ", ".join(f"{m} *" if m == item["headline"] else m for m in item["metrics"])
            about = [
                f"{item['family']}; needs {item['needs']}"
                + ("" if item["seeded"] else ", unseeded"),
                f"metrics {metrics}",
                f"enters {item['aggregate'] or '—'}",
            ]
            if item["references"]:
                about.append(f"references {', '.join(item['references'])}")
            params = "\n".join(f"{p['name']}={p['default']}" for p in item["params"])
            rows.append((item["name"], "\n".join(about), params or "—"))
        headers = ("task", "family, needs, metrics (headline *)", "params (defaults)")
        print_table(headers, rows)
