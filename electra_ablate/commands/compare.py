"""``ablate compare STUDY_A STUDY_B [...] [--out DIR]``: the same objectives across studies in one
table and one score-vs-FLOPs figure per task family, study folders or report folders alike, each
family's aggregate over the tasks every study evaluated; a folder given twice is refused."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("compare", short_help="Compare studies in one table and one figure, with CIs.")
    def compare_command(
        studies: list[Path] = typer.Argument(
            ..., metavar="STUDY...", help="two or more study folders or report folders"
        ),
        out: Path | None = typer.Option(
            None, "--out", "-o", help="output folder (default: compare/<A>_vs_<B>)"
        ),
    ) -> None:
        """One table and one score-vs-FLOPs figure (log axis) of the objectives the studies
        share, with 95% CIs: where a crossover between budgets or backbones shows. Each
        family's aggregate is over the tasks every study evaluated, as the page says."""
        from electra_ablate.infra.progress import progress_mode, status_line  # (torch)
        from electra_ablate.report.compare import write_comparison

        with status_line(f"comparing {len(studies)} studies (intervals, figure)", progress_mode()):
            path = write_comparison(studies, out)
        typer.echo(str(path))
