"""Linear probes: deterministic, and they find a linear signal when there is one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from electra_ablate.evaluation.probes.linear_probe import (
    LOGISTIC_C_GRID,
    RIDGE_ALPHA_GRID,
    detection_probe,
    logistic_probe,
    ridge_probe,
    validation_fold,
)


def separable(n: int, dims: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian features on wildly different scales, labelled by a hyperplane."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dims)) * np.logspace(-2, 2, dims)
    w = np.random.default_rng(99).normal(size=dims) / np.logspace(-2, 2, dims)
    return x.astype(np.float32), (x @ w > 0).astype(np.int64)


def test_logistic_probe_recovers_a_separable_signal_deterministically():
    x, y = separable(900)
    fit = logistic_probe(x[:600], y[:600], x[600:], seed=0)
    assert (fit.predictions == y[600:]).mean() > 0.95
    assert fit.scores.shape == (300,)
    assert fit.strength in LOGISTIC_C_GRID and set(fit.validation_loss) == set(LOGISTIC_C_GRID)
    again = logistic_probe(torch.from_numpy(x[:600]), torch.from_numpy(y[:600]), x[600:], seed=0)
    np.testing.assert_array_equal(fit.scores, again.scores)
    np.testing.assert_array_equal(fit.predictions, again.predictions)


def test_logistic_probe_handles_more_than_two_classes():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    x = rng.normal(size=(600, 5)) + 3.0 * np.eye(5)[y]
    fit = logistic_probe(x[:400], y[:400], x[400:])
    assert fit.scores.shape == (200, 3)
    assert (fit.predictions == y[400:]).mean() > 0.9
    with pytest.raises(ValueError, match="two classes"):
        logistic_probe(x[:10], np.zeros(10), x[10:20])


def test_ridge_probe_recovers_a_linear_target():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(800, 10)) * 50.0
    y = x @ rng.normal(size=10) + rng.normal(size=800) * 5.0
    fit = ridge_probe(x[:500], y[:500], x[500:])
    assert np.corrcoef(fit.predictions, y[500:])[0, 1] > 0.95
    assert fit.strength in RIDGE_ALPHA_GRID
    np.testing.assert_array_equal(fit.predictions, ridge_probe(x[:500], y[:500], x[500:]).scores)


def test_detection_probe_auc_is_one_on_a_separable_signal_and_chance_on_noise():
    x, y = separable(1200)
    groups = np.repeat(np.arange(100), 6)  # 6 "tokens" per "sequence"
    auc, _ = detection_probe(x[:600], y[:600], x[600:], y[600:], groups=groups)
    assert auc > 0.99
    noise = np.random.default_rng(5).integers(0, 2, 1200)
    chance, _ = detection_probe(x[:600], noise[:600], x[600:], torch.from_numpy(noise[600:]))
    assert chance == pytest.approx(0.5, abs=0.08)


def test_validation_fold_is_seeded_and_keeps_groups_whole():
    groups = np.repeat(np.arange(50), 4)
    fold = validation_fold(len(groups), groups, seed=1)
    assert fold.sum() == 40  # 20% of 50 groups, 4 rows each
    for group in range(50):
        assert len(set(fold[groups == group])) == 1
    np.testing.assert_array_equal(fold, validation_fold(len(groups), groups, seed=1))
    assert not np.array_equal(fold, validation_fold(len(groups), groups, seed=2))
    assert validation_fold(10).sum() == 2
