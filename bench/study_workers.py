"""Aggregate pre-training tokens/s of a study: one process on all cores vs ``ablate run --workers``.

A study's runs are independent, so the question is only how to spend the cores: one process
with every thread (what ``ablate run`` does by default), or N single-purpose worker processes
with ``threads / N`` threads each (``--workers N``). Small encoders do not keep several threads
busy (their matmuls are too small to split well), so workers can win. Each side here runs the
engine's ELECTRA step (forward, backward, clipping, AdamW) of the given preset in child
processes; the workers side runs its N children at the same time and adds their rates.

    python bench/study_workers.py --preset tiny --batch 32 --workers 2 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine import make_optimizer
from electra_ablate.pretraining.registry import build_objective
from electra_ablate.scaleout.node.measure import packed_batch


def child(args: argparse.Namespace) -> None:
    """Time ``--steps`` engine steps after ``--warmup`` and print tokens/s as one JSON line."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = preset(args.preset).with_overrides(vocab_size=args.vocab)
    objective = build_objective("electra", cfg, {}, Vocab.uniform(cfg.vocab_size)).train()
    spec = PretrainSpec()
    optimizer = make_optimizer(objective, spec)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    batch = packed_batch(args.batch, cfg.max_seq_len, cfg.vocab_size, torch.device("cpu"), 0)
    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = objective(batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, spec.grad_clip)
        optimizer.step()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    tokens = args.batch * cfg.max_seq_len
    print(json.dumps({"tokens_per_s": tokens / statistics.median(times)}))


def launch(args: argparse.Namespace, threads: int, copies: int) -> float:
    """Start ``copies`` children with ``threads`` threads each at once; their summed tokens/s."""
    command = [
        sys.executable,
        __file__,
        "--child",
        *("--preset", args.preset, "--batch", str(args.batch), "--vocab", str(args.vocab)),
        *("--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(threads)),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    procs = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(copies)
    ]
    total = 0.0
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"benchmark child failed: {err.strip().splitlines()[-1:]}")
        total += json.loads(out.strip().splitlines()[-1])["tokens_per_s"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.child:
        return child(args)
    one = launch(args, args.threads, 1)
    many = launch(args, max(1, args.threads // args.workers), args.workers)
    result = {
        "preset": args.preset,
        "batch": args.batch,
        "threads": args.threads,
        "workers": args.workers,
        "one_process_tokens_per_s": one,
        "workers_tokens_per_s": many,
        "ratio": many / one,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"ELECTRA step, {args.preset}, batch {args.batch}, {args.threads} threads in all")
    sides = {
        f"one process x {args.threads} threads": f"{one:10,.0f} tokens/s",
        f"{args.workers} workers x {max(1, args.threads // args.workers)} threads": (
            f"{many:10,.0f} tokens/s   ({many / one:.2f}x)"
        ),
    }
    width = max(map(len, sides))
    for side, rate in sides.items():
        print(f"  {side:<{width}} : {rate}")


if __name__ == "__main__":
    main()
