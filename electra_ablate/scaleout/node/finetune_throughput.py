"""Fine-tuning throughput: dynamic padding against padding every batch to 128 (docs/design.md)
or to a few fixed length buckets, and the compiled step (``finetune.recipe.compile``) against
the eager one.

A ``tiny`` encoder with random weights (speed does not depend on what the weights are) is
fine-tuned for one epoch on real GLUE training examples, tokenised by a WordPiece tokenizer
trained here on the same text, once per mode in the same process. Reports training examples per
second (evaluation excluded) per task and over all tasks, each mode's ratio to ``dynamic``, the
padding each mode used (``padding``) and the tokens a training example costs once padded
(``<mode>_tokens_per_example`` per task, beside its ``mean_length``). Modes (``--modes``):
``dynamic`` (eager, the default recipe), ``max_len`` (eager, padded to 128), ``buckets``
(eager, padded to ``LENGTH_BUCKETS``: what the buckets cost without graphs), ``compiled``
(``compile: true``, dynamic padding), ``cuda_graphs`` (``compile: reduce-overhead`` with
``padding: buckets``, one CUDA graph per bucket; CUDA only). A compiled mode's compilations are
paid by untimed warm-up fine-tunes (64 examples of each task) and reported apart
(``compile_seconds``), as a study's worker pays them once per process.

``--profile N`` then profiles N more training steps of each mode (one full batch of the first
task, after three untimed steps) under ``torch.profiler`` (``step_profile``): host time per
step, the operators with the most host time of their own, and on a GPU the kernels, launches,
CUDA-graph replays and syncs per step and the card's busy share, which say whether the host or
the card bounds a fine-tuning step.

    python bench/finetune_throughput.py --tasks sst2,mrpc --cap 512 [--device cuda] [--json]
    python bench/finetune_throughput.py --preset micro --modes dynamic,buckets --cap 256
    python bench/finetune_throughput.py --preset small --modes dynamic,compiled,cuda_graphs \
        --device cuda --tasks sst2,mrpc --cap 2048 --profile 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.data.tokenizer import save_tokenizer, train_wordpiece
from electra_ablate.evaluation.finetune.batching import (
    Examples,
    as_examples,
    collate,
    train_batches,
)
from electra_ablate.evaluation.finetune.loop import (
    finetune_task,
    make_optimizer,
    masked,
    new_classifier,
    padded_length,
    train_step,
)
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.data import GLUE_TASKS, EncodedGlue, encode_glue, load_glue_task
from electra_ablate.pretraining.engine.compiling import compiled
from electra_ablate.pretraining.objective import KeptModel
from electra_ablate.scaleout.node.step_profile import profile_steps

LENGTH_BUCKETS = (32, 64, 128)
"""The buckets of the bucketed modes (the recipe's ``max_len`` is 128; a smaller encoder's
``max_seq_len`` cuts the largest to its own)."""
BUCKETED: dict[str, object] = {"padding": "buckets", "length_buckets": LENGTH_BUCKETS}
MODES: dict[str, dict[str, object]] = {
    "dynamic": {},
    "max_len": {"padding": "max_len"},
    "buckets": BUCKETED,
    "compiled": {"compile": True},
    "cuda_graphs": {"compile": "reduce-overhead", **BUCKETED},
}
"""Each mode's recipe fields beyond one epoch of the default recipe."""
EVAL_EXAMPLES = 32
"""Evaluation is not timed; a few examples keep it from costing bench time. A short untimed
fine-tune first pays the one-off costs (lazy imports, allocator) that would land on whichever
mode ran first."""


def default_glue() -> Path:
    data = os.environ.get("ABLATE_DATA_DIR")
    root = Path(data) if data else Path.cwd().parent / "shared" / "data"  # beside a checkout
    return root / "glue"


