"""The collapse monitor: the kept encoder's spread across positions and a detection head's
statistics, in every run's logs, and the one-line warning when a threshold is crossed."""

from __future__ import annotations

import json

import pytest
import torch
from engine_helpers import make_trainer
from objective_names import BUILT_IN

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import TokenBinaryHead
from electra_ablate.pretraining.components.monitor import (
    INACTIVE_BELOW,
    encoder_spread,
    head_stats,
    real_positions,
)
from electra_ablate.pretraining.metric_names import (
    COLLAPSE_SIGNALS,
    collapse_warnings,
    metric_kind,
)


def test_encoder_spread_is_zero_when_every_position_has_the_same_state():
    torch.manual_seed(0)
    state = torch.randn(1, 1, 8)
    same = state.expand(3, 5, 8).clone()
    mask = torch.ones(3, 5, dtype=torch.bool)
    assert encoder_spread(same, mask).item() == pytest.approx(0.0, abs=1e-6)
    assert encoder_spread(torch.randn(3, 5, 8), mask).item() > 0.5


def test_encoder_spread_ignores_pad_positions():
    torch.manual_seed(0)
    hidden = torch.randn(2, 6, 8)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    moved = hidden.clone()
    moved[~mask] = 100.0 * torch.randn(int((~mask).sum()), 8)  # only the padding changes
    assert encoder_spread(moved, mask).item() == pytest.approx(encoder_spread(hidden, mask).item())
    collapsed = hidden[:, :1].expand(2, 6, 8).clone()
    collapsed[~mask] = torch.randn(int((~mask).sum()), 8)  # real positions alike, pads not
    assert encoder_spread(collapsed, mask).item() == pytest.approx(0.0, abs=1e-6)


def test_real_positions_are_the_attention_mask_or_every_position():
    ids = torch.tensor([[2, 7, 3, 0]])
    assert real_positions({"input_ids": ids}).all()
    mask = ids != 0
    assert torch.equal(real_positions({"input_ids": ids, "attention_mask": mask}), mask)


def test_head_stats_on_crafted_tensors():
    pre = torch.full((1, 4, 2), 1.0)
    pre[0, 0, :] = INACTIVE_BELOW - 1  # both units of position 0 inactive
    pre[0, 3, :] = INACTIVE_BELOW - 1  # position 3 is masked out: not counted
    logits = torch.tensor([[1.0, 3.0, 1.0, 100.0]])
    mask = torch.tensor([[True, True, True, False]])
    stats = head_stats(pre, logits, mask, "disc_head")
    assert set(stats) == {"disc_head_inactive", "disc_head_logit_spread"}
    assert stats["disc_head_inactive"].item() == pytest.approx(2 / 6)
    # logits 1, 3, 1 at the marked positions: mean 5/3, std sqrt(8/9)
    assert stats["disc_head_logit_spread"].item() == pytest.approx((8 / 9) ** 0.5)
    constant = head_stats(pre, torch.full((1, 4), -1.7), mask, "disc_head")
    assert constant["disc_head_logit_spread"].item() == pytest.approx(0.0, abs=1e-6)


def test_the_binary_heads_states_are_its_forward_from_one_pass():
    cfg = preset("micro")
    head = TokenBinaryHead(cfg)
    hidden = torch.randn(2, 5, cfg.hidden_size)
    pre, logits = head.states(hidden)
    assert torch.equal(logits, head(hidden))
    assert torch.equal(pre, head.dense(hidden))


def test_every_signal_is_a_named_metric_of_a_kind():
    for signal in COLLAPSE_SIGNALS:
        assert metric_kind(signal.metric) is not None, signal.metric


def collapsed_row() -> dict:
    """A held-out row on the collapse side of every signal."""
    row = {"step": 300, "split": "heldout", "disc_auc": 0.5}
    for s in COLLAPSE_SIGNALS:
        row[s.metric] = s.threshold / 10 if s.below else min(1.0, s.threshold + 0.04)
    return row


def healthy_row() -> dict:
    row = {"step": 300, "split": "heldout", "disc_auc": 0.8}
    for s in COLLAPSE_SIGNALS:
        row[s.metric] = s.threshold * 10 if s.below else s.threshold / 10
    return row


def test_a_crossed_threshold_gives_one_line_per_signal_once_and_a_healthy_row_none():
    warned: set[str] = set()
    assert collapse_warnings(healthy_row(), warned) == [] and not warned
    lines = collapse_warnings(collapsed_row(), warned)
    assert len(lines) == len(COLLAPSE_SIGNALS)
    for signal, line in zip(COLLAPSE_SIGNALS, lines, strict=True):
        assert line.startswith(f"{signal.metric} = ") and "step 300 (heldout)" in line
        assert "pretrain.warmup_fraction" in line and "pretrain.learning_rate" in line
        assert "\n" not in line
    assert collapse_warnings(collapsed_row(), warned) == []  # said once per run
    # a row without the metrics (an objective with no detector), or a null value: nothing
    assert collapse_warnings({"step": 1, "split": "heldout", "enc_spread": None}, set()) == []


def test_the_trainer_warns_once_on_stderr_and_goes_on(tmp_path, capsys):
    trainer = make_trainer(tmp_path, "bert_mlm", steps_of_budget=2)
    trainer.watch_collapse(collapsed_row())
    trainer.watch_collapse(collapsed_row())
    err = capsys.readouterr().err.splitlines()
    assert len(err) == len(COLLAPSE_SIGNALS)
    assert all(line.startswith("warning: ") for line in err)
    trainer.watch_collapse(healthy_row())
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_objective_logs_the_monitor_in_train_and_heldout_rows(tmp_path, name):
    """``enc_spread`` of the kept encoder in every objective's rows; a detector's head
    statistics wherever the objective logs a detection AUC."""
    trainer = make_trainer(tmp_path, name, steps_of_budget=4, log_every=1)
    trainer.train()
    rows = [json.loads(line) for line in trainer.run.layout.metrics.read_text().splitlines()]
    detector = any("disc_auc" in row for row in rows)
    for split in ("train", "heldout"):
        last = [row for row in rows if row["split"] == split][-1]
        assert 0.0 < last["enc_spread"] < 2.0, (split, last)
        if detector:
            assert 0.0 <= last["disc_head_inactive"] <= 1.0
            assert last["disc_head_logit_spread"] > 0.0
