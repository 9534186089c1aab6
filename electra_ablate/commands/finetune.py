"""``ablate finetune``: scores of one kept model, outside a study, or exactly as its study got them.

The command parses its options, calls ``electra_ablate.study.evaluate_kept.evaluate_kept``
(which plans the jobs, runs them and summarises them; its docstring says how a study's spec is
found and repeated) and prints the result as a table or as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from electra_ablate.infra.tables import print_table

# the defaults electra_ablate.study.evaluate_kept applies, for the help text (the CLI imports
# no torch until a command runs; tests/study/test_evaluate_kept.py keeps the two in step)
DEFAULT_TASKS = "cola,sst2,mrpc,stsb,rte"
DEFAULT_SEEDS = "0"


def register(app: typer.Typer) -> None:
    @app.command("finetune", short_help="Fine-tune or evaluate a kept model on registered tasks.")
    def finetune_command(
        checkpoint: str = typer.Argument(
            ...,
            help="kept-model folder (kept.json + weights), Hugging Face ELECTRA/BERT folder "
            "(config.json + weights + vocab) or hub name such as "
            "google/electra-small-discriminator",
            show_default=False,
        ),
        spec: Path | None = typer.Option(
            None,
            "--spec",
            help="study spec whose evaluation to repeat [default: the study.json of the study "
            "folder holding CHECKPOINT, if any]",
        ),
        tasks: str | None = typer.Option(
            None,
            "--tasks",
            help=f"comma-separated tasks [default: the spec's, else {DEFAULT_TASKS}]",
        ),
        seeds: str | None = typer.Option(
            None,
            "--seeds",
            help=f"comma-separated seeds [default: the spec's, else {DEFAULT_SEEDS}]",
        ),
        glue: str | None = typer.Option(
            None,
            "--glue",
            help="GLUE folder or 'hub' [default: the spec's, else $ABLATE_DATA_DIR/glue]",
        ),
        cap: str | None = typer.Option(
            None, "--cap", help="max training examples: N for every task, or cola=N,sst2=M,..."
        ),
        epochs: int | None = typer.Option(
            None, "--epochs", min=1, help="epochs for every task (replaces RTE/STS-B's 10)"
        ),
        lr: float | None = typer.Option(None, "--lr", help="peak learning rate"),
        device: str | None = typer.Option(
            None, "--device", help="auto, cpu or cuda [default: the spec's, else auto]"
        ),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
        from_scratch: bool = typer.Option(
            False,
            "--from-scratch",
            help="re-initialise the encoder first: the no-pre-training baseline",
        ),
    ) -> None:
        """Fine-tune a kept model on GLUE tasks (or evaluate it on any registered task) and
        print the median over seeds; inside a study, exactly as the study did.

        CHECKPOINT may also be a Hugging Face ELECTRA or BERT checkpoint (a local folder, or a
        hub name when the hub is reachable): its encoder is imported and fine-tuned with the
        same recipe, a fresh head on the [CLS] vector (BERT's pooler is not used).
        """
        from electra_ablate.study.evaluate_kept import evaluate_kept

        report = evaluate_kept(
            checkpoint, spec, tasks, seeds, glue, cap, epochs, lr, device, from_scratch
        )
        if as_json:
            typer.echo(json.dumps(report, indent=2))
        else:
            _print_table(report)


def _print_table(report: dict[str, Any]) -> None:
    from rich.console import Console

    n_seeds = len(report["seeds"])
    rows = []
    for name, task in report["tasks"].items():
        if "metrics" not in task:
            rows.append((name, "skipped", "", "", task["skipped"]))
            continue
        ordered = sorted(task["metrics"], key=lambda m: m != task["headline"])
        for i, metric in enumerate(ordered):
            s = task["metrics"][metric]
            trained = f"{task['train_examples']} × {task['epochs']} ep" if "epochs" in task else ""
            rows.append(
                (
                    name if i == 0 else "",
                    metric + (" *" if metric == task["headline"] else ""),
                    f"{s['median']:.1f}",
                    f"{s['min']:.1f}–{s['max']:.1f}",
                    trained if i == 0 else "",
                )
            )
    console = Console()
    origin = report["source"] + (f" ({report['objective']})" if report["objective"] else "")
    scratch = ", re-initialised (--from-scratch)" if report["from_scratch"] else ""
    console.print(f"{origin}{scratch}", highlight=False)
    if report["spec"]:
        console.print(f"as in the study: {report['spec']}", highlight=False)
    headers = ("task", "metric", "median", f"min–max ({n_seeds} seeds)", "train examples")
    print_table(headers, rows, keys=(0, 1), console=console, right=(2, 3, 4))
    for score in report["scores"].values():
        if score["name"] is None:
            continue
        left_out = f", {', '.join(score['left_out'])} left out" if score["left_out"] else ""
        console.print(f"{score['name']} (mean of * medians{left_out}): {score['value']:.1f}")
