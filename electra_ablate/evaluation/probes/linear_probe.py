"""Linear probes on frozen features: what a kept encoder's states make linearly readable.

A probe is a standardised linear model (logistic regression for classes, ridge regression for
scores) fitted on a training split and applied to a held-out one. Its regularisation is picked
from a small fixed grid on a seeded validation fold of the training split, by a task-agnostic
loss (log-loss, or squared error), then the probe is refitted on the whole training split: the
same procedure for every checkpoint, so a difference between checkpoints is a difference in
their features, not in hand-tuning. Everything is deterministic for a seed (Newton / lbfgs and
the closed-form ridge solve have no randomness; the seed only draws the validation fold).

Cost. Two-class probes use the exact Newton solver (``newton-cholesky``: 3 iterations where
lbfgs took 60-370 on CoLA's pooled features), more classes lbfgs's multinomial fit. Fits run on
``PROBE_BLAS_THREADS`` BLAS threads: on the 2 shared cores of this project's machine (load ~14)
a fit on CoLA's 8,551 x 256 features took 0.2-1.6 s on one thread and 2.4-41 s on two.

The probes return predictions; scoring them by a task's metric is the task's business. The one
exception is replaced-token detection, whose metric (ROC-AUC over the scored positions) is
returned here so every caller computes it the same way.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from electra_ablate.pretraining.components.losses import roc_auc

if TYPE_CHECKING:  # scikit-learn is imported where a probe is fitted: naming a probe stays quick
    from sklearn.pipeline import Pipeline

LOGISTIC_C_GRID: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
"""Inverse L2 strengths tried for logistic probes, strongest first. Features are standardised,
so one grid suits every encoder width. Nothing weaker than 1: LayerNorm outputs satisfy an exact
linear constraint (zero mean over the hidden units before the affine part), so only the penalty
keeps the problem well conditioned. On ``tiny`` encoders of the objectives study the validation
fold picked 0.001-0.01 for CoLA, MRPC, RTE and detection, 1 for SST-2's 67k examples."""

RIDGE_ALPHA_GRID: tuple[float, ...] = (1.0, 10.0, 100.0, 1e3, 1e4)
"""L2 strengths tried for ridge probes (on standardised features), strongest last. On STS-B's
5,749 examples the validation fold picked 1 (random ``tiny`` weights), 100 (ELECTRA 15% at half
the objectives budget) and 10,000 (BERT at the full budget): with little linear signal, heavier
shrinkage wins on squared error, and the predictions tend to the X'y direction, which still
ranks (a correlation metric is blind to their scale)."""

VALIDATION_FRACTION = 0.2
"""Share of the training split (of its groups, when given) held out to pick the strength."""

MAX_ITER = 1000
PROBE_BLAS_THREADS = 1


@dataclass(frozen=True)
class ProbeFit:
    """A probe's output on the held-out split and how its strength was chosen.

    ``predictions``: class ids (logistic) or values (ridge). ``scores``: the decision function,
    [n] for two classes (the logit of the larger class id), [n, classes] for more, the values
    themselves for ridge. ``validation_loss``: each tried strength's loss on the validation fold.
    """

    predictions: np.ndarray
    scores: np.ndarray
    strength: float
    validation_loss: dict[float, float] = field(default_factory=dict)


def validation_fold(n_rows: int, groups: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """[n_rows] bool, True for the seeded validation fold.

    With ``groups`` (e.g. the sequence each token came from), whole groups go to one side, so
    no validation token shares its sentence with a fitting token.
    """
    rng = np.random.default_rng(seed)
    if groups is None:
        groups = np.arange(n_rows)
    unique = np.unique(groups)
    n_val = min(max(1, round(len(unique) * VALIDATION_FRACTION)), len(unique) - 1)
    return np.isin(groups, rng.permutation(unique)[:n_val])


def _logistic(strength: float, n_classes: int, seed: int) -> Pipeline:
    from sklearn.linear_model import LogisticRegression  # heavy: imported where a probe fits
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    solver = "newton-cholesky" if n_classes == 2 else "lbfgs"
    model = LogisticRegression(C=strength, solver=solver, max_iter=MAX_ITER, random_state=seed)
    return make_pipeline(StandardScaler(), model)


def _ridge(strength: float, seed: int) -> Pipeline:
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), Ridge(alpha=strength, random_state=seed))


