"""``ablate status [DIR]``: where a study stands, read without changing anything."""

from __future__ import annotations

from pathlib import Path

import typer

from electra_ablate.infra.errors import InputError

RUNS_ROOT = Path("runs")


def latest_study(root: Path = RUNS_ROOT) -> Path:
    """The study folder under ``root`` changed last."""
    from electra_ablate.study.survey import is_study

    candidates = [d for d in root.glob("*") if is_study(d)]
    if not candidates:
        raise InputError(f"no study folder under {root}/: pass DIR")
    return max(candidates, key=lambda d: (d.stat().st_mtime, d.name))


def register(app: typer.Typer) -> None:
    @app.command("status", short_help="Show a study's units: done, running, failed, pending.")
    def status_command(
        study_dir: Path | None = typer.Argument(
            None, metavar="[DIR]", help="study folder (default: the latest one in runs/)"
        ),
    ) -> None:
        """Units done, running (and who runs them), failed and pending; fine-tunes; kept
        encoders missing or failing their checksums; disk used. Changes nothing."""
        from electra_ablate.study.survey import is_study, megabytes, survey

        directory = study_dir if study_dir is not None else latest_study()
        if not is_study(directory):
            raise InputError(f"not a study folder: {directory}")
        found = survey(directory)
        lines = [f"study {found.name} ({directory})"]
        if found.holder is not None:
            who = f"`{found.holder.command}` " if found.holder.command else ""
            lines.append(f"running: {who}{found.holder.describe()}")
        else:
            lines.append("not running (no `ablate run` holds it)")
        states = ("done", "running", "unfinished", "failed", "pending")
        counts = ", ".join(f"{found.count(s)} {s}" for s in states if found.count(s))
        lines.append(f"units: {counts or 'none yet'}")
        for unit in found.units:
            seed = f" (seed {unit.seed})" if unit.seed is not None else ""
            shown = unit.state.upper() if unit.state == "failed" else unit.state
            note = f": {unit.message}" if unit.message else ""
            lines.append(f"  {shown:<10} {unit.label}{seed}{note}")
        ft = found.finetunes
        skipped = f", {ft['skipped']} skipped" if ft["skipped"] else ""
        references = (
            f"; {found.reference_scores} reference score(s)" if found.reference_scores else ""
        )
        lines.append(
            f"fine-tunes: {ft['done']} done{skipped}, {ft['failed']} failed, "
            f"{ft['pending']} pending{references}"
        )
        if found.kept_elsewhere:
            lines.append(
                f"kept encoders: {len(found.kept_elsewhere)} merged from result packs, their "
                "weights left on the machine that trained them (packs carry none)"
            )
        for path, problem in found.kept_problems:
            what = "missing" if problem == "missing" else f"corrupt ({problem})"
            lines.append(f"kept encoder {what}: {path}")
        for path, problem in found.damaged:
            lines.append(f"damaged record ({problem}): {path}")
        lines.append(
            f"disk: {megabytes(found.disk_bytes)}, of which training states of finished runs "
            f"{megabytes(found.state_bytes)} (`ablate clean {directory} --states` frees them)"
        )
        typer.echo("\n".join(lines))
