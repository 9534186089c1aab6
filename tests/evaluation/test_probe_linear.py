"""Linear probes: deterministic, they find a linear signal when there is one, and they solve
scikit-learn's problems (its answers are the reference, built here)."""

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

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny fits: two threads only contend


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


# ------------------------------------------------- against scikit-learn, the problem it defines
def layernorm_like(n: int, dims: int = 24, seed: int = 0) -> np.ndarray:
    """Features as ill-conditioned as LayerNorm outputs: every row sums to exactly zero over
    the features (small multiples of 1/4, exact in float32), so the standardised columns are
    exactly collinear; three columns are near-constant (0.5, a few rows 2^-16 off), one is
    constant."""
    rng = np.random.default_rng(seed)
    z = (rng.integers(-3, 4, size=(n, dims)) + rng.integers(-2, 3, size=(n, 1))) / 4.0
    z[:, 1:4] = 0.5 + (rng.random((n, 3)) < 0.02) * 2.0**-16
    z[:, 4] = 0.25
    z[:, -1] = -z[:, :-1].sum(1)
    x = z.astype(np.float32)
    assert np.all(x.astype(np.float64).sum(1) == 0.0)
    return x


def reference_fit(kind: str, x: np.ndarray, y: np.ndarray, val: np.ndarray):
    """The probe as it was before its torch fit: StandardScaler + LogisticRegression
    (newton-cholesky for two classes, lbfgs for more) or Ridge, each strength fitted on the
    fitting rows and scored on ``val``, the best refitted on all rows; returns (model,
    strength, validation losses)."""
    import warnings

    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def model(strength: float):
        if kind == "ridge":
            return make_pipeline(StandardScaler(), Ridge(alpha=strength))
        solver = "newton-cholesky" if len(np.unique(y)) == 2 else "lbfgs"
        return make_pipeline(
            StandardScaler(), LogisticRegression(C=strength, solver=solver, max_iter=1000)
        )

    grid = RIDGE_ALPHA_GRID if kind == "ridge" else LOGISTIC_C_GRID
    losses = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newton-cholesky's hand-over to lbfgs, in float32
        for strength in grid:
            fitted = model(strength).fit(x[~val], y[~val])
            if kind == "ridge":
                losses[strength] = float(np.mean((fitted.predict(x[val]) - y[val]) ** 2))
            else:
                proba = fitted.predict_proba(x[val])
                losses[strength] = log_loss(y[val], y_proba=proba, labels=np.unique(y))
        sign = -1 if kind == "ridge" else 1
        best = min(grid, key=lambda s: (losses[s], sign * s))
        return model(best).fit(x, y), best, losses


