"""Peak memory of one training forward + backward with the vocabulary computations as they are
and as they were before defect 11 (issue 36) was fixed: All-Tokens MLM's log-softmax + gather at
every position, and ELECTRA's generator sampling distribution and its entropy/KL statistics.

Each measurement runs in a child process: its peak RSS after the step minus its RSS before it
(the model and the batch already built; no optimizer), so the number is what the step adds.

    python bench/head_memory.py --preset tiny --batch 32 [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import electra_ablate.objectives.all_tokens_mlm as all_tokens_module
import torch
import torch.nn.functional as F

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.pretraining.components import generator as generator_module
from electra_ablate.pretraining.components import losses as losses_module
from electra_ablate.pretraining.registry import build_objective
from electra_ablate.scaleout.node.measure import packed_batch


def old_target_log_softmax(logits, targets):
    return F.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def old_sampling_log_probs(logits, special, temperature):
    with torch.no_grad():
        masked = generator_module.without_special(logits.float(), special)
        return torch.log_softmax(masked / temperature, dim=-1)


@torch.no_grad()
def old_distribution_stats(log_probs, vocab):
    probs = log_probs.exp()
    nonzero = probs > 0
    plogp = torch.where(nonzero, probs * log_probs, 0.0)
    entropy = -plogp.sum(-1)
    cross = torch.where(nonzero, probs * vocab.log_unigram, 0.0).sum(-1)
    return entropy, (plogp.sum(-1) - cross)


def use_old_formulations() -> None:
    all_tokens_module.target_log_softmax = old_target_log_softmax
    generator_module.sampling_log_probs = old_sampling_log_probs
    generator_module.distribution_stats = old_distribution_stats
    losses_module.distribution_stats = old_distribution_stats


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def child(objective_name: str, preset_name: str, batch_size: int, old: bool) -> dict:
    torch.manual_seed(0)
    if old:
        use_old_formulations()
    cfg = preset(preset_name)
    objective = build_objective(objective_name, cfg, {}, Vocab.uniform(cfg.vocab_size)).train()
    batch = packed_batch(batch_size, cfg.max_seq_len, cfg.vocab_size, torch.device("cpu"), 0)
    before = rss_mb()
    objective(batch).loss.backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"step_peak_mb": peak - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)  # objective, old|new
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.child:
        name, which = args.child
        print(json.dumps(child(name, args.preset, args.batch, which == "old")))
        return
    result = {"preset": args.preset, "batch": args.batch}
    for name in ("all_tokens_mlm", "electra"):
        for which in ("old", "new"):
            out = subprocess.run(
                [sys.executable, __file__, "--preset", args.preset, "--batch", str(args.batch)]
                + ["--child", name, which],
                check=True,
                capture_output=True,
                text=True,
            )
            result[f"{name}_{which}_mb"] = json.loads(out.stdout)["step_peak_mb"]
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value:,.0f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
