"""Does a discriminator learn a detection task that is learnable, and does it collapse?

ELECTRA-Small's discriminator ended at its prior on every GPU rung with a warm-up over 1% of
the steps (`reports/gpu_session-1e16/notes.md`). This check separates a defect (the wrong input,
labels or gradients) from the optimisation on a task where the answer is known: sequences
``[CLS] x_1 .. x_n [SEP]`` from a random successor chain over the ordinary tokens (each token
has ``--branch`` successors), so a replaced token is detectable from its neighbours alone. The
objective is built as a study builds it (``build_objective``), with the engine's optimiser, its
warm-up and decay (``engine.optim``), norm clipping and autocast; nothing of the objective is
re-implemented here.

Per ``--eval-every`` steps, on fresh held-out batches: the objective's own metrics (``disc_auc``,
``disc_nats_learnt``; ``mlm_masked_acc`` for BERT) and ``h_pos_std``, the spread of the main
encoder's final hidden states across the positions of a sequence (averaged over features and
sequences): 0 means every position carries the same vector, the collapse that leaves a
detector at its prior and a fine-tuned encoder answering the majority class.

    python bench/synthetic_rtd.py --preset small --steps 150 [--lr 1e-4 --warmup 0.1]
        [--layer-norm pre] [--objective bert_mlm] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.optim import learning_rate, make_optimizer
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.engine.precision import autocast
from electra_ablate.pretraining.objective import Objective
from electra_ablate.pretraining.registry import build_objective

SPECIAL = SpecialTokens()


class Chain:
    """A random successor chain over ``n`` ordinary tokens (ids after the special ones)."""

    def __init__(self, n: int, branch: int, seed: int = 1234) -> None:
        g = torch.Generator().manual_seed(seed)
        self.n, self.offset = n, len(SPECIAL.ids)
        self.successors = torch.stack([torch.randperm(n, generator=g)[:branch] for _ in range(n)])

    def sample(self, rows: int, length: int, g: torch.Generator) -> torch.Tensor:
        body = torch.empty(rows, length - 2, dtype=torch.long)
        body[:, 0] = torch.randint(0, self.n, (rows,), generator=g)
        branch = self.successors.shape[1]
        for t in range(1, length - 2):
            pick = torch.randint(0, branch, (rows,), generator=g)
            body[:, t] = self.successors[body[:, t - 1], pick]
        ids = torch.empty(rows, length, dtype=torch.long)
        ids[:, 0], ids[:, -1], ids[:, 1:-1] = SPECIAL.cls, SPECIAL.sep, body + self.offset
        return ids


def main_encoder(objective: Objective) -> torch.nn.Module:
    """The encoder a study keeps (the discriminator's, or the MLM's)."""
    return objective.kept_model().encoder


def evaluate(
    objective: Objective, chain: Chain, args: argparse.Namespace, device: torch.device
) -> dict[str, float]:
    """Held-out metrics on the same ``--eval-batches`` fresh batches at every evaluation."""
    g = torch.Generator().manual_seed(555)
    state = torch.random.get_rng_state()
    torch.manual_seed(4242)  # the objective's own draws (masking, sampling) repeat too
    captured: dict[str, torch.Tensor] = {}
    hook = main_encoder(objective).register_forward_hook(
        lambda _m, _i, out: captured.__setitem__("h", out.detach())
    )
    sums: dict[str, float] = {}
    objective.eval()
    with torch.no_grad():
        for _ in range(args.eval_batches):
            ids = chain.sample(args.batch, args.seq, g).to(device)
            with autocast(device, args.precision):
                out = objective({"input_ids": ids, "token_type_ids": torch.zeros_like(ids)})
            hidden = captured["h"].float()[:, 1:-1]
            row = {k: float(v) for k, v in out.metrics.items()}
            row["h_pos_std"] = float(hidden.std(1).mean())
            for key, value in row.items():
                sums[key] = sums.get(key, 0.0) + value / args.eval_batches
    objective.train()
    hook.remove()
    torch.random.set_rng_state(state)
    return sums


def chain_and_vocab(vocab_size: int, branch: int, seq: int) -> tuple[Chain, Vocab]:
    """The successor chain over the ordinary tokens of ``vocab_size`` ids and the vocabulary
    whose frequencies (a fixed sample of it; specials at zero) the objectives' priors use."""
    chain = Chain(vocab_size - len(SPECIAL.ids), branch)
    counts = torch.bincount(
        chain.sample(256, seq, torch.Generator().manual_seed(99)).flatten(), minlength=vocab_size
    ).float()
    counts[list(SPECIAL.ids)] = 0
    return chain, Vocab(counts)


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    chain, vocab = chain_and_vocab(args.vocab, args.branch, args.seq)
    backbone = preset(args.preset).with_overrides(
        vocab_size=args.vocab, max_seq_len=max(args.seq, 64), layer_norm=args.layer_norm
    )
    params = json.loads(args.params)
    objective = build_objective(args.objective, backbone, params, vocab).to(device)
    spec = PretrainSpec(batch_size=args.batch, learning_rate=args.lr, warmup_fraction=args.warmup)
    optimizer = make_optimizer(objective, spec)
    trained = [p for group in optimizer.param_groups for p in group["params"]]
    plan = RunPlan((args.steps,), ({"paper": 1.0, "standard": 1.0},), ())
    g = torch.Generator().manual_seed(1000 + args.seed)
    log = [{"step": 0, **evaluate(objective, chain, args, device)}]
    started = time.perf_counter()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(plan, step, spec)
        ids = chain.sample(args.batch, args.seq, g).to(device)
        with autocast(device, args.precision):
            out = objective({"input_ids": ids, "token_type_ids": torch.zeros_like(ids)})
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, spec.grad_clip)
        optimizer.step()
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            log.append({"step": step + 1, **evaluate(objective, chain, args, device)})
            shown = ("disc_auc", "disc_nats_learnt", "mlm_masked_acc", "h_pos_std")
            print(f"step {step + 1:5d} " + " ".join(
                f"{k}={log[-1][k]:.4f}" for k in shown if k in log[-1]
            ), flush=True)  # fmt: skip
    return {"args": vars(args), "log": log, "wall_s": round(time.perf_counter() - started, 1)}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objective", default="electra", help="a registered objective")
    parser.add_argument("--params", default="{}", help="the objective's params, as JSON")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--layer-norm", choices=["post", "pre"], default="post")
    parser.add_argument("--vocab", type=int, default=32, help="tokens, the special ones included")
    parser.add_argument("--branch", type=int, default=1, help="successors of each token")
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--lr", type=float, default=5e-4, help="peak learning rate")
    parser.add_argument("--warmup", type=float, default=0.01, help="warm-up share of the steps")
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--eval-batches", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json-out", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    result = run(args)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
