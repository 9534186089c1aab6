"""The report's measured ordering writes ties as ties: two neighbours whose scores read the
same as printed are joined by ``=``, never by a ``>`` the figures beside it do not show."""

from __future__ import annotations

import polars as pl

from electra_ablate.report import verdicts

HEADING = "**Measured ordering** (median GLUE per model at 100% of the budget"


def values(scores: dict[str, list[float]]) -> pl.DataFrame:
    """One task; each label's models (one pre-training seed, fine-tuning seeds 0, 1, …)."""
    rows = [
        {"label": label, "pretrain_seed": 0, "finetune_seed": i, "task": "rte", "value": v}
        for label, models in scores.items()
        for i, v in enumerate(models)
    ]
    return pl.DataFrame(rows)


def ordering_line(scores: dict[str, list[float]]) -> str:
    comparison = verdicts.compare(values(scores))
    text, _ = verdicts.ordering(list(scores), comparison, HEADING)
    return text.splitlines()[0]


def test_an_exact_tie_of_single_models_is_written_with_an_equals_sign():
    line = ordering_line({"bert_mlm": [59.2], "electra": [59.2]})
    assert "bert_mlm 59.2 = electra 59.2." in line, line
    assert ">" not in line.split(": ", 1)[1], line


def test_an_exact_tie_with_intervals_is_written_with_an_equals_sign():
    line = ordering_line({"bert_mlm": [59.2, 59.2, 59.2], "electra": [59.2, 59.2, 59.2]})
    assert "bert_mlm 59.2 [59.2, 59.2] = electra 59.2 [59.2, 59.2]." in line, line


def test_scores_equal_at_the_printed_decimal_are_a_tie_and_others_keep_their_order():
    line = ordering_line({"a": [80.0], "b": [75.04], "c": [74.96], "d": [70.0]})
    assert line.endswith(": a 80.0 > b 75.0 = c 75.0 > d 70.0."), line


def test_distinct_scores_keep_the_strict_order():
    line = ordering_line({"electra": [61.0, 62.0, 63.0], "bert_mlm": [58.0, 59.0, 60.0]})
    assert " > " in line and " = " not in line, line
    assert line.index("electra") < line.index("bert_mlm")


def test_the_steps_below_the_line_still_read_each_tie_from_its_difference_ci():
    comparison = verdicts.compare(values({"x": [50.0, 51.0, 52.0], "y": [50.0, 51.0, 52.0]}))
    text, diffs = verdicts.ordering(["x", "y"], comparison, HEADING)
    assert "x 51.0" in text and " = y 51.0" in text, text
    assert [(d.label_a, d.label_b) for d in diffs] == [("x", "y")]
    assert "unresolved" in text.splitlines()[1], text
