"""Metric functions, and the spread over fine-tuning seeds.

Every value is on the 0-100 scale GLUE papers print (CoLA 56.8, not 0.568), so a report can put
measured numbers beside the paper's without conversion. Which task reports which metric, and
which one is its headline, is the task's own declaration (``electra_ablate.evaluation``); these
are the functions tasks score with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    from sklearn.metrics import accuracy_score  # heavy: only where a score is computed

    return 100.0 * float(accuracy_score(labels, predictions))


def matthews(predictions: np.ndarray, labels: np.ndarray) -> float:
    from sklearn.metrics import matthews_corrcoef

    return 100.0 * float(matthews_corrcoef(labels, predictions))


def f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """F1 of the positive class (1), 0 when nothing is predicted positive."""
    from sklearn.metrics import f1_score

    return 100.0 * float(f1_score(labels, predictions, zero_division=0.0))


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return _correlation(spearmanr, predictions, labels)


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    from scipy.stats import pearsonr

    return _correlation(pearsonr, predictions, labels)


def _correlation(statistic, predictions: np.ndarray, labels: np.ndarray) -> float:
    """A correlation x100; 0 when either side is constant (undefined), as sklearn does for MCC.

    A collapsed model that predicts one score must not turn a whole study's GLUE score into NaN.
    """
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0
    return 100.0 * float(statistic(predictions, labels)[0])


def summarise_seeds(values: Sequence[float]) -> dict[str, float]:
    """Median (the headline, as the paper's median of 10 runs), extremes and quartiles."""
    if not values:
        raise ValueError("summarise_seeds needs at least one value")
    array = np.asarray(values, dtype=float)
    q1, median, q3 = np.percentile(array, [25, 50, 75])
    return {
        "median": float(median),
        "min": float(array.min()),
        "max": float(array.max()),
        "q1": float(q1),
        "q3": float(q3),
    }
