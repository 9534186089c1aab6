"""What one linear-probe fit costs: scikit-learn (the probes' former solver) against the torch fit
of ``evaluation.probes.linear_probe``, in one process, on the same features.

Three shapes, each a full probe (the strength grid on the seeded validation fold, then the refit
on all rows, then the held-out predictions):

- ``rtd``: the replaced-token detection probe, 56,000 training tokens x 256 features, ~15%
  replaced, groups of 128 tokens (one sequence each), scored by ROC-AUC on 56,000 more tokens;
- ``cola``: a CoLA-sized binary probe, 8,551 x 256, ~70% positives, accuracy on 1,043;
- ``stsb``: an STS-B-sized ridge probe, 5,749 x 256, Pearson correlation on 1,500.

The features are seeded and LayerNorm-like (no kept encoder with weights ships with the
repository): a low-rank signal plus noise, a shared offset per group of rows, two
massive-activation units, normalised per row (zero mean and unit variance over the features),
an affine map, three near-constant units; the labels come from a linear model of the hidden
states. The reference is the probe as it was: ``StandardScaler`` then ``LogisticRegression``
(newton-cholesky) or ``Ridge`` at each strength, BLAS pinned to ``--threads``. Prints a table:
seconds on each side, the speed-up, the strength each picked and its metric (AUC or accuracy
x100, Pearson x100), so agreement is visible beside the cost.

    python bench/probe_fit.py --threads 1
    python bench/probe_fit.py --threads 1 --device cuda
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from electra_ablate.evaluation.probes.linear_probe import (
    LOGISTIC_C_GRID,
    MAX_ITER,
    RIDGE_ALPHA_GRID,
    detection_probe,
    logistic_probe,
    ridge_probe,
    validation_fold,
)


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "detection", "logistic" or "ridge"
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    groups: np.ndarray | None


def layernorm_features(
    n: int, dims: int, rng: np.random.Generator, group: int
) -> tuple[np.ndarray, np.ndarray]:
    """(features [n, dims] float32, hidden states [n, dims]): LayerNorm outputs of seeded hidden
    states (see the module docstring), and the states themselves, which the labels read."""
    rank = 16
    loadings = rng.normal(size=(rank, dims)) * np.linspace(3.0, 0.2, rank)[:, None]
    hidden = rng.normal(size=(n, rank)) @ loadings + 0.3 * rng.normal(size=(n, dims))
    offsets = rng.normal(size=(-(-n // group), rank)) @ loadings * 0.3
    hidden += np.repeat(offsets, group, axis=0)[:n]
    hidden[:, :2] += 30.0 + rng.normal(size=(n, 2))  # massive activations
    normed = hidden - hidden.mean(1, keepdims=True)
    normed /= np.sqrt((normed**2).mean(1, keepdims=True) + 1e-12)
    gamma, beta = rng.uniform(0.5, 1.5, dims), rng.normal(0.0, 0.1, dims)
    gamma[-3:] = 1e-6  # near-constant units
    return (normed * gamma + beta).astype(np.float32), hidden


def make_case(name: str, seed: int) -> Case:
    rng = np.random.default_rng(seed)
    n, n_test, kind, group, positives = {
        "rtd": (56_000, 56_000, "detection", 128, 0.15),
        "cola": (8_551, 1_043, "logistic", 1, 0.70),
        "stsb": (5_749, 1_500, "ridge", 1, None),
    }[name]
    x, hidden = layernorm_features(n + n_test, 256, rng, group)
    signal = hidden[:, 2:] @ rng.normal(size=hidden.shape[1] - 2)
    signal = 1.5 * (signal - signal.mean()) / signal.std()
    if positives is None:  # a similarity score in [0, 5], weakly linear in the states
        y = np.clip(2.5 + 0.6 * signal + rng.normal(size=len(x)) * 1.2, 0.0, 5.0)
    else:
        bias = -np.quantile(signal, 1.0 - positives)
        y = (rng.random(len(x)) < 1.0 / (1.0 + np.exp(-(signal + bias)))).astype(np.int64)
    groups = np.arange(n) // group if group > 1 else None
    return Case(name, kind, x[:n], y[:n], x[n:], y[n:], groups)


# ------------------------------------------------------------------- the former probe, sklearn
def sklearn_probe(case: Case, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(predictions, scores, strength): ``linear_probe`` as it was before its torch fit."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = case.train_x, case.train_y
    val = validation_fold(len(x), case.groups, seed)
    ridge = case.kind == "ridge"

    def model(strength: float):
        if ridge:
            return make_pipeline(StandardScaler(), Ridge(alpha=strength, random_state=seed))
        solver = "newton-cholesky" if len(np.unique(y)) == 2 else "lbfgs"
        fit = LogisticRegression(C=strength, solver=solver, max_iter=MAX_ITER, random_state=seed)
        return make_pipeline(StandardScaler(), fit)

    grid = RIDGE_ALPHA_GRID if ridge else LOGISTIC_C_GRID
    losses = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newton-cholesky's hand-over to lbfgs
        for strength in grid:
            fitted = model(strength).fit(x[~val], y[~val])
            if ridge:
                losses[strength] = float(np.mean((fitted.predict(x[val]) - y[val]) ** 2))
            else:
                proba = fitted.predict_proba(x[val])
                losses[strength] = log_loss(y[val], y_proba=proba, labels=np.unique(y))
        best = min(grid, key=lambda s: (losses[s], -s if ridge else s))
        fitted = model(best).fit(x, y)
    if ridge:
        predictions = fitted.predict(case.test_x)
        return predictions, predictions, best
    return fitted.predict(case.test_x), fitted.decision_function(case.test_x), best


def torch_probe(case: Case, seed: int, device: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(predictions, scores, strength) of ``linear_probe``, the features on ``device``."""
    x, test = torch.from_numpy(case.train_x).to(device), torch.from_numpy(case.test_x).to(device)
    if case.kind == "detection":
        _, fit = detection_probe(x, case.train_y, test, case.test_y, groups=case.groups, seed=seed)
    elif case.kind == "logistic":
        fit = logistic_probe(x, case.train_y, test, groups=case.groups, seed=seed)
    else:
        fit = ridge_probe(x, case.train_y, test, groups=case.groups, seed=seed)
    return fit.predictions, fit.scores, fit.strength


