r"""Is the discriminator's collapse the recipe's or ours? Our ELECTRA beside `transformers`'.

ELECTRA-Small's discriminator went to a constant logit on every GPU rung whose warm-up was 1% of
the run (`reports/gpu_session-1e16/notes.md`), and `bench/synthetic_rtd.py` showed the same on a
27-sequence task on the CPU. Both ran only our code. Here the same recipe trains two
implementations side by side on the same batches:

- **ours**: the ``electra`` objective built as a study builds it (``build_objective``: our
  encoder, heads, masking, sampling and loss);
- **reference**: `transformers`' ``ElectraForPreTraining`` (discriminator) and
  ``ElectraForMaskedLM`` (generator, 1/4 width), tied as the paper ties them (the generator uses
  the discriminator's embedding module, token, position and type tables and their LayerNorm;
  its output layer is the token table), initialised by `transformers`, with the corruption and
  the loss written out here in plain torch and sharing no code with ours: 15% of the ordinary
  tokens of each row to ``[MASK]``, the generator's softmax over the ordinary tokens sampled at
  temperature 1 without gradient, labels where the sample differs from the original, loss =
  MLM + 50 x the mean BCE over every token.

Both get the optimiser the engine makes (``engine.optim.make_optimizer``: AdamW, no decay on
1-D tensors, shared tensors once), its schedule (``engine.optim.learning_rate``: linear warm-up,
linear decay to zero at ``--horizon``) and norm clipping at 1.0, in fp32. The task is
``synthetic_rtd.Chain``, a successor chain where every token has ``--branch`` successors, so a
replaced token is detectable from its neighbours alone; with ``--branch`` > 1 the held-out
sequences are all distinct (the JSON's ``task.distinct_heldout``). The arms change one factor
at a time from ``base`` (a short warm-up, as the GPU rungs' 1%, at lr 5e-4): ``long_warmup``
(the warm-up ``--long-warmup`` steps) and ``low_lr`` (lr 2e-4); ``control`` (lr 5e-5) runs
only when named.

At every ``--eval-every`` steps, on the same held-out batches with the same corruption draws,
computed here from each model's logits and labels (nothing of ours scores either model):
``auc`` (held-out ROC-AUC of "replaced" over the ordinary tokens), ``nats_learnt`` (the
labels' entropy minus the detector's BCE there), and the collapse monitor
(``electra_ablate.pretraining.components.monitor``): ``spread`` (``encoder_spread`` of the
discriminator's final hidden states over the ordinary tokens), ``disc_inactive`` and
``disc_logit_spread`` (``head_stats`` of the detection head's pre-GELU dense output and its
logits). For ours the objective's own ``disc_auc`` is logged beside (``own_auc``, its mean
over the held-out batches, where ``auc`` pools them): the figure our metric code gives.

The committed ``bench/collapse_reference.json`` came from this command, 1,126 s (18.8 min) for
its six runs on one torch thread of a 2-core machine shared with other work (load 8-12); its
defaults are the committed run's: batch 16 x 32 tokens, 120 steps of a 7,737-step schedule (the
1e16 rung's ELECTRA-Small steps), so after the warm-up the rate stays near its peak as on a
rung:

    python bench/collapse_reference.py --json-out bench/collapse_reference.json

``bench/collapse_reference_control.json``, the control arm (lr 5e-5; 405 s), and
``bench/collapse_reference_easy.json``, the same on ``synthetic_rtd``'s 27-sequence chain at lr
1e-4, where both learn (457 s):

    python bench/collapse_reference.py --arms control \
        --json-out bench/collapse_reference_control.json
    python bench/collapse_reference.py --arms control --vocab 32 --branch 1 --batch 32 \
        --steps 100 --horizon 150 --short-warmup 15 --control-lr 1e-4 \
        --json-out bench/collapse_reference_easy.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.checkpoints.export import hf_config
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.pretraining.components.monitor import encoder_spread, head_stats
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.optim import learning_rate, make_optimizer
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.registry import build_objective

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_rtd import chain_and_vocab  # noqa: E402

SPECIAL = SpecialTokens()
MASK_RATE = 0.15
DISC_WEIGHT = 50.0
IMPLEMENTATIONS = ("ours", "reference")


@dataclass
class Seen:
    """What one forward pass of a discriminator showed: the corrupted input, the logits, the
    final hidden states and the detection head's dense output before its GELU."""

    corrupted: torch.Tensor  # [B, L]
    logits: torch.Tensor  # [B, L]
    hidden: torch.Tensor  # [B, L, H]
    pre_activation: torch.Tensor  # [B, L, H]


