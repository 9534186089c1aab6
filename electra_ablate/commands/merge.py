"""``ablate merge PACK_OR_DIR... --into STUDY_DIR``: packs and folders of one study, combined."""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path

import typer

from electra_ablate.scaleout.packs import PACK_LIMITS


def register(app: typer.Typer) -> None:
    @app.command("merge", short_help="Combine packs and folders of one study into one folder.")
    def merge_command(
        sources: list[Path] = typer.Argument(
            ..., metavar="PACK_OR_DIR...", help="packs (`ablate pack`) or study folders"
        ),
        into: Path = typer.Option(
            ..., "--into", metavar="STUDY_DIR", help="the study folder to merge into (new or not)"
        ),
        wait: bool = typer.Option(
            False,
            "--wait",
            help="if another merge or `ablate run` is writing STUDY_DIR, wait for it to finish "
            "instead of stopping (exit 2)",
        ),
        max_member_mib: int = typer.Option(
            PACK_LIMITS.member_bytes >> 20,
            "--max-member-mib",
            min=1,
            metavar="MIB",
            help="the most one file of a pack may unpack to; a pack with a larger one is refused",
        ),
        max_total_mib: int = typer.Option(
            PACK_LIMITS.total_bytes >> 20,
            "--max-total-mib",
            min=1,
            metavar="MIB",
            help="the most all files of one pack may unpack to together",
        ),
    ) -> None:
        """Combine packs and folders of one study into STUDY_DIR and rebuild its tables, so
        `ablate report STUDY_DIR` works at once. Identical units are kept once; a conflicting
        unit, a damaged pack or another study's pack is refused (exit 2) and nothing is
        written; finished work in STUDY_DIR is never replaced. Weights and training states
        never travel: a pack holding any file `ablate pack` does not write is refused, as is
        one over the size limits. A merge stopped part way (a full disk, Ctrl-C) is completed
        by the same command."""
        from electra_ablate.infra.locks import offering_wait
        from electra_ablate.scaleout.merge import merge_study

        command = shlex.join(["ablate", *sys.argv[1:]])
        limits = replace(
            PACK_LIMITS, member_bytes=max_member_mib << 20, total_bytes=max_total_mib << 20
        )
        with offering_wait():
            merge_study(sources, into, log=typer.echo, command=command, wait=wait, limits=limits)
