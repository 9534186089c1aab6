"""Host operations per fine-tuning step, and what they make a kept checkpoint's GLUE cost.

On a GPU an eager step is bound by the host: every aten operation is a Python-to-C++ dispatch
(and, for a kernel, a launch) of a few microseconds, while ELECTRA-Small's matrices at batch 32
keep an H100 busy for far less. So the number that decides fine-tuning's speed there is how
many operations a step dispatches. This script counts them with a ``TorchDispatchMode`` (every
op that reaches the dispatcher, views included; ``metadata`` ops launch no kernel) for:

- one optimizer step of a fine-tune as its loop takes it: building the batch
  (``evaluation.finetune.batching.collate``) and ``evaluation.finetune.loop.train_step``
  (forward under the recipe's autocast, backward, clipping, fused AdamW);
- one evaluation batch (``predict``: the batch built, the forward);
- ELECTRA's pre-training step as ``bench/pretrain_throughput.py`` times it, so that a measured
  pre-training rate on a card converts into host microseconds per operation.

It then times one GLUE-5 pass of a ``small`` checkpoint by a stated model: per optimizer step,
``max(host, device)`` on a GPU (launches run ahead of the kernels), with
``host = ops x host cost per op`` and ``device = step FLOPs / (peak x MFU)``; steps from the
recipe (batch 32, the paper's epochs) and the full training sets' sizes in ``--glue``.
Step FLOPs assume every batch padded to 128 tokens, an upper bound (batches are padded only to
their longest example). The host cost per op defaults to what the committed H200 stretch
measured (docs/performance.md#history, the first stretch: ours eager, 16.04 ELECTRA-Small
pre-training steps/s, host bound at 2.4% MFU) divided by the pre-training step's op count
here; ``--host-us-per-op`` replaces it with a figure measured on the card. The counts need no
GPU: the ops a step dispatches are the same on any device, apart from the autocast casts, which
is why the counts are given per precision.

    python bench/op_count.py --preset small --batch 32 [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.backbone.model import Encoder
from electra_ablate.evaluation.finetune.batching import Examples, collate
from electra_ablate.evaluation.finetune.classifier import GlueClassifier
from electra_ablate.evaluation.finetune.loop import make_optimizer, predict, train_step
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.data import load_glue_task
from electra_ablate.pretraining.flops import encoder_forward_flops
from electra_ablate.scaleout.node.finetune_throughput import default_glue
from electra_ablate.scaleout.node.measure import counted
from electra_ablate.scaleout.node.pretrain_throughput import ours as electra_pretraining_step

GLUE5 = ("cola", "sst2", "mrpc", "stsb", "rte")
H200_EAGER_PRETRAIN_STEPS_PER_S = 16.04
"""ELECTRA-Small pre-training, batch 128, bf16, eager: the first GPU stretch's bench phase
(reports/gpu_sessions/2026-11-26-a/bench.json, steps_per_s.ours), measured at 2.4% MFU: host
bound."""


def finetune_counts(
    cfg: BackboneConfig, batch_size: int, length: int, precision: str, device: torch.device
) -> dict[str, Any]:
    """Ops of one fine-tuning optimizer step and of one evaluation batch, with the recipe's
    defaults but ``precision``, on a two-class task."""
    recipe = FinetuneRecipe(precision=precision)
    torch.manual_seed(0)
    model = GlueClassifier(Encoder(cfg), 2, recipe.head_dropout).to(device).train()
    optimizer = make_optimizer(model, recipe)
    g = torch.Generator().manual_seed(0)
    rows = torch.randint(
        5, cfg.vocab_size, (max(batch_size, recipe.eval_batch_size), length), generator=g
    )
    examples = Examples(
        rows.tolist(), [[0] * length] * len(rows), (torch.arange(len(rows)) % 2).numpy()
    )
    rows_of_batch = np.arange(batch_size)
    batch = collate(examples, rows_of_batch)
    collating = counted(lambda: collate(examples, rows_of_batch))
    step = counted(lambda: train_step(model, batch, optimizer, None, False, recipe, device))
    evaluation = examples.subset(range(recipe.eval_batch_size))
    forward = counted(
        lambda: predict(model, evaluation, recipe.eval_batch_size, device, precision=precision)
    )
    collate_ops, step_ops = collating.summary(), step.summary()
    return {
        "collate": collate_ops,
        "train_step": step_ops,
        "optimizer_step": collate_ops["ops"] + step_ops["ops"],
        "eval_batch": forward.summary(),
    }


def pretraining_counts(cfg: BackboneConfig, batch_size: int, device: torch.device) -> dict:
    """Ops of the ELECTRA pre-training step the H200 rate was measured on: under bf16 autocast,
    as ``auto`` runs it on CUDA (on the CPU ``auto`` means fp32, so it is asked for here; the
    CPU's autocast casts the same matrix products)."""
    contender = electra_pretraining_step(cfg, batch_size, device)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        return counted(contender.step).summary()


def glue_steps(glue: Path, recipe: FinetuneRecipe) -> dict[str, int]:
    """Optimizer steps of one seed's GLUE-5 on full training sets, per task."""
    return {
        task: recipe.epochs_for(task)
        * math.ceil(load_glue_task(str(glue), task)["train"].num_rows / recipe.batch_size)
        for task in GLUE5
    }


def time_model(
    ops_per_step: float,
    host_us_per_op: float,
    step_flops: float,
    peak_flops: float,
    mfu: float,
    steps: int,
    seeds: int,
    workers: int,
) -> dict[str, float]:
    """Seconds of ``seeds`` GLUE-5 passes on a GPU by the model in the module docstring;
    ``workers`` fine-tunes side by side share the device (its FLOPs add up) but each has its own
    host core."""
    host = ops_per_step * host_us_per_op * 1e-6
    device = step_flops / (peak_flops * mfu)
    per_step = max(host / workers, device)
    return {
        "host_s_per_step": host,
        "device_s_per_step": device,
        "seconds": per_step * steps * seeds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch", type=int, default=32, help="fine-tuning batch (the recipe's)")
    parser.add_argument(
        "--length", type=int, default=64, help="tokens per row of the counted batch"
    )
    parser.add_argument("--precisions", default="fp32,bf16", help="autocast settings to count")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--glue", type=Path, default=default_glue(), help="GLUE parquet folder")
    parser.add_argument("--host-us-per-op", type=float, default=None)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="H100 SXM dense bf16")
    parser.add_argument("--mfu", type=float, default=0.3, help="assumed for the device term")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", default="1,6", help="fine-tunes side by side on one card")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    cfg = preset(args.preset)

    counts = {
        precision: finetune_counts(cfg, args.batch, args.length, precision, device)
        for precision in args.precisions.split(",")
    }
    pretraining = pretraining_counts(cfg, 128, device)
    host_us = args.host_us_per_op or 1e6 / (H200_EAGER_PRETRAIN_STEPS_PER_S * pretraining["ops"])
    for precision, c in counts.items():
        step, forward = c["train_step"], c["eval_batch"]
        print(
            f"{args.preset} {precision}: per optimizer step {c['optimizer_step']:.0f} ops = "
            f"collate {c['collate']['ops']:.0f} + train_step {step['ops']:.0f} "
            f"({step['kernel_ops']:.0f} kernel, {step['metadata_ops']:.0f} metadata); "
            f"an evaluation batch (128 rows) {forward['ops']:.0f} ops"
        )
    print(f"ELECTRA pre-training step (batch 128, bf16 autocast): {pretraining['ops']:.0f} ops")
    source = "given" if args.host_us_per_op else "from the H200 bench"
    print(f"host cost per op: {host_us:.1f} us ({source})")

    recipe = FinetuneRecipe()
    steps = glue_steps(args.glue, recipe)
    total_steps = sum(steps.values())
    # forward + backward: three forwards' FLOPs at 128 tokens per row
    step_flops = 3 * args.batch * encoder_forward_flops(cfg, 128, "standard")
    bf16 = counts.get("bf16", next(iter(counts.values())))["optimizer_step"]
    models = {}
    for workers in (int(w) for w in args.workers.split(",")):
        models[workers] = time_model(
            bf16,
            host_us,
            step_flops,
            args.peak_tflops * 1e12,
            args.mfu,
            total_steps,
            args.seeds,
            workers,
        )
        m = models[workers]
        print(
            f"GLUE-5 full sets x {args.seeds} seeds ({total_steps} steps/seed), {workers} "
            f"worker(s): {m['seconds']:.0f} s (host {m['host_s_per_step'] * 1e3:.1f} ms/step, "
            f"device {m['device_s_per_step'] * 1e3:.2f} ms/step at {args.mfu:.0%} MFU)"
        )
    report = {
        "preset": args.preset,
        "batch": args.batch,
        "length": args.length,
        "torch": torch.__version__,
        "counts": counts,
        "pretraining_step": pretraining,
        "host_us_per_op": host_us,
        "glue_steps_per_seed": steps,
        "step_flops_upper_bound": step_flops,
        "time_model": {str(w): m for w, m in models.items()},
    }
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
