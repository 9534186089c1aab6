"""Tokens/s of one ELECTRA pre-training step: ours against Hugging Face ``transformers`` and
against lucidrains' ``electra-pytorch``.

One step is what the engine does: forward, backward, gradient clipping at 1.0 and an AdamW update,
for the whole replaced-token-detection objective (generator 1/4 width with embeddings shared with
the discriminator, lambda = 50, dropout 0.1, seq 128, vocab 30522). OURS is the registered
``electra`` objective. PEER is written the way users of ``transformers`` write ELECTRA
pre-training: ``ElectraForMaskedLM(labels=...)`` computing generator logits at every position,
multinomial sampling at the masked ones, ``ElectraForPreTraining(labels=is_replaced)``, and the
generator's embeddings (and tied output matrix) swapped for the discriminator's. ELECTRA_PYTORCH
(``pip install --no-deps electra-pytorch``; optional, skipped with a note when it is not
installed) is that package's ``Electra`` wrapper as its own pre-training example uses it: the same
two ``transformers`` models behind adapters that return logits, the embeddings tied, and
``Electra`` doing the masking (15%, 85% of them to ``[MASK]``), Gumbel-max sampling and the
weighted loss (lambda = 50).

Timed steps alternate between the two in one process so that load from anything else running on
the machine hits both alike; the medians are compared. Peak memory is measured per side in child
processes (a process's high-water mark cannot be split between two models living in it).

    python bench/pretrain_throughput.py --preset tiny --batch 128 --steps 10 [--compile] [--json]

``--compile`` adds OURS_COMPILED (``pretrain.compile: true``); ``--compile reduce-overhead`` adds
OURS_CUDA_GRAPHS (``pretrain.compile: reduce-overhead``, CUDA only) instead, and
``--compile true,reduce-overhead`` both. ``--profile N`` then profiles N more steps of each of our
sides (``step_profile``: kernels, launches, host syncs and the card's busy time per
step), the numbers that say what bounds a step below the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.checkpoints.export import hf_config
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine import autocast, make_optimizer
from electra_ablate.pretraining.engine.compiling import CUDA_GRAPHS, compiled
from electra_ablate.pretraining.flops import objective_flops
from electra_ablate.pretraining.registry import build_objective
from electra_ablate.scaleout.node.measure import (
    adamw,
    packed_batch,
    peak_matmul_flops,
    peak_rss_mb,
    run_json_child,
    timed,
)
from electra_ablate.scaleout.node.step_profile import profile_steps

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DISC_WEIGHT = 50.0
GENERATOR_SIZE = 0.25
MASK_RATE = 0.15
SPEC = PretrainSpec()
COMPILED_SIDES = {"true": "ours_compiled", CUDA_GRAPHS: "ours_cuda_graphs"}
"""Each ``--compile`` value's side: ``pretrain.compile`` true, and reduce-overhead (CUDA graphs)."""


@dataclass
class Contender:
    """One training step to time (it returns the loss), plus facts about it for the report."""

    step: Callable[[], float]
    facts: dict[str, object] = field(default_factory=dict)


