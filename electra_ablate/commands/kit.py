"""``ablate kit SPEC --out KIT``: a study's data and the wheels an offline GPU node lacks."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("kit", short_help="Make a relocatable folder for an offline GPU node.")
    def kit_command(
        spec_path: Path = typer.Argument(..., metavar="SPEC", help="study spec (YAML)"),
        out: Path = typer.Option(..., "--out", help="kit folder to write (new, or a kit)"),
        python_version: str = typer.Option(
            "3.12", "--python", help="the node's Python version, for the compiled wheels"
        ),
        platform: list[str] = typer.Option(
            ["manylinux_2_17_x86_64", "manylinux2014_x86_64"],
            "--platform",
            help="the node's wheel platform tags (repeatable)",
        ),
        compile_cache: Path | None = typer.Option(
            None,
            "--compile-cache",
            metavar="FILE",
            help="a compile-cache.tar.xz that one of your own GPU sessions returned, carried so "
            "that the node starts warm (it is compiled code: never take one from elsewhere)",
        ),
    ) -> None:
        """Make a relocatable folder for an offline GPU node: the spec's data bundle
        (compressed), the wheels the node lacks and this project's, the node script (doctor,
        CUDA tests, bench, the study's shards as result packs); print its size. The recipe on
        the node: docs/gpu-node.md."""
        from electra_ablate.scaleout.kit import NODE_LIMIT_BYTES, build_kit

        kit = build_kit(spec_path, out, python_version, tuple(platform), typer.echo, compile_cache)
        if carried := kit.manifest.get("compile_cache"):
            made = carried["manifest"]
            typer.echo(
                f"compile cache: {carried['bytes'] / 2**20:.1f} MiB, made with torch "
                f"{made['torch']} on {made['card']}"
            )
        mib = kit.bytes / 2**20
        fits = "under" if kit.bytes < NODE_LIMIT_BYTES else "OVER"
        typer.echo(
            f"kit {out}: {mib:.1f} MiB ({fits} the {NODE_LIMIT_BYTES / 2**20:.0f} MiB a node "
            f"takes); on the node: bash {out.name}/node.sh {out.name} OUT session (one stretch "
            "of GPU time), or [doctor test bench unit I/N] (docs/gpu-node.md)"
        )