def measure(
    glue: Path,
    tasks: list[str],
    cap: int,
    preset_name: str,
    device: str = "cpu",
    modes: tuple[str, ...] = ("dynamic", "max_len"),
    on_mode: Callable[[dict], None] | None = None,
    profile: int = 0,
) -> dict:
    """Every mode's examples/s on ``tasks`` (and with ``profile`` N, N profiled steps of each);
    ``on_mode`` gets the report so far after each mode (the bench's ``--json-out`` is rewritten
    then)."""
    splits = {name: load_glue_task(str(glue), name) for name in tasks}
    text = [
        line
        for name in tasks
        for field in GLUE_TASKS[name].text_fields
        for line in splits[name]["train"].column(field).to_pylist()
    ]
    with tempfile.TemporaryDirectory() as tokenizer_dir:
        tokenizer = train_wordpiece([tuple(text)], vocab_size=8000, lowercase=True)
        save_tokenizer(tokenizer, Path(tokenizer_dir))
        cfg = preset(preset_name).with_overrides(vocab_size=tokenizer.get_vocab_size())
        torch.manual_seed(0)
        kept_model = KeptModel(Encoder(cfg), "discriminator", TokenBinaryHead(cfg))
        kept = LoadedKept(kept_model, {}, Path(tokenizer_dir))
        encoded = {
            name: encode_glue(name, splits[name], Path(tokenizer_dir), cfg.max_seq_len)
            for name in tasks
        }

    recipes = {mode: FinetuneRecipe(epochs=1, task_epochs={}, **MODES[mode]) for mode in modes}
    trains = {name: as_examples(data.train).capped(cap) for name, data in encoded.items()}
    per_task = {
        name: {"examples": len(train), "mean_length": float(train.lengths.mean())}
        for name, train in trains.items()
    }
    for name, train in trains.items():
        for mode, recipe in recipes.items():
            per_task[name][f"{mode}_tokens_per_example"] = tokens_per_example(
                train, recipe, kept.model.encoder.cfg
            )
    compile_seconds: dict[str, float] = {}
    profiles: dict[str, dict] = {}
    done: list[str] = []
    report: dict = {}
    # One mode whole, then the next, so a bench stopped at its limit still has the modes it
    # finished (``on_mode``). Each mode first pays its one-off costs (imports, allocator,
    # compilations) on every task: padded and full batches, each length's kind.
    for mode, recipe in recipes.items():
        seconds = 0.0
        for data in encoded.values():
            short = {column: values[:64] for column, values in data.train.items()}
            seconds += finetune_task(kept, data.task, short, short, recipe, 0, device)[
                "wall_seconds"
            ]
        if recipe.compile:
            compile_seconds[mode] = seconds
        for name, data in encoded.items():
            dev = {column: values[:EVAL_EXAMPLES] for column, values in data.validation.items()}
            result = finetune_task(kept, data.task, trains[name], dev, recipe, 0, device)
            per_task[name][f"{mode}_seconds"] = result["train_seconds"]
            per_task[name][f"{mode}_examples_per_s"] = (
                result["train_examples"] / result["train_seconds"]
            )
        done.append(mode)
        report = summarize(
            per_task, recipes, done, compile_seconds, profiles, preset_name, device, cap
        )
        if on_mode is not None:
            on_mode(report)
        if profile:  # after the mode's rate is handed over: a stop while profiling keeps it
            first = next(iter(encoded.values()))
            profiles[mode] = profiled_steps(kept, first, recipe, profile, device)
            report = summarize(
                per_task, recipes, done, compile_seconds, profiles, preset_name, device, cap
            )
            if on_mode is not None:
                on_mode(report)
    return report


def tokens_per_example(train: Examples, recipe: FinetuneRecipe, cfg: BackboneConfig) -> float:
    """Tokens a training example costs once its batch is padded as ``recipe`` pads it
    (``loop.padded_length``), over one epoch's batches as the fine-tune forms them (seed 0)."""
    lengths = train.lengths
    batches = train_batches(
        lengths, recipe.batch_size, recipe.sort_chunk_batches, np.random.default_rng(0)
    )
    padded = sum(len(b) * padded_length(recipe, cfg, int(lengths[b].max())) for b in batches)
    return padded / len(lengths)


def profiled_steps(
    kept: LoadedKept, data: EncodedGlue, recipe: FinetuneRecipe, steps: int, device: str
) -> dict:
    """``steps`` training steps of ``recipe``'s mode on one full batch of the task, as its
    fine-tune takes them (``loop.train_step``), summed by ``step_profile``; three untimed steps
    first (the compilation, and the CUDA graph recorded on a replayed step)."""
    where = torch.device(device)
    torch.manual_seed(0)
    model = new_classifier(kept, data.task, recipe, where).train()
    forward = compiled(model, recipe.compile, dynamic=True) if recipe.compile else model
    optimizer = make_optimizer(model, recipe)
    train = as_examples(data.train)
    batches = train_batches(
        train.lengths, recipe.batch_size, recipe.sort_chunk_batches, np.random.default_rng(0)
    )
    indices = max(batches, key=len)  # a full batch, as the recipe forms them
    longest = int(train.lengths[indices].max())
    batch = collate(train, indices, padded_length(recipe, kept.model.encoder.cfg, longest))
    batch = masked(batch) if recipe.compile else batch
    regression = data.task.is_regression

    def step() -> torch.Tensor:
        return train_step(model, batch, optimizer, None, regression, recipe, where, forward)

    for _ in range(3):
        step()
    summary = profile_steps(step, steps, where)
    return summary | {"batch_rows": len(indices), "batch_tokens": int(batch["input_ids"].shape[1])}


