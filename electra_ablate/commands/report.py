"""``ablate report [DIR] [--out OUTDIR]``: markdown tables and plots from a study's results."""

from __future__ import annotations

from pathlib import Path

import typer

from electra_ablate.errors import InputError
from electra_ablate.layout import RESULTS_FILE

RUNS_ROOT = Path("runs")


def latest_study_dir(root: Path = RUNS_ROOT) -> Path:
    """The study directory under ``root`` whose results were written last."""
    candidates = [d for d in root.glob("*") if (d / RESULTS_FILE).is_file()]
    if not candidates:
        raise InputError(
            f"no study results under {root}/: pass DIR, or run `ablate run SPEC` first"
        )
    return max(candidates, key=lambda d: ((d / RESULTS_FILE).stat().st_mtime, d.name))


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_command(
        run_dir: Path | None = typer.Argument(
            None, help="study output directory (default: the latest one in runs/)"
        ),
        out: Path | None = typer.Option(
            None, "--out", "-o", help="output folder (default: DIR/report)"
        ),
        notes: Path | None = typer.Option(
            None, "--notes", help="markdown file with your discussion, included as a section"
        ),
    ) -> None:
        """Write report.md with GLUE-vs-FLOPs plots, per-task tables and the paper's numbers."""
        from electra_ablate.report import write_report

        directory = run_dir if run_dir is not None else latest_study_dir()
        typer.echo(str(write_report(directory, out, notes)))
