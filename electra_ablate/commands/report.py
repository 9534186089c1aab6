"""``ablate report [DIR] [--out OUTDIR]``: markdown tables and plots from a study's results.

DIR is a study folder, or a report folder that kept its study's tables (reports written since
they keep them): ``ablate report reports/objectives --out /tmp/x`` regenerates a committed
report, notes included, without the study folder."""

from __future__ import annotations

from pathlib import Path

import typer

from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import RESULTS_FILE

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
    @app.command("report", short_help="Write a study's report.md with its figures and tables.")
    def report_command(
        run_dir: Path | None = typer.Argument(
            None,
            help="study folder, or a report folder with its tables (default: the latest study "
            "in runs/)",
        ),
        out: Path | None = typer.Option(
            None,
            "--out",
            "-o",
            help="output folder (default: DIR/report; a report folder is rewritten in place)",
        ),
        notes: Path | None = typer.Option(
            None,
            "--notes",
            help="markdown file with your discussion, included as a section and kept as "
            "notes.md (default: a report folder's own notes.md)",
        ),
    ) -> None:
        """Write report.md with confidence intervals, the paper's claims, plots and the tables it
        read (so the report folder can be reported again or compared)."""
        from electra_ablate.infra.progress import progress_mode, status_line  # (torch)
        from electra_ablate.report import write_report

        directory = run_dir if run_dir is not None else latest_study_dir()
        doing = f"writing the report of {directory} (intervals, claims, figures)"
        with status_line(doing, progress_mode()):
            path = write_report(directory, out, notes)
        typer.echo(str(path))
