"""``ablate clean DIR --states``: free the disk a finished study no longer needs."""

from __future__ import annotations

import shutil
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
        from electra_ablate.infra.layout import StudyLayout
        from electra_ablate.infra.locks import lock_study
        from electra_ablate.study.survey import folder_bytes, is_study, megabytes, read_json

        if not states:
            raise InputError("say what to remove: --states (training states of finished runs)")
        if not is_study(study_dir):
            raise InputError(f"not a study folder: {study_dir}")
        layout = StudyLayout(study_dir)
        lock = lock_study(layout.lock, layout.root)  # not while an `ablate run` writes it
        try:
            freed, runs = 0, 0
            for run in layout.run_folders():
                done, _ = read_json(run.done)
                if not isinstance(done, dict) or not run.states.is_dir():
                    continue  # unfinished, failed or damaged: its states resume it
                freed += folder_bytes(run.states)
                shutil.rmtree(run.states)
                runs += 1
        finally:
            lock.release()
        typer.echo(
            f"removed the training states of {runs} finished run(s): freed {megabytes(freed)}"
        )