def _as_numpy(x: np.ndarray | torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def logistic_probe(
    train_x: np.ndarray | torch.Tensor,
    train_y: np.ndarray | torch.Tensor,
    test_x: np.ndarray | torch.Tensor,
    *,
    groups: np.ndarray | None = None,
    seed: int = 0,
    grid: tuple[float, ...] = LOGISTIC_C_GRID,
) -> ProbeFit:
    """Standardise, fit L2 logistic regression at the strength with the lowest validation
    log-loss (ties: the stronger penalty), refit on all of ``train_x``, predict ``test_x``."""
    from scipy.linalg import LinAlgWarning
    from sklearn.metrics import log_loss

    x, y, test = _as_numpy(train_x), _as_numpy(train_y).astype(np.int64), _as_numpy(test_x)
    classes = np.unique(y)
    if len(classes) < 2:
        raise ValueError("a logistic probe needs at least two classes in its training split")
    val = validation_fold(len(x), groups, seed)
    losses: dict[float, float] = {}
    with threadpool_limits(PROBE_BLAS_THREADS), warnings.catch_warnings():
        # newton-cholesky hands over to lbfgs by design when the penalised Hessian is still
        # ill-conditioned (the LayerNorm constraint above); its warning says only that.
        warnings.simplefilter("ignore", LinAlgWarning)
        for c in grid:
            model = _logistic(c, len(classes), seed).fit(x[~val], y[~val])
            losses[c] = float(log_loss(y[val], model.predict_proba(x[val]), labels=classes))
        best = min(grid, key=lambda c: (losses[c], c))
        model = _logistic(best, len(classes), seed).fit(x, y)
    return ProbeFit(model.predict(test), model.decision_function(test), best, losses)


def ridge_probe(
    train_x: np.ndarray | torch.Tensor,
    train_y: np.ndarray | torch.Tensor,
    test_x: np.ndarray | torch.Tensor,
    *,
    groups: np.ndarray | None = None,
    seed: int = 0,
    grid: tuple[float, ...] = RIDGE_ALPHA_GRID,
) -> ProbeFit:
    """Standardise, fit ridge regression at the strength with the lowest validation squared
    error (ties: the stronger penalty), refit on all of ``train_x``, predict ``test_x``."""
    x, y, test = _as_numpy(train_x), _as_numpy(train_y).astype(np.float64), _as_numpy(test_x)
    val = validation_fold(len(x), groups, seed)
    losses: dict[float, float] = {}
    with threadpool_limits(PROBE_BLAS_THREADS):
        for alpha in grid:
            model = _ridge(alpha, seed).fit(x[~val], y[~val])
            losses[alpha] = float(np.mean((model.predict(x[val]) - y[val]) ** 2))
        best = min(grid, key=lambda a: (losses[a], -a))
        predictions = _ridge(best, seed).fit(x, y).predict(test)
    return ProbeFit(predictions, predictions, best, losses)


def detection_probe(
    train_x: np.ndarray | torch.Tensor,
    train_replaced: np.ndarray | torch.Tensor,
    test_x: np.ndarray | torch.Tensor,
    test_replaced: np.ndarray | torch.Tensor,
    *,
    groups: np.ndarray | None = None,
    seed: int = 0,
) -> tuple[float, ProbeFit]:
    """Replaced-token detection from frozen token features: a logistic probe fitted on the
    training split's tokens (features [M, H], labels [M]), and its ROC-AUC on the test split's.

    Pass only the tokens detection is scored over (the replaceable ones,
    ``CorruptedText.replaceable``), and as ``groups`` the sequence each training token comes
    from, so the strength is validated on unseen sequences.
    """
    fit = logistic_probe(train_x, train_replaced, test_x, groups=groups, seed=seed)
    labels = torch.as_tensor(_as_numpy(test_replaced)).bool()
    scores = torch.from_numpy(np.asarray(fit.scores, dtype=np.float64))
    return float(roc_auc(scores, labels, torch.ones_like(labels))), fit