def update(
    optimizer: torch.optim.Optimizer, params: list[torch.Tensor], loss: torch.Tensor
) -> None:
    """One optimizer step from ``loss``, as the engine takes it (gradients clipped at the
    recipe's norm), the same for every contender."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, SPEC.grad_clip)
    optimizer.step()


def ours(
    cfg: BackboneConfig, batch_size: int, device: torch.device, compile: bool | str = False
) -> Contender:
    vocab = Vocab.uniform(cfg.vocab_size)
    objective = build_objective("electra", cfg, {}, vocab).to(device).train()
    forward = compiled(objective, mode=compile) if compile else objective
    optimizer = make_optimizer(objective, SPEC)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    batch = packed_batch(batch_size, cfg.max_seq_len, cfg.vocab_size, device, seed=0)

    def step() -> float:  # the engine's train_step, minus data loading and logging
        with autocast(device):
            out = forward(batch)
        update(optimizer, params, out.loss)
        return out.loss.item()  # metrics stay on the device, as in the engine

    flops = objective_flops(objective, cfg.max_seq_len, batch_size)["standard"]
    return Contender(step, {"flops_per_step_standard": flops})


def hf_electra(cfg: BackboneConfig) -> tuple[torch.nn.Module, torch.nn.Module]:
    """``transformers``' ELECTRA pair as its users build it: a discriminator and a generator at
    ``GENERATOR_SIZE`` of its width, sharing the embeddings and the tied output matrix."""
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    discriminator = ElectraForPreTraining(ElectraConfig(**hf_config(cfg, "discriminator")))
    generator = ElectraForMaskedLM(ElectraConfig(**hf_config(cfg.scaled(GENERATOR_SIZE), "mlm")))
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
    return generator, discriminator


def peer(cfg: BackboneConfig, batch_size: int, device: torch.device) -> Contender:
    special = SpecialTokens()
    generator, discriminator = hf_electra(cfg)
    discriminator.to(device).train()
    generator.to(device).train()
    optimizer = adamw([*generator.parameters(), *discriminator.parameters()], SPEC)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    batch = packed_batch(batch_size, cfg.max_seq_len, cfg.vocab_size, device, seed=0)
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]

    def step() -> float:
        probability = torch.full(input_ids.shape, MASK_RATE, device=device)
        probability.masked_fill_(input_ids < len(special.ids), 0.0)
        masked = torch.bernoulli(probability).bool()
        labels = input_ids.masked_fill(~masked, -100)
        with autocast(device):
            gen = generator(
                input_ids.masked_fill(masked, special.mask),
                attention_mask=attention_mask,
                labels=labels,
            )
            with torch.no_grad():
                probs = F.softmax(gen.logits[masked].float(), dim=-1)
                sampled = torch.multinomial(probs, 1).squeeze(-1)
            corrupted = input_ids.clone()
            corrupted[masked] = sampled
            is_replaced = (corrupted != input_ids).long()
            disc = discriminator(corrupted, attention_mask=attention_mask, labels=is_replaced)
            loss = gen.loss + DISC_WEIGHT * disc.loss
        value = loss.item()  # as its users write it: the loss read back every step
        update(optimizer, params, loss)
        return value

    return Contender(step, {"peer_attention": discriminator.config._attn_implementation})


class LogitsOnly(torch.nn.Module):
    """What ``electra-pytorch`` expects of its generator and discriminator: a module from token ids
    to logits (a ``transformers`` model returns an output object)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, **kwargs: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, **kwargs).logits


def electra_pytorch(cfg: BackboneConfig, batch_size: int, device: torch.device) -> Contender:
    from electra_pytorch import Electra

    special = SpecialTokens()
    generator, discriminator = hf_electra(cfg)
    model = Electra(
        LogitsOnly(generator),
        LogitsOnly(discriminator),
        num_tokens=cfg.vocab_size,
        mask_prob=MASK_RATE,
        mask_token_id=special.mask,
        pad_token_id=special.pad,
        mask_ignore_token_ids=[special.cls, special.sep],
        disc_weight=DISC_WEIGHT,
    )
    model.to(device).train()
    optimizer = adamw(model.parameters(), SPEC)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    batch = packed_batch(batch_size, cfg.max_seq_len, cfg.vocab_size, device, seed=0)
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]

    def step() -> float:
        with autocast(device):
            loss = model(input_ids, attention_mask=attention_mask).loss
        value = loss.item()  # as its users write it: the loss read back every step
        update(optimizer, params, loss)
        return value

    return Contender(step)


def has_electra_pytorch() -> bool:
    from importlib.util import find_spec

    return find_spec("electra_pytorch") is not None


BUILDERS: dict[str, Callable[..., Contender]] = {"ours": ours, "peer": peer}
if has_electra_pytorch():
    BUILDERS["electra_pytorch"] = electra_pytorch