class Ours(nn.Module):
    """Our ``electra`` objective; a step returns its loss and, through hooks, what D saw."""

    def __init__(self, backbone: BackboneConfig, vocab: Vocab) -> None:
        super().__init__()
        self.objective = build_objective("electra", backbone, {}, vocab)
        self.seen: dict[str, torch.Tensor] = {}
        disc = self.objective.discriminator

        def keep(name: str, index: int | None = None) -> Callable[..., None]:
            def hook(_module: nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> None:
                self.seen[name] = (out if index is None else args[index]).detach()

            return hook

        # on the modules D's pass goes through, whichever method of D calls them
        disc.encoder.register_forward_hook(keep("corrupted", 0))
        disc.encoder.register_forward_hook(keep("hidden"))
        disc.head.dense.register_forward_hook(keep("pre_activation"))
        disc.head.logit.register_forward_hook(keep("logits"))

    def trainable_parameters(self) -> Any:
        return self.objective.trainable_parameters()

    def step(self, ids: torch.Tensor) -> tuple[torch.Tensor, Seen, dict[str, float]]:
        out = self.objective({"input_ids": ids, "token_type_ids": torch.zeros_like(ids)})
        seen = self.seen
        logits = seen["logits"].squeeze(-1)
        seen = Seen(seen["corrupted"], logits, seen["hidden"], seen["pre_activation"])
        return out.loss, seen, {"own_auc": float(out.metrics["disc_auc"])}


class Reference(nn.Module):
    """`transformers`' discriminator and 1/4-width generator, tied as the paper ties them, and
    the replaced-token step in plain torch (no code of ours)."""

    def __init__(self, backbone: BackboneConfig, generator: BackboneConfig) -> None:
        super().__init__()
        from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

        # our shapes as `transformers` names them: the export's mapping (post-LN, exact GELU)
        self.disc = ElectraForPreTraining(ElectraConfig(**hf_config(backbone, "discriminator")))
        self.gen = ElectraForMaskedLM(ElectraConfig(**hf_config(generator, "mlm")))
        # the paper's embedding sharing: one embedding module (token, position, type, LayerNorm)
        self.gen.electra.embeddings = self.disc.electra.embeddings
        self.gen.generator_lm_head.weight = self.disc.electra.embeddings.word_embeddings.weight
        self.is_special = torch.zeros(backbone.vocab_size, dtype=torch.bool)
        self.is_special[list(SPECIAL.ids)] = True
        self.seen: dict[str, torch.Tensor] = {}
        self.disc.discriminator_predictions.dense.register_forward_hook(
            lambda _m, _a, out: self.seen.__setitem__("pre_activation", out.detach())
        )

    def trainable_parameters(self) -> Any:
        return ((n, p) for n, p in self.named_parameters() if p.requires_grad)

    def step(self, ids: torch.Tensor) -> tuple[torch.Tensor, Seen, dict[str, float]]:
        types = torch.zeros_like(ids)
        ordinary = ~self.is_special[ids]
        # 15% of each row's ordinary tokens, chosen uniformly: rank random scores, specials last
        count = torch.round(ordinary.sum(1).float() * MASK_RATE).clamp(min=1).long()
        scores = torch.rand(ids.shape).masked_fill(~ordinary, 2.0)
        rank = scores.argsort(1).argsort(1)
        masked = rank < count[:, None]
        gen_logits = self.gen(ids.masked_fill(masked, SPECIAL.mask), token_type_ids=types).logits
        mlm_loss = F.cross_entropy(gen_logits[masked], ids[masked])
        with torch.no_grad():
            probs = gen_logits[masked].float().masked_fill(self.is_special, float("-inf"))
            samples = torch.multinomial(probs.softmax(-1), 1).squeeze(-1)
        corrupted = ids.clone()
        corrupted[masked] = samples
        labels = (corrupted != ids).float()
        out = self.disc(corrupted, token_type_ids=types, output_hidden_states=True)
        disc_loss = F.binary_cross_entropy_with_logits(out.logits, labels)
        seen = Seen(
            corrupted,
            out.logits.detach(),
            out.hidden_states[-1].detach(),
            self.seen["pre_activation"],
        )
        return mlm_loss + DISC_WEIGHT * disc_loss, seen, {}


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mann-Whitney: P(a replaced token scores above an original one), ties counting half."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # 0-based rank of each distinct score's first member
    ranks = first[inverse] + (counts[inverse] + 1) / 2.0  # 1-based, tied averaged
    pos = labels.astype(bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        return 0.5
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def heldout(model: nn.Module, batches: list[torch.Tensor], seed: int) -> dict[str, float]:
    """The detector and the monitor on the held-out ``batches``, with the same corruption draws
    at every evaluation (the RNG is seeded, then restored)."""
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model.eval()
    scores, labels, bce, monitor, own = [], [], [], [], []
    with torch.no_grad():
        for ids in batches:
            _, seen, extra = model.step(ids)
            ordinary = ~torch.isin(ids, torch.tensor(SPECIAL.ids))
            y = (seen.corrupted != ids).float()
            z = seen.logits.float()
            scores.append(z[ordinary].numpy())
            labels.append(y[ordinary].numpy())
            bce.append(F.binary_cross_entropy_with_logits(z, y, reduction="none")[ordinary])
            stats = head_stats(seen.pre_activation, z, ordinary, "disc")
            spread = float(encoder_spread(seen.hidden, ordinary))
            monitor.append([spread, *map(float, stats.values())])
            own.append(extra.get("own_auc", float("nan")))
    model.train()
    torch.random.set_rng_state(state)
    y_all = np.concatenate(labels)
    rate = float(y_all.mean())
    entropy = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate)) if 0 < rate < 1 else 0.0
    spread, inactive, logit_spread = np.mean(monitor, axis=0).tolist()
    row = {
        "auc": roc_auc(np.concatenate(scores), y_all),
        "nats_learnt": entropy - float(torch.cat(bce).mean()),
        "replaced_rate": rate,
        "spread": spread,
        "disc_inactive": inactive,
        "disc_logit_spread": logit_spread,
    }
    if not np.isnan(own).all():
        row["own_auc"] = float(np.mean(own))
    return {k: round(v, 6) for k, v in row.items()}


