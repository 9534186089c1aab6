"""``bench/synthetic_rtd.py``: the chain task replaced tokens are detectable in only from their
neighbours, and the collapse figure (``h_pos_std``) the check reads beside the objective's own
metrics; run on ``micro`` for a few steps, as the bench runs it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).resolve().parents[2] / "bench" / "synthetic_rtd.py"
spec = importlib.util.spec_from_file_location("synthetic_rtd", PATH)
synthetic_rtd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(synthetic_rtd)

FEW = ["--preset", "micro", "--steps", "4", "--eval-every", "2", "--seq", "16", "--batch", "8"]


def test_every_sequence_follows_the_chain_between_cls_and_sep():
    chain = synthetic_rtd.Chain(n=20, branch=2)
    ids = chain.sample(6, 12, torch.Generator().manual_seed(0))
    special = synthetic_rtd.SPECIAL
    assert (ids[:, 0] == special.cls).all() and (ids[:, -1] == special.sep).all()
    body = ids[:, 1:-1] - chain.offset
    for row in body:
        for a, b in zip(row[:-1], row[1:], strict=True):
            assert b in chain.successors[a]  # a replaced token breaks this: the detectable signal


@pytest.mark.parametrize("objective", ["electra", "bert_mlm"])
def test_a_run_logs_its_metrics_and_the_spread_and_repeats_exactly(tmp_path, objective):
    out = tmp_path / "run.json"
    first = synthetic_rtd.main([*FEW, "--objective", objective, "--json-out", str(out)])
    again = synthetic_rtd.main([*FEW, "--objective", objective])
    assert [row["step"] for row in first["log"]] == [0, 2, 4]
    assert first["log"] == again["log"]  # seeded: the same figures every time
    headline = "disc_auc" if objective == "electra" else "mlm_masked_acc"
    assert all(headline in row and row["h_pos_std"] > 0 for row in first["log"])
    assert out.exists()