def memory_child(
    side: str, cfg: BackboneConfig, batch_size: int, device: torch.device
) -> dict[str, float]:
    """Peak memory of one side alone: a few steps in this (child) process."""
    contender = BUILDERS[side](cfg, batch_size, device)
    for _ in range(3):
        contender.step()
    out = {"peak_rss_mb": peak_rss_mb()}
    if device.type == "cuda":
        out["peak_cuda_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def benchmark(args: argparse.Namespace) -> dict[str, object]:
    cfg, device = preset(args.preset), torch.device(args.device)
    torch.manual_seed(0)
    contenders = {side: build(cfg, args.batch, device) for side, build in BUILDERS.items()}
    for mode in args.compile:
        compile_mode = True if mode == "true" else mode
        contenders[COMPILED_SIDES[mode]] = ours(cfg, args.batch, device, compile=compile_mode)
    times: dict[str, list[float]] = {side: [] for side in contenders}
    notes: dict[str, object] = {}
    for i in range(args.warmup + args.steps):
        order = list(contenders) if i % 2 == 0 else list(reversed(contenders))  # alternate firsts
        for side in order:
            if side not in contenders:
                continue
            try:
                seconds = timed(contenders[side].step, device)
            except Exception as e:  # a compiler that fails here must not lose the eager numbers
                if side not in COMPILED_SIDES.values():
                    raise
                notes[f"{side}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                del contenders[side], times[side]
                continue
            if i == 0 and side in COMPILED_SIDES.values():  # the compilation, mostly
                notes[f"{side}_first_step_s"] = seconds
            if i >= args.warmup:
                times[side].append(seconds)
    median = {side: statistics.median(t) for side, t in times.items()}
    tokens = args.batch * cfg.max_seq_len
    compute_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    peak = peak_matmul_flops(device, compute_dtype)
    flops = contenders["ours"].facts["flops_per_step_standard"]
    result: dict[str, object] = {
        "ours_tokens_per_s": tokens / median["ours"],
        "peer_tokens_per_s": tokens / median["peer"],
        "ratio": median["peer"] / median["ours"],
        "mfu": flops / median["ours"] / peak,
        "ours_step_s": median["ours"],
        "peer_step_s": median["peer"],
        "ours_step_s_all": times["ours"],
        "peer_step_s_all": times["peer"],
        "peak_matmul_flops": peak,
        **{
            f"{side}_{key}": value
            for side in (*COMPILED_SIDES.values(), "electra_pytorch")
            if side in median
            for key, value in (
                ("tokens_per_s", tokens / median[side]),
                ("step_s", median[side]),
                ("step_s_all", times[side]),
                ("ratio", median[side] / median["ours"]),  # its step time over ours
            )
        },
        **({"compile_modes": args.compile} if args.compile else {}),
        **notes,
        **profiles(args, contenders, median, device),
        **contenders["ours"].facts,
        **contenders["peer"].facts,
    }
    del contenders
    if args.no_memory:
        return result | run_facts(args, cfg)
    same = [
        "--preset",
        args.preset,
        "--batch",
        str(args.batch),
        "--threads",
        str(args.threads),
        "--device",
        args.device,
    ]
    for side in BUILDERS:
        child = run_json_child(["-m", __spec__.name, "--memory-of", side, *same])
        # ``peak_rss_mb`` of side ``ours`` -> ``peak_rss_ours_mb``
        result |= {key.removesuffix("_mb") + f"_{side}_mb": v for key, v in child.items()}
    return result | run_facts(args, cfg)


def profiles(
    args: argparse.Namespace,
    contenders: dict[str, Contender],
    median: dict[str, float],
    device: torch.device,
) -> dict[str, object]:
    """``--profile N``: each of our sides profiled for N more steps; ``busy_share_of_timed`` is
    the card's busy time over the side's timed median step (the profiler slows the host)."""
    if not args.profile:
        return {}
    out: dict[str, object] = {}
    for side in ("ours", *COMPILED_SIDES.values()):
        if side in contenders:
            summary = profile_steps(contenders[side].step, args.profile, device)
            summary["busy_share_of_timed"] = summary["device_busy_ms"] / (1000 * median[side])
            out[f"{side}_profile"] = summary
    return out


def run_facts(args: argparse.Namespace, cfg: BackboneConfig) -> dict[str, object]:
    """What was timed, where: beside every result."""
    facts: dict[str, object] = {
        "device": args.device,
        "preset": args.preset,
        "batch": args.batch,
        "threads": args.threads,
        "seq_len": cfg.max_seq_len,
        "timed_steps": args.steps,
        "torch": torch.__version__,
    }
    if args.device == "cuda":
        facts |= {"gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda}
    return facts


def print_table(result: dict[str, object]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"ELECTRA pre-training step: preset {result['preset']}, batch "
        f"{result['batch']}, seq {result['seq_len']}, {result['device']}, "
        f"{result['threads']} threads"
    )
    for column in ("", "tokens/s", "median step (s)", "peak RSS (MB)"):
        table.add_column(column, justify="right")
    sides = [("ours", "electra-ablate"), ("peer", "transformers")]
    for mode, side in reversed(COMPILED_SIDES.items()):
        if f"{side}_tokens_per_s" in result:
            sides.insert(1, (side, f"electra-ablate, compile: {mode}"))
    if "electra_pytorch_tokens_per_s" in result:
        sides.append(("electra_pytorch", "electra-pytorch"))
    for side, label in sides:
        table.add_row(
            label,
            f"{result[f'{side}_tokens_per_s']:,.0f}",
            f"{result[f'{side}_step_s']:.3f}",
            f"{result.get(f'peak_rss_{side}_mb', float('nan')):,.0f}",
        )
    console = Console()
    console.print(table)
    console.print(
        f"ours / transformers: {result['ratio']:.2f}x   "
        + (
            f"ours / electra-pytorch: {result['electra_pytorch_ratio']:.2f}x   "
            if "electra_pytorch_ratio" in result
            else "(electra-pytorch not installed)   "
        )
        + "".join(
            f"{side} / eager: {1 / result[f'{side}_ratio']:.2f}x   "
            for side in COMPILED_SIDES.values()
            if f"{side}_ratio" in result
        )
        + f"MFU of ours (standard FLOPs / measured peak matmul): {result['mfu']:.1%}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=["micro", "tiny", "small", "base"], default="tiny")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per side first")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--json-out", metavar="FILE", help="also write the JSON object to FILE (the GPU session)"
    )
    parser.add_argument(
        "--no-memory",
        action="store_true",
        help="skip the peak-memory child processes (each imports torch and builds its model)",
    )
    parser.add_argument(
        "--compile",
        nargs="?",
        const="true",
        default="",
        type=compile_modes,
        help="also time ours with pretrain.compile: true (the default), reduce-overhead, or both "
        "(true,reduce-overhead)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="profile N more steps of our sides"
    )
    parser.add_argument("--memory-of", choices=list(BUILDERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if isinstance(args.compile, str):  # argparse passes a bare flag's const through as it is
        args.compile = compile_modes(args.compile)
    if CUDA_GRAPHS in args.compile and args.device != "cuda":
        parser.error(f"--compile {CUDA_GRAPHS} captures CUDA graphs: it needs --device cuda")
    return args


def compile_modes(value: str) -> list[str]:
    """``--compile``'s comma-separated modes, each a key of ``COMPILED_SIDES``."""
    modes = [m.strip() for m in value.split(",") if m.strip()]
    for mode in modes:
        if mode not in COMPILED_SIDES:
            raise argparse.ArgumentTypeError(f"{mode!r}: expected {', '.join(COMPILED_SIDES)}")
    return modes


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_of:
        cfg, device = preset(args.preset), torch.device(args.device)
        print(json.dumps(memory_child(args.memory_of, cfg, args.batch, device)))
    else:
        result = benchmark(args)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result, indent=2))
        if args.json:
            print(json.dumps(result))
        else:
            print_table(result)


if __name__ == "__main__":
    main()
