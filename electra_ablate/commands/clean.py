"""``ablate clean DIR --states``: free the disk a finished study no longer needs
(``electra_ablate.study.clean`` does it; the command parses options and says what it freed)."""

from __future__ import annotations

from pathlib import Path

import typer

from electra_ablate.infra.errors import InputError


def register(app: typer.Typer) -> None:
    @app.command("clean", short_help="Remove what a report and a resume do not need.")
    def clean_command(
        study_dir: Path = typer.Argument(..., metavar="DIR", help="study folder"),
        states: bool = typer.Option(
            False,
            "--states",
            help="remove the training states of finished runs (resuming needs them only "
            "while a run is unfinished)",
        ),
    ) -> None:
        """Remove what a report and a resume do not need. Results, kept encoders, logs and the
        states of unfinished or failed runs are kept."""
        from electra_ablate.study.clean import remove_finished_states
        from electra_ablate.study.survey import megabytes

        if not states:
            raise InputError("say what to remove: --states (training states of finished runs)")
        runs, freed = remove_finished_states(study_dir)
        typer.echo(
            f"removed the training states of {runs} finished run(s): freed {megabytes(freed)}"
        )
