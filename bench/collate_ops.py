"""Host operations of building one fine-tuning batch (``evaluation.finetune.batching.collate``)
with whichever ``electra_ablate`` is importable, so that an older version can be counted beside
this one: put a worktree of it first on ``PYTHONPATH``. Counted as ``bench/op_count.py``
counts a step (``common.counted``): a training batch of 32 rows and an evaluation batch of 128,
each of mixed lengths up to 64 tokens, so that the batch is padded.

    python bench/collate_ops.py
    git worktree add /tmp/at-5528dc0 5528dc0
    PYTHONPATH=/tmp/at-5528dc0 python bench/collate_ops.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import electra_ablate
from electra_ablate.evaluation.finetune.batching import as_examples, collate
from electra_ablate.scaleout.node.measure import counted


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(128):
        length = int(rng.integers(8, 65))
        ids = [2, *rng.integers(5, 1000, size=length - 2).tolist(), 3]
        rows.append({"input_ids": ids, "token_type_ids": [0] * length, "label": i % 2})
    examples = as_examples(rows)
    print(f"electra_ablate from {Path(electra_ablate.__file__).parent}")
    for size in (32, 128):
        indices = np.arange(size)
        ops = counted(lambda indices=indices: collate(examples, indices)).summary()["ops"]
        print(f"collate of {size} rows: {ops:.0f} host operations")


if __name__ == "__main__":
    main()
