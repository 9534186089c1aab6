"""``ablate pack STUDY_DIR``: a study's results in one archive, to carry to another machine."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("pack", short_help="Pack a study's results, without weights, for merging.")
    def pack_command(
        study_dir: Path = typer.Argument(..., metavar="STUDY_DIR", help="a study output folder"),
        out: Path | None = typer.Option(
            None, "--out", help="archive to write (default: STUDY_DIR.pack.tar.gz beside it)"
        ),
        tensorboard: bool = typer.Option(
            False, "--tensorboard", help="carry the TensorBoard event files too"
        ),
    ) -> None:
        """Write one .tar.gz of everything in a study folder but its weights and training
        states (tables, records, curves, study.json), checksummed, for `ablate merge`."""
        from electra_ablate.infra.errors import WriteFailed
        from electra_ablate.scaleout.packs import write_pack

        try:
            pack = write_pack(study_dir, out, tensorboard)
        except WriteFailed as refused:  # the storage's message names no option: pack has one
            raise WriteFailed(f"{refused} (or write the archive elsewhere: --out)") from refused
        left = ", ".join(
            f"{why} ({n} files, {size / 1e6:.1f} MB)"
            for why, (n, size) in sorted(pack.left.items())
        )
        typer.echo(
            f"packed {pack.contents} from {study_dir} into {pack.path} ({pack.files} files, "
            f"{pack.bytes / 1e3:.0f} kB)" + (f"; left behind: {left}" if left else "")
        )
