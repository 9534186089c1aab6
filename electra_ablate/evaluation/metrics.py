"""Metric functions, and the spread over fine-tuning seeds.

Every value is on the 0-100 scale GLUE papers print (CoLA 56.8, not 0.568), so a report can put
measured numbers beside the paper's without conversion. Which task reports which metric, and
which one is its headline, is the task's own declaration (``electra_ablate.evaluation``); these
are the functions tasks score with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# The five GLUE metrics are closed formulas, written here in numpy rather than imported from
# scikit-learn and scipy.stats: those two cost about 1.8 s to import, in every process that
# fine-tunes. tests/evaluation/test_metrics.py checks each against the libraries' own.


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    return 100.0 * float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def matthews(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews' correlation, in its multi-class form (for two classes, the usual phi
    coefficient); 0 when either side holds one class only (undefined), as scikit-learn does."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    classes, index = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    truth, guess = index[: len(labels)], index[len(labels) :]
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (truth, guess), 1.0)
    true_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, total = np.trace(confusion), confusion.sum()
    covariance = correct * total - true_counts @ predicted_counts
    spread = (total**2 - predicted_counts @ predicted_counts) * (
        total**2 - true_counts @ true_counts
    )
    return 0.0 if spread == 0 else 100.0 * float(covariance / np.sqrt(spread))


def f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """F1 of the positive class (1), 0 when nothing is predicted or labelled positive."""
    predicted, actual = np.asarray(predictions) == 1, np.asarray(labels) == 1
    true_positives = float(np.sum(predicted & actual))
    denominator = float(np.sum(predicted) + np.sum(actual))
    return 0.0 if denominator == 0 else 100.0 * 2.0 * true_positives / denominator


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    return float(np.dot(x, y) / np.sqrt(np.dot(x, x) * np.dot(y, y)))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # first of each tie run
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    return _correlation(
        lambda x, y: _pearson(_average_ranks(x), _average_ranks(y)), predictions, labels
    )


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    return _correlation(_pearson, predictions, labels)


def _correlation(statistic, predictions: np.ndarray, labels: np.ndarray) -> float:
    """A correlation x100; 0 when either side is constant (undefined), as for MCC.

    A collapsed model that predicts one score must not turn a whole study's GLUE score into NaN.
    """
    predictions = np.asarray(predictions, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    if np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0
    return 100.0 * statistic(predictions, labels)


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
