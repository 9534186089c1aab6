"""``ablate finetune``: GLUE scores of one kept model, outside a study.

Fine-tunes the checkpoint on each task with each seed and prints, per task and metric, the
median over seeds (the headline, as the paper's median of 10) with the min-max spread, then
the GLUE score: the mean over tasks of the headline metric's median.

The checkpoint is one of our kept-model folders, or a Hugging Face ELECTRA/BERT model (a local
folder with ``config.json``, or a hub name ``org/name``) imported by ``electra_ablate.hf_import``,
so a published encoder can be scored with exactly the recipe our own encoders get.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from electra_ablate.data.tasks import glue_task
from electra_ablate.errors import InputError
from electra_ablate.finetune.recipe import FinetuneRecipe

if TYPE_CHECKING:
    from rich.progress import Progress

    from electra_ablate.data.glue import EncodedGlue
    from electra_ablate.kept import LoadedKept

DEFAULT_TASKS = "cola,sst2,mrpc,stsb,rte"
RUN_FIELDS = ("train_examples", "epochs", "train_seconds", "wall_seconds")


def register(app: typer.Typer) -> None:
    @app.command("finetune")
    def finetune_command(
        checkpoint: str = typer.Argument(
            ...,
            help="kept-model folder (kept.json + weights), Hugging Face ELECTRA/BERT folder "
            "(config.json + weights + vocab) or hub name such as "
            "google/electra-small-discriminator",
            show_default=False,
        ),
        tasks: str = typer.Option(DEFAULT_TASKS, "--tasks", help="comma-separated GLUE tasks"),
        seeds: str = typer.Option("0", "--seeds", help="comma-separated fine-tuning seeds"),
        glue: str | None = typer.Option(
            None, "--glue", help="GLUE folder or 'hub' [default: $ABLATE_DATA_DIR/glue]"
        ),
        cap: str | None = typer.Option(
            None, "--cap", help="max training examples: N for every task, or cola=N,sst2=M,..."
        ),
        epochs: int | None = typer.Option(
            None, "--epochs", min=1, help="epochs for every task (replaces RTE/STS-B's 10)"
        ),
        lr: float | None = typer.Option(None, "--lr", help="peak learning rate"),
        device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
        from_scratch: bool = typer.Option(
            False,
            "--from-scratch",
            help="re-initialise the encoder first: the no-pre-training baseline",
        ),
    ) -> None:
        """Fine-tune a kept model on GLUE tasks and print the median over seeds.

        CHECKPOINT may also be a Hugging Face ELECTRA or BERT checkpoint (a local folder, or a
        hub name when the hub is reachable): its encoder is imported and fine-tuned with the
        same recipe, a fresh head on the [CLS] vector (BERT's pooler is not used).
        """
        recipe = _recipe(cap, epochs, lr, _split(tasks))
        report = finetune_checkpoint(
            checkpoint,
            _known_tasks(_split(tasks)),
            _seeds(seeds),
            _glue_source(glue),
            recipe,
            _device(device),
            from_scratch,
        )
        if as_json:
            typer.echo(json.dumps(report, indent=2))
        else:
            _print_table(report)


def finetune_checkpoint(
    checkpoint: str | Path,
    tasks: list[str],
    seeds: list[int],
    glue: str,
    recipe: FinetuneRecipe,
    device: str,
    from_scratch: bool = False,
) -> dict[str, Any]:
    """Every task x seed fine-tune of one checkpoint, summarised per task and metric.

    ``from_scratch`` keeps the checkpoint's architecture and tokenizer but draws fresh weights
    (seeded), so the same command measures what pre-training bought over none.
    """
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from electra_ablate.data.glue import encode_glue, load_glue_task
    from electra_ablate.finetune import supported_max_len
    from electra_ablate.metrics import glue_score
    from electra_ablate.model import init_weights

    kept = load_checkpoint(str(checkpoint))
    if from_scratch:
        torch.manual_seed(0)
        std = kept.model.encoder.cfg.initializer_range
        kept.model.encoder.apply(partial(init_weights, std=std))
        kept.model.head.apply(partial(init_weights, std=std))
    if not (kept.tokenizer_dir / "tokenizer.json").is_file():
        raise InputError(f"checkpoint {checkpoint} has no tokenizer.json to encode GLUE with")
    max_len = supported_max_len(recipe, kept.model.encoder.cfg)
    err = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn())
    per_task: dict[str, Any] = {}
    with Progress(*columns, console=err, disable=not err.is_terminal, transient=True) as bar:
        for name in tasks:
            splits = load_glue_task(glue, name)
            encoded = encode_glue(
                name, splits, kept.tokenizer_dir, max_len=max_len, train_cap=recipe.cap_for(name)
            )
            runs = [_finetune_one(kept, encoded, recipe, seed, device, bar) for seed in seeds]
            per_task[name] = _summarise(name, runs, len(encoded.validation["label"]))
    headlines = {name: t["metrics"][t["headline"]]["median"] for name, t in per_task.items()}
    return {
        "checkpoint": str(checkpoint),
        "source": kept.meta.get("source", str(checkpoint)),
        "objective": kept.meta.get("objective"),
        "glue": glue,
        "seeds": seeds,
        "device": device,
        "from_scratch": from_scratch,
        "recipe": recipe.model_dump(),
        "tasks": per_task,
        "glue_score": glue_score(headlines) if set(headlines) - {"wnli"} else None,
    }


def load_checkpoint(checkpoint: str) -> LoadedKept:
    """Our kept folder, a Hugging Face folder (``config.json``, no ``kept.json``) or a hub name.

    A folder is never sent to the hub, and a path-like name whose first part exists locally is
    reported as a missing path, so a typo cannot turn into a confusing download failure.
    """
    from electra_ablate.hf_import import is_hf_folder, is_hub_name, load_hf
    from electra_ablate.kept import load_kept

    path = Path(checkpoint).expanduser()
    if path.is_dir():
        if is_hf_folder(path):
            return load_hf(path)
        if not (path / "kept.json").exists():
            raise InputError(
                f"not a checkpoint: {path} has neither kept.json (a kept model) nor config.json "
                "(a Hugging Face model)"
            )
        return load_kept(path)
    if path.exists():
        raise InputError(f"not a checkpoint: {path} is a file; give the folder that holds it")
    if is_hub_name(checkpoint):
        return load_hf(checkpoint)
    raise InputError(
        f"not a checkpoint: {path} does not exist (give a kept-model folder, a Hugging Face "
        "model folder, or a hub name such as google/electra-small-discriminator)"
    )


def _finetune_one(
    kept: LoadedKept,
    encoded: EncodedGlue,
    recipe: FinetuneRecipe,
    seed: int,
    device: str,
    bar: Progress,
) -> dict[str, float]:
    from electra_ablate.finetune import finetune_task

    job = bar.add_task(f"{encoded.task.name} seed {seed}", total=None)

    def advance(done: int, total: int) -> None:
        bar.update(job, completed=done, total=total)

    task, train, dev = encoded.task, encoded.train, encoded.validation
    result = finetune_task(kept, task, train, dev, recipe, seed, device, progress=advance)
    bar.remove_task(job)
    return result


def _summarise(task: str, runs: list[dict[str, float]], eval_examples: int) -> dict[str, Any]:
    from electra_ablate.metrics import headline_metric, summarise_seeds

    metrics = [key for key in runs[0] if key not in RUN_FIELDS]
    return {
        "headline": headline_metric(task),
        "train_examples": int(runs[0]["train_examples"]),
        "eval_examples": eval_examples,
        "epochs": int(runs[0]["epochs"]),
        "wall_seconds": sum(run["wall_seconds"] for run in runs),
        "metrics": {
            metric: {
                **summarise_seeds([r[metric] for r in runs]),
                "values": [r[metric] for r in runs],
            }
            for metric in metrics
        },
    }


def _print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    n_seeds = len(report["seeds"])
    table = Table("task", "metric")
    table.add_column("median", justify="right")
    table.add_column(f"min–max ({n_seeds} seeds)", justify="right")
    table.add_column("train examples", justify="right")
    for name, task in report["tasks"].items():
        ordered = sorted(task["metrics"], key=lambda m: m != task["headline"])
        for i, metric in enumerate(ordered):
            s = task["metrics"][metric]
            table.add_row(
                name if i == 0 else "",
                metric + (" *" if metric == task["headline"] else ""),
                f"{s['median']:.1f}",
                f"{s['min']:.1f}–{s['max']:.1f}",
                f"{task['train_examples']} × {task['epochs']} ep" if i == 0 else "",
            )
    console = Console()
    origin = report["source"] + (f" ({report['objective']})" if report["objective"] else "")
    scratch = ", re-initialised (--from-scratch)" if report["from_scratch"] else ""
    console.print(f"{origin}{scratch}", highlight=False)
    console.print(table)
    if report["glue_score"] is not None:
        console.print(f"GLUE score (mean of * medians, WNLI excluded): {report['glue_score']:.1f}")


def _split(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _known_tasks(names: list[str]) -> list[str]:
    if not names:
        raise InputError("--tasks is empty")
    return [glue_task(name).name for name in names]


def _seeds(raw: str) -> list[int]:
    try:
        seeds = [int(part) for part in _split(raw)]
    except ValueError:
        raise InputError(f"--seeds must be comma-separated integers, got {raw!r}") from None
    if not seeds:
        raise InputError("--seeds is empty")
    return seeds


def _glue_source(glue: str | None) -> str:
    if glue is not None:
        return glue
    data_dir = os.environ.get("ABLATE_DATA_DIR")
    if not data_dir:
        raise InputError("no GLUE data: pass --glue DIR (or --glue hub) or set ABLATE_DATA_DIR")
    return str(Path(data_dir) / "glue")


def _caps(raw: str, tasks: list[str]) -> dict[str, int]:
    """``--cap 1000`` caps every task; ``--cap sst2=2000,cola=1000`` caps the tasks named."""
    try:
        if "=" not in raw:
            return {task: int(raw) for task in tasks}
        pairs = (item.split("=", 1) for item in _split(raw))
        return {task.strip(): int(n) for task, n in pairs}
    except ValueError:
        raise InputError(f"--cap {raw!r}: give N or task=N,task=N with whole numbers") from None


def _recipe(
    cap: str | None, epochs: int | None, lr: float | None, tasks: list[str]
) -> FinetuneRecipe:
    overrides: dict[str, Any] = {}
    if cap is not None:
        overrides["train_caps"] = _caps(cap, tasks)
    if epochs is not None:
        overrides |= {"epochs": epochs, "task_epochs": {}}
    if lr is not None:
        overrides["lr"] = lr
    from pydantic import ValidationError

    try:
        return FinetuneRecipe(**overrides)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InputError(f"--{error['loc'][0]}: {error['msg']}") from None


def _device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise InputError(f"--device {device!r}: choose auto or cpu, or cuda when a GPU is visible")
    return device
