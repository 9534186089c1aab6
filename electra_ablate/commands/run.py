"""``ablate run SPEC``: the main job."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer

from electra_ablate.commands.spec import SET_HELP
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.tables import print_table


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Launcher(str, Enum):
    slurm = "slurm"
    submitit_local = "submitit-local"


def register(app: typer.Typer) -> None:
    @app.command("run", short_help="Pre-train, fine-tune and score every objective of a spec.")
    def run_command(
        spec_path: Path = typer.Argument(..., metavar="SPEC", help="study spec (YAML)"),
        out: Path | None = typer.Option(None, "--out", help="output folder (default runs/<name>)"),
        device: Device | None = typer.Option(None, "--device", help="default: the spec's device"),
        set_: list[str] = typer.Option([], "--set", metavar="PATH=VALUE", help=SET_HELP),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="print the plan and a measured time estimate, train nothing"
        ),
        workers: int = typer.Option(
            1, "--workers", min=1, help="processes sharing the units (CPU: 2 on 2 cores is faster)"
        ),
        progress: bool | None = typer.Option(
            None, "--progress/--no-progress", help="default: a live line on a terminal"
        ),
        tensorboard: bool = typer.Option(
            False,
            "--tensorboard",
            help="add tensorboard to the spec's `tracking`: every metric in <unit>/tensorboard",
        ),
        reuse: bool = typer.Option(
            True,
            "--reuse/--no-reuse",
            help="copy identical finished runs and fine-tunes (same id) from study folders "
            "beside OUT instead of repeating them",
        ),
        keep_code_changes: bool = typer.Option(
            False,
            "--keep-code-changes",
            help="keep and use finished work whose code (objective, task, electra-ablate "
            "version) changed since it finished, instead of re-running it (for an edit known to "
            "change nothing); study.json and the report name each such unit",
        ),
        collect: bool = typer.Option(
            False,
            "--collect",
            help="train nothing: write the tables from the work finished so far (unfinished "
            "runs pending), e.g. to report a long study while it runs",
        ),
        wait: bool = typer.Option(
            False,
            "--wait",
            help="if another `ablate run` is writing OUT, wait for it to finish instead of "
            "stopping (exit 2)",
        ),
        shard: str | None = typer.Option(
            None,
            "--shard",
            metavar="I/N",
            help="only shard I of N (a split of the units balanced by their cost, the same on "
            "every machine); shards share OUT or write their own, merged by `ablate merge`",
        ),
        launcher: Launcher | None = typer.Option(
            None,
            "--launcher",
            help="run each unit as a cluster job through submitit (the slurm extra) instead "
            "of in this process",
        ),
        no_wait: bool = typer.Option(
            False,
            "--no-wait",
            help="with --launcher slurm: submit the jobs and return; --collect gathers results",
        ),
        partition: str | None = typer.Option(None, "--partition", help="SLURM partition"),
        account: str | None = typer.Option(None, "--account", help="SLURM account"),
        gpus_per_job: int | None = typer.Option(
            None, "--gpus-per-job", min=0, help="GPUs per pre-training job (>1: DDP)"
        ),
        time_min: int | None = typer.Option(
            None, "--time", metavar="MINUTES", min=1, help="time limit per job (then requeued)"
        ),
        sbatch: list[str] = typer.Option(
            [], "--sbatch", metavar="KEY=VALUE", help="an extra #SBATCH option (repeatable)"
        ),
        plan_json: Path | None = typer.Option(
            None,
            "--plan-json",
            metavar="FILE",
            help="with --dry-run: also write the plan and its measured time model as JSON",
        ),
        data_bundle: Path | None = typer.Option(
            None,
            "--data-bundle",
            help="read the data from a bundle made by `ablate data prepare --bundle` (as "
            "ABLATE_CACHE=DIR): no raw corpus or GLUE files needed",
        ),
    ) -> None:
        """Pre-train every objective at equal FLOPs, fine-tune the checkpoints on GLUE, and
        write OUT/results.parquet. Re-running skips finished work and resumes the rest."""
        from electra_ablate.scaleout.shards import parse_shard
        from electra_ablate.spec import load_spec, parse_set_options

        if data_bundle is not None:
            from electra_ablate.data.bundle import use_bundle

            use_bundle(data_bundle)
        overrides = parse_set_options(set_)
        if tensorboard:  # a tracker: not part of any run's identity
            overrides["tracking"] = with_tracker(spec_path, overrides, "tensorboard")
        part = parse_shard(shard) if shard is not None else None
        if launcher is None and (no_wait or partition or account or sbatch):
            raise InputError("--no-wait, --partition, --account and --sbatch need --launcher")
        if launcher is not None:
            from electra_ablate.scaleout.launch import check_options

            check_options(launcher.value, not no_wait, workers)
        spec = load_spec(spec_path, overrides, check_data=True)
        out_dir = out or Path("runs") / spec.name
        device_name = device.value if device else None
        if plan_json is not None and not dry_run:
            raise InputError("--plan-json goes with --dry-run")
        if dry_run:
            print_plan(
                spec,
                spec_path,
                out_dir,
                device_name,
                overrides,
                workers,
                progress,
                plan_json,
                keep_code_changes,
                reuse,
            )
            return
        from electra_ablate.scaleout.runner import run_study

        options = None
        if launcher is not None and not collect:
            from electra_ablate.scaleout.launch import LaunchOptions, sbatch_parameters

            given = {
                "partition": partition,
                "account": account,
                "gpus_per_job": gpus_per_job,
                "time_min": time_min,
                "sbatch": [*spec.launcher.sbatch, *sbatch] if sbatch else None,
            }
            resources = spec.launcher.model_copy(
                update={k: v for k, v in given.items() if v is not None}
            )
            sbatch_parameters(resources.sbatch)  # a malformed line: one line, before any job
            options = LaunchOptions(launcher.value, resources, wait=not no_wait)

        from electra_ablate.infra.locks import offering_wait

        with offering_wait():
            run_study(  # a failed unit raises, naming it (exit 1)
                spec,
                spec_path,
                out_dir,
                device_name,
                progress,
                workers=workers,
                overrides=overrides,
                reuse=reuse,
                collect=collect,
                wait=wait,
                shard=part,
                launcher=options,
                keep_code_changes=keep_code_changes,
            )


def with_tracker(spec_path: Path, overrides: dict, tracker: str) -> object:
    """The spec's ``tracking`` (as ``--set`` or the file gives it) with ``tracker`` added; a
    value that is no list is left for validation to name."""
    from electra_ablate.spec import read_yaml

    given = overrides.get("tracking", read_yaml(spec_path).get("tracking")) or []
    given = [given] if isinstance(given, str) else given
    if not isinstance(given, list) or tracker in given:
        return given
    return [*given, tracker]


def print_plan(
    spec,
    spec_path,
    out_dir,
    device,
    overrides,
    workers,
    progress=None,
    json_out=None,
    keep_code_changes=False,
    reuse=True,
) -> None:
    from electra_ablate.infra.progress import format_duration
    from electra_ablate.infra.storage import atomic_write_text
    from electra_ablate.study.estimate import estimate_plan, gpu_hours_line

    estimate = estimate_plan(
        spec, spec_path, out_dir, device, overrides, workers, progress, keep_code_changes, reuse
    )
    if json_out is not None:  # what a caller sizes work with (the GPU node's session)
        atomic_write_text(json_out, json.dumps(estimate.as_dict(), indent=2))
    # a label is its objective's name unless the spec gives one: then the column says nothing
    named = any(r["label"] != r["objective"] for r in estimate.rows if r["objective"] != "none")
    rows = [
        (
            r["label"],
            *([r["objective"]] if named else []),
            str(r["seed"]),
            r["steps"],
            f"{r['flops_paper']:.3g}\n{r['flops_standard']:.3g}",
            f"{format_duration(r['est_pretrain_min'] * 60)}\n"
            f"{format_duration(r['est_finetune_min'] * 60)}",
            r["status"],
        )
        for r in estimate.rows
    ]
    headers = ("label", *(["objective"] if named else []), "seed", "steps (per stage)")
    headers += ("FLOPs paper, standard", "time pre-train, fine-tune", "status")
    # The label and objective are names to type; the numbers must not lose digits either.
    keys = (0, 1, 4) if named else (0, 3)
    print_table(headers, rows, keys=keys, title=f"study {spec.name}: plan")
    for r in estimate.rows:  # a near run beside that is not this run: say why, once each
        if r["not_reused"]:
            typer.echo(f"{r['label']} (seed {r['seed']}) {r['not_reused']}")
    for note in estimate.notes:  # what the plan does that the spec does not show: a rounded
        typer.echo(note)  # budget, task_epochs, finished work whose code changed since
    low, high = (format_duration(x) for x in estimate.wall_range_s)
    typer.echo(
        f"still to do: about {format_duration(estimate.wall_s)} with --workers {workers} "
        f"(range {low} to {high}; {format_duration(estimate.serial_s)} of work in all), "
        f"measured at {estimate.load}; {estimate.how}"
    )
    if (line := gpu_hours_line(estimate)) is not None:  # on an accelerator: what it costs
        typer.echo(line)
