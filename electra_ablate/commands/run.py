"""``ablate run SPEC``: the main job."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from electra_ablate.spec import load_spec


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run_command(
        spec_path: Path = typer.Argument(..., metavar="SPEC", help="study spec (YAML)"),
        out: Path | None = typer.Option(None, "--out", help="output dir (default runs/<name>)"),
        device: str | None = typer.Option(None, "--device", help="auto | cpu | cuda"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print the plan, train nothing"),
        workers: int = typer.Option(
            1,
            "--workers",
            min=1,
            help="processes sharing the runs (CPU: 2 on 2 cores is ~1.6x faster than 1)",
        ),
    ) -> None:
        """Pre-train every objective at equal FLOPs, fine-tune the checkpoints on GLUE, and
        write DIR/results.parquet. Re-running skips finished work and resumes the rest."""
        from electra_ablate.errors import SpecError
        from electra_ablate.study import Study, dry_run_rows, run_study

        if device not in (None, "auto", "cpu", "cuda"):
            raise SpecError(f"--device must be auto, cpu or cuda, not {device!r}")
        spec = load_spec(spec_path)
        out_dir = out or Path("runs") / spec.name
        if dry_run:
            study = Study(spec, spec_path, out_dir, device)
            rows = dry_run_rows(study, study.prepare())
            table = Table(
                "label",
                "objective",
                "seed",
                "steps (per stage)",
                "FLOPs (paper)",
                "FLOPs (standard)",
                "est. pre-train",
                "status",
                title=f"study {spec.name}: plan",
            )
            for r in rows:
                table.add_row(
                    r["label"],
                    r["objective"],
                    str(r["seed"]),
                    r["steps"],
                    f"{r['flops_paper']:.3g}",
                    f"{r['flops_standard']:.3g}",
                    f"{r['est_pretrain_min']:.1f} min",
                    r["status"],
                )
            Console().print(table)
            total = sum(r["est_pretrain_min"] for r in rows if r["status"] != "done")
            n_jobs = len(spec.finetune.tasks) * len(spec.finetune.seeds)
            typer.echo(
                f"pre-training still to do: about {total:.0f} min on this machine in one "
                f"process; then {n_jobs} fine-tunes per checkpoint"
            )
            return
        ok = run_study(spec, spec_path, out_dir, device, workers=workers)
        if not ok:
            raise typer.Exit(1)