def summarize(
    per_task: dict[str, dict],
    recipes: dict[str, FinetuneRecipe],
    modes: list[str],
    compile_seconds: dict[str, float],
    profiles: dict[str, dict],
    preset_name: str,
    device: str,
    cap: int,
) -> dict:
    """The report of the modes timed so far: examples/s per task and over all tasks, the padding
    each used, and the profiles of those profiled so far (``--profile``)."""
    examples = sum(row["examples"] for row in per_task.values())
    rates = {
        mode: examples / sum(row[f"{mode}_seconds"] for row in per_task.values()) for mode in modes
    }
    report = {
        "preset": preset_name,
        "device": device,
        "threads": torch.get_num_threads(),
        "cap": cap,
        "modes": list(modes),
        "padding": {mode: recipes[mode].padding for mode in modes},
        **(
            {"length_buckets": list(LENGTH_BUCKETS)}
            if any(recipes[mode].padding == "buckets" for mode in modes)
            else {}
        ),
        "tasks": per_task,
        "compile_seconds": dict(compile_seconds),
        **({"profiles": dict(profiles)} if profiles else {}),
        **{f"{mode}_examples_per_s": rate for mode, rate in rates.items()},
    }
    if "dynamic" in rates:
        report["ratio"] = {mode: rate / rates["dynamic"] for mode, rate in rates.items()}
    return report


def print_table(report: dict) -> None:
    where = f"{report['device']}, {report['threads']} threads"
    table = Table(title=f"fine-tuning examples/s, {report['preset']}, {where}")
    modes = report["modes"]
    for column in ("task", "train examples", "mean tokens", *modes):
        table.add_column(column, justify="left" if column == "task" else "right")
    for name, row in report["tasks"].items():
        rates = [f"{row[f'{mode}_examples_per_s']:.0f}" for mode in modes]
        table.add_row(name, str(row["examples"]), f"{row['mean_length']:.1f}", *rates)
    table.add_row("all", "", "", *(f"{report[f'{mode}_examples_per_s']:.0f}" for mode in modes))
    if "ratio" in report:
        table.add_row("/ dynamic", "", "", *(f"{report['ratio'][mode]:.2f}x" for mode in modes))
    table.add_row("padding", "", "", *(report["padding"][mode] for mode in modes))
    for name, row in report["tasks"].items():
        padded = [f"{row[f'{mode}_tokens_per_example']:.1f}" for mode in modes]
        table.add_row(f"{name} tokens/example", "", "", *padded)
    Console().print(table)
    for mode, summary in report.get("profiles", {}).items():
        ops = ", ".join(
            f"{op['op'][:48]} {100 * op['self_ms'] / summary['host_ms']:.0f}%"
            for op in summary["top_ops"][:4]
        )
        device_line = (
            f", card busy {summary['device_busy_ms']:.1f} ms, {summary['launches']:.0f} launches,"
            f" {summary['graph_launches']:.0f} graph replays, {summary['syncs']:.0f} syncs"
            if report["device"].startswith("cuda")
            else ""
        )
        print(
            f"{mode} profile ({summary['steps']} steps of {summary['batch_rows']} rows x "
            f"{summary['batch_tokens']} tokens): {summary['host_ms']:.1f} ms a step"
            f"{device_line}; most host time: {ops}"
        )
    for mode, seconds in report["compile_seconds"].items():
        print(
            f"{mode}: the warm-up fine-tunes (64 examples a task), compilation included: "
            f"{seconds:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue", type=Path, default=default_glue(), help="GLUE parquet folder")
    parser.add_argument("--tasks", default="sst2,mrpc", help="comma-separated GLUE tasks")
    parser.add_argument("--cap", type=int, default=512, help="training examples per task")
    parser.add_argument("--preset", default="tiny", help="backbone preset")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--modes", default="dynamic,max_len", help=f"of {', '.join(MODES)}")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="profile N more steps of each mode"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--json-out", type=Path, help="also write the JSON object here")
    args = parser.parse_args()
    modes = tuple(args.modes.split(","))
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"--modes: unknown {', '.join(unknown)}; choose from {', '.join(MODES)}")
    if "cuda_graphs" in modes and not args.device.startswith("cuda"):
        parser.error("--modes cuda_graphs replays CUDA graphs: it needs --device cuda")
    if not args.glue.is_dir():
        parser.error(f"no GLUE folder at {args.glue}: pass --glue or set ABLATE_DATA_DIR")
    if args.profile < 0:
        parser.error(f"--profile {args.profile}: a number of steps, 0 or more")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: CUDA is not available")
    if args.threads:
        torch.set_num_threads(args.threads)

    def write(report: dict) -> None:  # whole, then renamed: a bench stopped mid-write keeps
        if args.json_out:  # the previous mode's report
            tmp = args.json_out.with_name(args.json_out.name + ".tmp")
            tmp.write_text(json.dumps(report, indent=2))
            os.replace(tmp, args.json_out)

    tasks = args.tasks.split(",")
    report = measure(
        args.glue, tasks, args.cap, args.preset, args.device, modes, write, args.profile
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)


if __name__ == "__main__":
    main()
