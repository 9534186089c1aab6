"""What the probes cost per kept checkpoint, and what they measure, as a study runs them.

Each kept encoder given is evaluated on every task of the spec's ``evaluation`` block, in the
spec's order, with the spec's seeds (a task with no seed once), in one process, as a study's
worker evaluates one checkpoint after another: the study's text and bigram table are read once,
GLUE's encodings are made once per process, and each encoder's features are shared by its seeds
(and by a discriminator's head tasks). Prints, per encoder and task, the seconds of the first
and of the further seeds and the headline metric per seed, then each reference's headline; and
the seconds per checkpoint. Read-only on the kept folders (copy them first if they are not
yours: a folder without a manifest gets one on first load).

    python bench/probe_cost.py COPY/electra-kept-1 COPY/bert-kept-1 --spec studies/objectives.yaml
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from electra_ablate.checkpoints.kept import load_kept
from electra_ablate.evaluation.task import get_task
from electra_ablate.spec import load_spec, task_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kept", nargs="+", type=Path, help="kept encoder folders")
    parser.add_argument("--spec", type=Path, default=Path("studies/objectives.yaml"))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (a study's worker)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = load_spec(args.spec)
    block = spec.evaluation
    if block is None:
        raise SystemExit(f"{args.spec} has no evaluation block")
    references: dict[tuple[str, str], list[float]] = {}
    for folder in args.kept:
        kept = load_kept(folder, seal=False)
        print(f"== {folder} ({kept.meta.get('objective')}, {kept.model.role})", flush=True)
        total = 0.0
        for name in block.tasks:
            task = get_task(name)
            if (reason := task.skip_reason(kept)) is not None:
                print(f"{name}: skipped ({reason})", flush=True)
                continue
            settings = task_settings(spec, block, name)
            seconds, values = [], []
            for seed in block.seeds if task.seeded else block.seeds[:1]:
                start = time.perf_counter()
                metrics = task.evaluate(kept, settings, seed)
                seconds.append(time.perf_counter() - start)
                values.append(round(metrics[task.headline], 2))
                for reference in task.references:
                    if (name, reference) not in references or len(
                        references[name, reference]
                    ) < len(values):
                        scored = task.evaluate_reference(reference, settings, seed, folder)
                        references.setdefault((name, reference), []).append(
                            round(scored[task.headline], 2)
                        )
            total += sum(seconds)
            further = ", ".join(f"{s:.1f}" for s in seconds[1:]) or "-"
            print(
                f"{name}: {seconds[0]:.1f} s, further seeds {further} s; {task.headline} {values}",
                flush=True,
            )
        print(f"seconds for this checkpoint: {total:.0f}", flush=True)
    for (name, reference), values in references.items():
        print(f"reference {reference} on {name}: {values}")


if __name__ == "__main__":
    main()