def auc100(scores: np.ndarray, labels: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return 100.0 * roc_auc_score(labels, scores)


# 48 features, 1,200 fitting rows, a weak signal: each problem's validation fold picks a strength
# inside its grid, by a margin far above the two solvers' differences.
def test_binary_logistic_probe_matches_scikit_learn_on_layernorm_like_features():
    x = layernorm_like(1800, dims=48)
    logit = x @ np.random.default_rng(1).normal(size=48) * 0.15 - 0.5
    y = np.where(np.random.default_rng(2).random(len(x)) < 1 / (1 + np.exp(-logit)), 7, 2)
    fit = logistic_probe(x[:1200], y[:1200], x[1200:], seed=3)
    fold = validation_fold(1200, seed=3)
    model, best, losses = reference_fit("logistic", x[:1200], y[:1200], fold)
    assert fit.strength == best == 0.01
    for c in LOGISTIC_C_GRID:
        assert fit.validation_loss[c] == pytest.approx(losses[c], rel=1e-3)
    reference = model.decision_function(x[1200:])
    assert set(np.unique(fit.predictions)) == {2, 7}  # the labels themselves, not indices
    assert (fit.predictions == model.predict(x[1200:])).mean() >= 0.99
    np.testing.assert_allclose(fit.scores, reference, atol=0.01)
    truth = y[1200:] == 7
    assert auc100(fit.scores, truth) == pytest.approx(auc100(reference, truth), abs=0.5)


def test_multinomial_logistic_probe_matches_scikit_learn_on_layernorm_like_features():
    x = layernorm_like(1800, dims=48, seed=4)
    rng = np.random.default_rng(5)
    logits = x @ rng.normal(size=(48, 3)) * 0.15
    y = np.array([3, 5, 9])[(logits + rng.gumbel(size=logits.shape)).argmax(1)]
    fit = logistic_probe(x[:1200], y[:1200], x[1200:], seed=6)
    model, best, losses = reference_fit(
        "logistic", x[:1200], y[:1200], validation_fold(1200, seed=6)
    )
    assert fit.strength == best == 0.01
    for c in LOGISTIC_C_GRID:
        assert fit.validation_loss[c] == pytest.approx(losses[c], rel=1e-3)
    assert fit.scores.shape == (600, 3)
    assert (fit.predictions == model.predict(x[1200:])).mean() >= 0.99
    np.testing.assert_allclose(fit.scores, model.decision_function(x[1200:]), atol=0.01)
    accuracy = 100 * (fit.predictions == y[1200:]).mean()
    assert accuracy == pytest.approx(100 * (model.predict(x[1200:]) == y[1200:]).mean(), abs=0.5)


def test_ridge_probe_matches_scikit_learn_on_layernorm_like_features():
    x = layernorm_like(1800, dims=48, seed=0)
    rng = np.random.default_rng(8)
    y = x @ rng.normal(size=48) * 0.15 + rng.normal(size=len(x)) * 3.0
    fit = ridge_probe(x[:1200], y[:1200], x[1200:], seed=9)
    model, best, losses = reference_fit("ridge", x[:1200], y[:1200], validation_fold(1200, seed=9))
    assert fit.strength == best == 1000.0
    for alpha in RIDGE_ALPHA_GRID:
        assert fit.validation_loss[alpha] == pytest.approx(losses[alpha], rel=1e-5)
    np.testing.assert_allclose(fit.predictions, model.predict(x[1200:]), atol=1e-4)


def test_detection_probe_auc_matches_scikit_learn_on_layernorm_like_features():
    x = layernorm_like(3000, dims=48, seed=10)
    logit = x @ np.random.default_rng(11).normal(size=48) * 0.25 - 2.5  # ~15% replaced
    replaced = np.random.default_rng(12).random(len(x)) < 1 / (1 + np.exp(-logit))
    groups = np.arange(2000) // 20  # 20 "tokens" per "sequence"
    auc, fit = detection_probe(x[:2000], replaced[:2000], x[2000:], replaced[2000:], groups=groups)
    labels = replaced[:2000].astype(np.int64)
    model, best, _ = reference_fit("logistic", x[:2000], labels, validation_fold(2000, groups))
    assert fit.strength == best == 0.01
    reference = auc100(model.decision_function(x[2000:]), replaced[2000:])
    assert 100 * auc == pytest.approx(reference, abs=0.5)


@pytest.mark.parametrize("kind", ["binary", "multinomial", "ridge"])
def test_tensor_and_numpy_inputs_give_identical_deterministic_fits(kind):
    x = layernorm_like(900, seed=13)
    rng = np.random.default_rng(14)
    signal = x @ rng.normal(size=(x.shape[1], 3))
    if kind == "ridge":
        probe, y = ridge_probe, signal[:, 0] + rng.normal(size=len(x))
    else:
        probe = logistic_probe
        classes = 2 if kind == "binary" else 3
        y = (signal[:, :classes] + rng.gumbel(size=(len(x), classes))).argmax(1)
    groups = np.arange(600) // 6
    fits = [
        probe(x[:600], y[:600], x[600:], groups=groups, seed=1),
        probe(x[:600], y[:600], x[600:], groups=groups, seed=1),
        probe(
            torch.from_numpy(x[:600]),
            torch.from_numpy(y[:600]),
            torch.from_numpy(x[600:]),
            groups=groups,
            seed=1,
        ),
    ]
    for other in fits[1:]:
        np.testing.assert_array_equal(fits[0].predictions, other.predictions)
        np.testing.assert_array_equal(fits[0].scores, other.scores)
        assert fits[0].strength == other.strength
        assert fits[0].validation_loss == other.validation_loss
    assert isinstance(fits[2].scores, np.ndarray) and isinstance(fits[2].predictions, np.ndarray)
