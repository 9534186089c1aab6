"""``ablate tasks``: every registered evaluation task (built-in and third-party), by family."""

from __future__ import annotations

import json
from typing import Any

import typer


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
    @app.command("tasks")
    def tasks_command(
        as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    ) -> None:
        """List the registered evaluation tasks (built-in and third-party) by family."""
        from rich.console import Console
        from rich.table import Table

        listing = describe_tasks()
        if as_json:
            typer.echo(json.dumps(listing, indent=2, default=str))
            return
        table = Table("task", "family", "needs", "metrics (headline *)", "enters", "references")
        for item in listing:
            metrics = ", ".join(f"{m} *" if m == item["headline"] else m for m in item["metrics"])
            table.add_row(
                item["name"],
                item["family"],
                item["needs"] + ("" if item["seeded"] else ", unseeded"),
                metrics,
                item["aggregate"] or "—",
                ", ".join(item["references"]) or "—",
            )
        Console().print(table)