def build(implementation: str, backbone: BackboneConfig, vocab: Vocab, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    if implementation == "ours":
        return Ours(backbone, vocab)
    return Reference(backbone, backbone.scaled(0.25))


def train(
    implementation: str,
    arm: dict[str, Any],
    task: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One run: the same training batches (``--seed``) and held-out batches for every run."""
    model = build(implementation, task["backbone"], task["vocab"], args.seed)
    spec = PretrainSpec(
        batch_size=args.batch,
        learning_rate=arm["lr"],
        warmup_steps=arm["warmup_steps"],
        warmup_beyond_run=True,
    )
    optimizer = make_optimizer(model, spec)  # type: ignore[arg-type]  # duck-typed: its params
    trained = [p for group in optimizer.param_groups for p in group["params"]]
    plan = RunPlan((args.horizon or args.steps,), ({"paper": 1.0, "standard": 1.0},), ())
    g = torch.Generator().manual_seed(1000 + args.seed)
    log = [{"step": 0, **heldout(model, task["heldout"], 4242)}]
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(args.steps):
        rate = learning_rate(plan, step, spec)
        for group in optimizer.param_groups:
            group["lr"] = rate
        ids = task["chain"].sample(args.batch, args.seq, g)
        loss, _, _ = model.step(ids)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, spec.grad_clip)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            row = {"step": step + 1, "lr": rate, "train_loss": round(float(np.mean(losses)), 4)}
            log.append({**row, **heldout(model, task["heldout"], 4242)})
            losses = []
            shown = " ".join(f"{k}={log[-1][k]:.4g}" for k in ("auc", "nats_learnt", "spread",
                             "disc_inactive", "disc_logit_spread"))  # fmt: skip
            print(f"{implementation:9s} {arm['name']:11s} step {step + 1:5d} {shown}", flush=True)
    return {
        "implementation": implementation,
        "arm": arm["name"],
        "lr": arm["lr"],
        "warmup_steps": arm["warmup_steps"],
        "log": log,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def make_task(args: argparse.Namespace) -> dict[str, Any]:
    """The chain, its vocabulary and backbone, and the held-out batches (drawn apart from the
    training stream), with how many distinct held-out sequences they hold."""
    chain, vocab = chain_and_vocab(args.vocab, args.branch, args.seq)
    backbone = preset(args.preset).with_overrides(
        vocab_size=args.vocab, max_seq_len=max(args.seq, 64)
    )
    g = torch.Generator().manual_seed(555)
    batches = [chain.sample(args.batch, args.seq, g) for _ in range(args.eval_batches)]
    distinct = len({tuple(row.tolist()) for ids in batches for row in ids})
    return {
        "chain": chain,
        "vocab": vocab,
        "backbone": backbone,
        "heldout": batches,
        "heldout_sequences": args.batch * args.eval_batches,
        "distinct_heldout": distinct,
    }


ARMS = ("base", "long_warmup", "low_lr")
"""The arms run unless ``--arms`` names others (``control`` runs only when named)."""


def arms(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One factor changed at a time from the base arm; ``control`` is the base arm at a rate
    low enough not to collapse, to show that both implementations can learn the task."""
    every = [
        {"name": "base", "lr": args.lr, "warmup_steps": args.short_warmup},
        {"name": "long_warmup", "lr": args.lr, "warmup_steps": args.long_warmup},
        {"name": "low_lr", "lr": args.low_lr, "warmup_steps": args.short_warmup},
        {"name": "control", "lr": args.control_lr, "warmup_steps": args.short_warmup},
    ]
    return [arm for arm in every if arm["name"] in (args.arms or ARMS)]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every chosen arm for each implementation in turn; with ``--json-out`` the file is
    rewritten after each run (``complete`` false until the last), so a stopped bench keeps
    the runs it finished."""
    torch.set_num_threads(args.threads)
    task = make_task(args)
    started = time.perf_counter()
    todo = [(i, a) for a in arms(args) for i in args.implementations]
    runs: list[dict[str, Any]] = []
    for implementation, arm in todo:
        runs.append(train(implementation, arm, task, args))
        result = summary(args, task, runs, started, complete=len(runs) == len(todo))
        if args.json_out:
            atomic_write_text(args.json_out, json.dumps(result, indent=1) + "\n")
    return result


def summary(
    args: argparse.Namespace,
    task: dict[str, Any],
    runs: list[dict[str, Any]],
    started: float,
    complete: bool,
) -> dict[str, Any]:
    return {
        "complete": complete,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "task": {
            "vocab": args.vocab,
            "branch": args.branch,
            "heldout_sequences": task["heldout_sequences"],
            "distinct_heldout": task["distinct_heldout"],
            "backbone": task["backbone"].model_dump(),
        },
        "versions": {"torch": torch.__version__, "transformers": _transformers_version()},
        "runs": runs,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--vocab", type=int, default=2048, help="tokens, the special ones included")
    parser.add_argument("--branch", type=int, default=4, help="successors of each token")
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=120, help="steps each run trains")
    parser.add_argument(
        "--horizon",
        type=int,
        default=7737,
        help="the schedule's length: the rate decays to zero there (default: the 1e16 rung's "
        "ELECTRA-Small steps, so a run is its first --steps steps; 0: --steps)",
    )
    parser.add_argument("--lr", type=float, default=5e-4, help="peak learning rate of base")
    parser.add_argument("--low-lr", type=float, default=2e-4, help="the low_lr arm's peak")
    parser.add_argument("--control-lr", type=float, default=5e-5, help="the control arm's peak")
    parser.add_argument(
        "--short-warmup", type=int, default=60, help="warm-up steps of base (the rungs': 23-102)"
    )
    parser.add_argument("--long-warmup", type=int, default=100, help="the long_warmup arm's")
    parser.add_argument(
        "--arms", nargs="+", choices=[*ARMS, "control"], help="these arms (default: the three)"
    )
    parser.add_argument(
        "--implementations", nargs="+", choices=IMPLEMENTATIONS, default=list(IMPLEMENTATIONS)
    )
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--eval-batches", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json-out", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return run(parse(argv))


if __name__ == "__main__":
    main()
