"""Would several fine-tuning seeds of one checkpoint train faster as one stacked model?

Issue 49 names stacking as one way to cut the host operations of fine-tuning: the seeds' weights
stacked along a leading dimension (``torch.func.stack_module_state``) and one ``vmap`` of the
classifier's loss over them, so that every aten operation serves all seeds at once. This script
measures that against the fine-tune as it runs today (``evaluation.finetune.loop.train_step``:
one model, fused AdamW, norm clipping), in one process, the two sides alternating:

- wall time of one optimizer step of every seed (S eager steps, or one stacked step), median of
  ``--repeats`` windows of ``--steps`` steps;
- host operations of the same (``common.counted``, a ``TorchDispatchMode`` counter).

The stacked step is the cheapest stacking can be: one fused AdamW over the stacked tensors (its
update is elementwise, so each seed's math is unchanged) and clipping by each seed's own norm.
Both sides run without dropout, since ``vmap`` cannot replay each seed's dropout stream: a
stacked fine-tune that gives each seed the scores of its eager run must draw every seed's masks
outside the ``vmap`` from that seed's generator (bit-identical to ``nn.Dropout`` on the CPU), which
only adds operations to the stacked side. So a stacked side that is not faster here will not be
faster with dropout either.

    python bench/stacked_seeds.py --preset micro --seeds 3 [--json-out FILE]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import Encoder
from electra_ablate.evaluation.finetune.classifier import GlueClassifier
from electra_ablate.evaluation.finetune.loop import make_optimizer, train_step
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.scaleout.node.measure import counted, timed

RECIPE = FinetuneRecipe(head_dropout=0.0)


def classifiers(preset_name: str, seeds: int, vocab: int) -> list[GlueClassifier]:
    """One kept encoder (no dropout) fine-tuned from ``seeds`` head initialisations."""
    cfg = preset(preset_name).model_copy(
        update={"vocab_size": vocab, "dropout": 0.0, "attention_dropout": 0.0}
    )
    torch.manual_seed(0)
    encoder = Encoder(cfg)
    models = []
    for seed in range(seeds):
        torch.manual_seed(seed)
        models.append(GlueClassifier(copy.deepcopy(encoder), 2, RECIPE.head_dropout))
    return models


def batch(size: int, length: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (size, length), generator=g)
    return {
        "input_ids": ids,
        "token_type_ids": torch.zeros_like(ids),
        "attention_mask": torch.ones_like(ids),
        "labels": torch.randint(0, 2, (size,), generator=g),
    }


def eager_side(models: list[GlueClassifier], data: dict) -> Callable[[], None]:
    """Today's fine-tune: each seed's optimizer step, one after the other."""
    optimizers = [make_optimizer(m, RECIPE) for m in models]
    device = torch.device("cpu")

    def step() -> None:
        for model, optimizer in zip(models, optimizers, strict=True):
            train_step(model, data, optimizer, None, False, RECIPE, device)

    return step


def stacked_side(models: list[GlueClassifier], data: dict) -> Callable[[], None]:
    """One vmapped loss over the stacked weights, per-seed clipping, one fused AdamW."""
    params, buffers = stack_module_state(models)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    skeleton = copy.deepcopy(models[0]).to("meta")
    optimizer = torch.optim.AdamW(
        list(params.values()), lr=RECIPE.lr, betas=RECIPE.betas, eps=RECIPE.eps, fused=True
    )
    seeds = len(models)
    inputs = [data[k].expand(seeds, *data[k].shape) for k in ("input_ids", "token_type_ids")]
    mask = data["attention_mask"].expand(seeds, *data["attention_mask"].shape)
    labels = data["labels"].expand(seeds, -1)

    def loss(p: dict, b: dict, ids: torch.Tensor, types: torch.Tensor, m: torch.Tensor, y):  # noqa: ANN001
        return F.cross_entropy(functional_call(skeleton, (p, b), (ids, types, m)), y)

    losses = vmap(loss)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        losses(params, buffers, *inputs, mask, labels).sum().backward()
        grads = [p.grad for p in params.values()]
        norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in grads]).sum(0).sqrt()
        scale = (RECIPE.grad_clip / (norms + 1e-6)).clamp(max=1.0)
        torch._foreach_mul_(grads, [scale.view(-1, *[1] * (g.ndim - 1)) for g in grads])
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="micro")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=40, help="tokens per row (GLUE: ~11-60)")
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed window")
    parser.add_argument("--repeats", type=int, default=5, help="windows per side")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    data = batch(args.batch, args.length, args.vocab, seed=0)
    sides = {
        "eager": eager_side(classifiers(args.preset, args.seeds, args.vocab), data),
        "stacked": stacked_side(classifiers(args.preset, args.seeds, args.vocab), data),
    }
    ops = {name: counted(step).summary()["ops"] for name, step in sides.items()}
    windows: dict[str, list[float]] = {name: [] for name in sides}
    device = torch.device("cpu")
    for _ in range(args.repeats):  # alternating, so a load change hits both sides alike
        for name, step in sides.items():
            windows[name].append(
                timed(lambda s=step: [s() for _ in range(args.steps)], device) / args.steps
            )
    ms = {name: 1000 * statistics.median(w) for name, w in windows.items()}
    report = {
        "preset": args.preset,
        "seeds": args.seeds,
        "batch": args.batch,
        "length": args.length,
        "threads": args.threads,
        "ms_per_step_of_every_seed": ms,
        "ms_range": {n: [1000 * min(w), 1000 * max(w)] for n, w in windows.items()},
        "host_ops_per_model_step": {n: ops[n] / args.seeds for n in ops},
        "stacked_speedup": ms["eager"] / ms["stacked"],
    }
    print(json.dumps(report, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
