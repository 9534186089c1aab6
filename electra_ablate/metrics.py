"""GLUE metrics as the ELECTRA paper reports them, and the spread over fine-tuning seeds.

Every value is on the 0-100 scale GLUE papers print (CoLA 56.8, not 0.568), so a report can put
measured numbers beside the paper's without conversion. Headline metrics follow the paper's dev
tables: Matthews correlation for CoLA, Spearman for STS-B, accuracy everywhere else (MRPC and
QQP also get F1, MNLI is scored on its matched dev set). Metric names match the ``metric`` field
of the GLUE task table in ``electra_ablate.data.glue``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

_HEADLINE = {"cola": "matthews", "stsb": "spearman"}
_WITH_F1 = {"mrpc", "qqp"}
_EXCLUDED_FROM_SCORE = {"wnli"}


def headline_metric(task: str) -> str:
    """The one number per task that enters the GLUE score."""
    return _HEADLINE.get(task, "accuracy")


def task_metrics(task: str, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """All metrics of one task: ``predictions`` are class ids, or scores for STS-B."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if task == "stsb":
        return {
            "spearman": _correlation(spearmanr, predictions, labels),
            "pearson": _correlation(pearsonr, predictions, labels),
        }
    metrics = {"accuracy": 100.0 * accuracy_score(labels, predictions)}
    if task == "cola":
        metrics["matthews"] = 100.0 * matthews_corrcoef(labels, predictions)
    if task in _WITH_F1:
        metrics["f1"] = 100.0 * f1_score(labels, predictions, zero_division=0.0)
    return metrics


def _correlation(statistic, predictions: np.ndarray, labels: np.ndarray) -> float:
    """A correlation x100; 0 when either side is constant (undefined), as sklearn does for MCC.

    A collapsed model that predicts one score must not turn a whole study's GLUE score into NaN.
    """
    if np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0
    return 100.0 * float(statistic(predictions, labels)[0])


def glue_score(per_task_headline: Mapping[str, float], include_wnli: bool = False) -> float:
    """Mean of the headline metrics; WNLI is left out by default, as the ELECTRA paper does
    (its dev set is adversarial to every model and only adds noise to the average)."""
    scored = [
        value
        for task, value in per_task_headline.items()
        if include_wnli or task not in _EXCLUDED_FROM_SCORE
    ]
    if not scored:
        raise ValueError("glue_score needs at least one task besides WNLI")
    return float(np.mean(scored))


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