def metric(case: Case, predictions: np.ndarray, scores: np.ndarray) -> tuple[str, float]:
    if case.kind == "detection":
        from sklearn.metrics import roc_auc_score

        return "AUC", 100.0 * roc_auc_score(case.test_y, scores)
    if case.kind == "logistic":
        return "accuracy", 100.0 * float(np.mean(predictions == case.test_y))
    return "Pearson", 100.0 * float(np.corrcoef(predictions, case.test_y)[0, 1])


HEADER = (
    "case",
    "rows x feats",
    "sklearn s",
    "torch s",
    "speed-up",
    "strength sk / torch",
    "metric",
    "sklearn",
    "torch",
    "predictions agree",
)


def timed(fit: Callable[[], tuple[np.ndarray, np.ndarray, float]]):
    start = time.perf_counter()
    result = fit()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS threads")
    parser.add_argument("--device", default="cpu", help="where the torch fit runs")
    parser.add_argument("--seed", type=int, default=0, help="draws the validation fold")
    parser.add_argument("--cases", default="rtd,cola,stsb")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cases = [make_case(name, seed=index) for index, name in enumerate(args.cases.split(","))]
    with threadpool_limits(args.threads):
        warm = make_case("stsb", seed=99)  # one-time costs (imports, BLAS, CUDA) on neither side
        for kind in ("logistic", "ridge"):
            labels = warm.train_y > 2.5 if kind == "logistic" else warm.train_y
            small = Case("warm", kind, warm.train_x[:500], labels[:500], warm.test_x, labels, None)
            sklearn_probe(small, args.seed)
            torch_probe(small, args.seed, args.device)
        print(f"threads {args.threads}, torch fit on {args.device}, torch {torch.__version__}")
        print(" | ".join(HEADER))
        print(" | ".join("---" for _ in HEADER))
        for case in cases:
            sk_seconds, (sk_pred, sk_scores, sk_strength) = timed(
                lambda case=case: sklearn_probe(case, args.seed)
            )
            th_seconds, (th_pred, th_scores, th_strength) = timed(
                lambda case=case: torch_probe(case, args.seed, args.device)
            )
            name, sk_value = metric(case, sk_pred, sk_scores)
            _, th_value = metric(case, th_pred, th_scores)
            if case.kind == "ridge":
                agree = f"max |diff| {np.max(np.abs(sk_pred - th_pred)):.1e}"
            else:
                agree = f"{100.0 * np.mean(sk_pred == th_pred):.2f}%"
            row = (
                case.name,
                f"{case.train_x.shape[0]:,} x {case.train_x.shape[1]}",
                f"{sk_seconds:.2f}",
                f"{th_seconds:.2f}",
                f"{sk_seconds / th_seconds:.1f}x",
                f"{sk_strength:g} / {th_strength:g}",
                name,
                f"{sk_value:.2f}",
                f"{th_value:.2f}",
                agree,
            )
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
