import math

import numpy as np
import pytest

from electra_ablate.evaluation import metrics
from electra_ablate.evaluation.glue.task import GLUE, GLUE_TASKS
from electra_ablate.evaluation.metrics import summarise_seeds


def task_metrics(task: str, predictions, labels) -> dict[str, float]:
    return GLUE_TASKS[task].score(predictions, labels)


def test_cola_matthews_matches_a_hand_computed_confusion_matrix():
    # TP=3, TN=2, FP=1, FN=1: MCC = (3*2 - 1*1) / sqrt(4*4*3*3) = 5/12
    labels = np.array([1, 1, 1, 1, 0, 0, 0])
    predictions = np.array([1, 1, 1, 0, 0, 0, 1])
    metrics = task_metrics("cola", predictions, labels)
    assert metrics["matthews"] == pytest.approx(100 * 5 / 12)
    assert metrics["accuracy"] == pytest.approx(100 * 5 / 7)


def test_mrpc_reports_accuracy_and_f1():
    labels = np.array([1, 1, 1, 1, 0, 0, 0])
    predictions = np.array([1, 1, 1, 0, 0, 0, 1])
    metrics = task_metrics("mrpc", predictions, labels)
    # precision 3/4, recall 3/4 -> F1 3/4
    assert metrics == pytest.approx({"accuracy": 100 * 5 / 7, "f1": 75.0})
    assert "f1" not in task_metrics("rte", predictions, labels)
    assert "f1" in task_metrics("qqp", predictions, labels)


def test_stsb_spearman_and_pearson():
    labels = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    # monotone but not linear: Spearman 1, Pearson < 1
    predictions = np.array([0.0, 0.1, 0.2, 0.3, 10.0])
    metrics = task_metrics("stsb", predictions, labels)
    assert metrics["spearman"] == pytest.approx(100.0)
    assert 0 < metrics["pearson"] < 100
    # one swapped pair among 4 ranks: rho = 1 - 6*2 / (4*15) = 0.8
    swapped = task_metrics("stsb", np.array([1.0, 2.0, 4.0, 3.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert swapped["spearman"] == pytest.approx(80.0)


def test_constant_regression_output_scores_zero_not_nan():
    metrics = task_metrics("stsb", np.full(4, 2.5), np.array([1.0, 2.0, 3.0, 4.0]))
    assert metrics == {"spearman": 0.0, "pearson": 0.0}


def test_headline_metrics_follow_the_paper():
    assert GLUE_TASKS["cola"].headline == "matthews"
    assert GLUE_TASKS["stsb"].headline == "spearman"
    names = ("mrpc", "qqp", "mnli", "sst2", "rte")
    assert [GLUE_TASKS[t].headline for t in names] == ["accuracy"] * 5


def test_the_glue_score_leaves_wnli_out_and_only_wnli():
    assert [t.name for t in GLUE.tasks() if not GLUE.in_aggregate(t)] == ["wnli"]


def test_summarise_seeds():
    summary = summarise_seeds([5.0, 1.0, 3.0, 2.0, 4.0])
    assert summary == {"median": 3.0, "min": 1.0, "max": 5.0, "q1": 2.0, "q3": 4.0}
    even = summarise_seeds([1.0, 2.0])
    assert even["median"] == 1.5 and not math.isnan(even["q1"])
    with pytest.raises(ValueError):
        summarise_seeds([])


def test_every_glue_task_scores_exactly_the_metrics_it_declares():
    labels = np.array([0, 1, 1, 0, 1])
    for task in GLUE_TASKS.values():
        predictions = np.array([0.0, 1.0, 0.5, 0.2, 1.0]) if task.is_regression else labels[::-1]
        assert set(task.score(predictions, labels)) == set(task.metrics), task.name


def _cases(seed: int):
    """Random label/prediction pairs of every shape the GLUE tasks give: two and three classes,
    balanced or one-sided, with and without ties, down to two examples."""
    rng = np.random.default_rng(seed)
    for n in (2, 3, 7, 64, 501):
        for classes in (2, 3):
            labels = rng.integers(0, classes, n)
            yield labels, rng.integers(0, classes, n)
            yield labels, labels.copy()  # perfect
            yield labels, np.zeros(n, dtype=int)  # one class predicted
            yield np.ones(n, dtype=int), rng.integers(0, classes, n)  # one class labelled


@pytest.mark.filterwarnings("ignore:A single label was found")  # the one-class cases
@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_equal_scikit_learns(seed):
    sk = pytest.importorskip("sklearn.metrics")
    for labels, predictions in _cases(seed):
        assert metrics.accuracy(predictions, labels) == pytest.approx(
            100 * sk.accuracy_score(labels, predictions), abs=1e-9
        )
        assert metrics.matthews(predictions, labels) == pytest.approx(
            100 * sk.matthews_corrcoef(labels, predictions), abs=1e-9
        )
        if set(np.unique(np.r_[labels, predictions])) <= {0, 1}:
            expected = sk.f1_score(labels, predictions, zero_division=0.0)
            assert metrics.f1(predictions, labels) == pytest.approx(100 * expected, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_correlations_equal_scipys_with_and_without_ties(seed):
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(seed)
    for n in (3, 5, 40, 1500):
        labels = rng.uniform(0, 5, n)
        for predictions in (
            labels + rng.normal(0, 1, n),
            np.round(rng.uniform(0, 5, n), 0),  # many ties (STS-B's labels come in steps)
            -labels,
        ):
            tied = np.round(labels * 5) / 5
            for truth in (labels, tied):
                assert metrics.pearson(predictions, truth) == pytest.approx(
                    100 * stats.pearsonr(predictions, truth)[0], abs=1e-9
                )
                assert metrics.spearman(predictions, truth) == pytest.approx(
                    100 * stats.spearmanr(predictions, truth)[0], abs=1e-9
                )
