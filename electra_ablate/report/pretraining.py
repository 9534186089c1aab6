"""The report's pre-training section: whether each model learnt anything, and when.

Which metrics appear, as panels and as columns, is read from their kinds (the objective
contract's metric-naming convention, ``objective.metric_kind``), never from a list of particular
objectives' names: a new objective's metrics reach the report by being named (or declared) by
kind. A metric of a kind with a prior (``nats_learnt`` 0, ``auc`` 0.5) gets the FLOPs at which
it first left it: an MLM is "off the unigram plateau" once its (smoothed) training nats learnt
reach ``CROSSING["nats_learnt"]``, a detector "ranks" once its training ROC-AUC reaches
``CROSSING["auc"]``. Final values come from the held-out split at the last checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from electra_ablate.pretraining.metric_names import metric_kind, split_metric_name
from electra_ablate.pretraining.registry import declared_metric_kinds
from electra_ablate.report.markdown import NO_VALUE, figure, sci, table

SMOOTHING = 5  # logged points in the rolling mean of a training curve

DIAGNOSTIC_KINDS = ("nats_learnt", "auc", "spread", "divergence", "entropy", "rate", "accuracy")
"""Kinds drawn and tabled, in this order. Raw losses are left out: each objective scales its own
(ELECTRA's total is MLM + 50 x BCE), and "nats learnt" is the same loss measured against the
prior, with a meaningful zero; precision and recall at logit 0 say little of a detector that
ranks (docs/design.md, the pre-training recipe)."""

KIND_TITLES = {
    "nats_learnt": "nats learnt over the prior",
    "auc": "ROC-AUC",
    "spread": "spread (0: collapsed)",
    "divergence": "KL divergence (nats)",
    "entropy": "entropy (nats)",
    "rate": "share",
    "accuracy": "accuracy",
}

CROSSING = {"nats_learnt": 0.1, "auc": 0.6}
"""The smoothed training value at which a metric of that kind counts as off its prior."""

INCL_SPECIAL = "incl. [CLS]/[SEP]"


def diagnostic_metrics(metrics: pl.DataFrame) -> list[tuple[str, str, bool]]:
    """``(name, kind, qualified)`` of every logged diagnostic, by kind, then name, each figure
    over ordinary tokens before its ``_incl_special`` twin."""
    objectives = metrics["objective"].unique().to_list() if "objective" in metrics.columns else []
    declared = declared_metric_kinds(objectives)
    found = []
    for name in metrics.columns:
        kind = metric_kind(name, declared)
        if kind in DIAGNOSTIC_KINDS and metrics[name].null_count() < metrics.height:
            base, qualified = split_metric_name(name)
            found.append((DIAGNOSTIC_KINDS.index(kind), base, qualified, name, kind))
    return [(name, kind, qualified) for *_, qualified, name, kind in sorted(found)]


def metric_title(name: str, kind: str, qualified: bool) -> str:
    suffix = f", {INCL_SPECIAL}" if qualified else ""
    return f"{split_metric_name(name)[0]}: {KIND_TITLES[kind]}{suffix}"


def curve_panel_specs(metrics: pl.DataFrame) -> list[tuple[str, str]]:
    """``(metric, panel title)`` of every diagnostic a run logged, in ``DIAGNOSTIC_KINDS`` order."""
    return [(n, metric_title(n, k, q)) for n, k, q in diagnostic_metrics(metrics)]


def smoothed(frame: pl.DataFrame, column: str) -> pl.Series:
    return frame[column].rolling_mean(SMOOTHING, min_samples=1)


def first_crossing(train: pl.DataFrame, column: str, threshold: float) -> float | None:
    """Pre-training FLOPs at which the smoothed training curve first reaches ``threshold``."""
    if column not in train.columns or train[column].null_count() == train.height:
        return None
    values = smoothed(train, column)
    hits = train.filter(values >= threshold)
    return float(hits["flops_paper"][0]) if hits.height else None


def final_value(train: pl.DataFrame, heldout: pl.DataFrame, column: str) -> str:
    """``held-out`` value at the last checkpoint (train, smoothed, in brackets)."""
    if column not in train.columns or train[column].null_count() == train.height:
        return NO_VALUE
    text = f"({smoothed(train, column).to_list()[-1]:.3f})"
    if column in heldout.columns and heldout.height and heldout[column][-1] is not None:
        text = f"{heldout[column][-1]:.3f} {text}"
    return text


def crossing_text(train: pl.DataFrame, column: str, threshold: float) -> str:
    if column not in train.columns or train[column].null_count() == train.height:
        return NO_VALUE
    at = first_crossing(train, column, threshold)
    return sci(at) if at is not None else "not reached"


DIAGNOSTICS_FILE = "diagnostics.csv"
"""Every diagnostic of every run at its last checkpoint, beside the report's shorter table."""

TABLE_KINDS = ("nats_learnt", "auc")
"""The kinds the report's table shows (whether, and when, a model left its prior); the other
kinds are drawn in the panels and listed in ``DIAGNOSTICS_FILE``."""

MONITOR_KINDS = ("spread",)
"""The collapse monitor's kinds, also in the table (their final values, no crossing): an AUC at
0.5 with a spread near 0 is a collapse, not a detector still learning
(``pretraining.metric_names.COLLAPSE_SIGNALS``)."""


def run_rows(metrics: pl.DataFrame, labels: Sequence[str]):
    """``(display name, label, seed, train rows, held-out rows)`` per run, in label order."""
    for label in labels:
        run = metrics.filter(pl.col("label") == label)
        if run.is_empty():
            continue
        for seed in sorted(set(run["pretrain_seed"])):
            one = run.filter(pl.col("pretrain_seed") == seed).sort("step")
            train = one.filter(pl.col("split") == "train")
            heldout = one.filter(pl.col("split") == "heldout")
            name = label if run["pretrain_seed"].n_unique() == 1 else f"{label} (seed {seed})"
            yield name, label, seed, train, heldout


def last(frame: pl.DataFrame, column: str) -> float | None:
    if column not in frame.columns or not frame.height:
        return None
    value = frame[column][-1]
    return float(value) if value is not None else None


def diagnostics_table(metrics: pl.DataFrame, labels: Sequence[str]) -> pl.DataFrame:
    """``diagnostics.csv``: per run, every diagnostic's held-out value at the last checkpoint,
    its smoothed training value, and for kinds with a prior the FLOPs at which the smoothed
    training curve first crossed ``CROSSING`` (empty: never)."""
    diagnostics = diagnostic_metrics(metrics)
    rows = []
    for _, label, seed, train, heldout in run_rows(metrics, labels):
        row: dict[str, object] = {"label": label, "pretrain_seed": int(seed)}
        for name, kind, _ in diagnostics:
            present = name in train.columns and train[name].null_count() < train.height
            row[f"{name}_heldout"] = last(heldout, name)
            row[f"{name}_train"] = float(smoothed(train, name)[-1]) if present else None
            if kind in CROSSING:
                row[f"{name}_crossing_flops"] = (
                    first_crossing(train, name, CROSSING[kind]) if present else None
                )
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


def crossing_cell(train: pl.DataFrame, heldout: pl.DataFrame, column: str, kind: str) -> str:
    """``held-out final (train); ≥ x at FLOPs``: where it ended and when it left its prior."""
    final = final_value(train, heldout, column)
    if final == NO_VALUE:
        return final
    at = first_crossing(train, column, CROSSING[kind])
    when = f"≥ {CROSSING[kind]:g} at {sci(at)}" if at is not None else f"never ≥ {CROSSING[kind]:g}"
    return f"{final}; {when}"


def diagnostics_section(
    metrics: pl.DataFrame,
    labels: Sequence[str],
    scores: tuple[str, dict[str, str], str] | None = None,
) -> str:
    """One row per run; ``scores`` (the score column's heading, label -> its final score cell,
    and the note under the table that explains a cell's mark, if any) puts each run's
    evaluation beside what its pre-training learnt. The table keeps what says whether
    and when each model left its prior (``TABLE_KINDS``); the rest is in ``DIAGNOSTICS_FILE``."""
    diagnostics = diagnostic_metrics(metrics)
    columns = [
        (name, kind)
        for name, kind, qualified in diagnostics
        if kind in TABLE_KINDS + MONITOR_KINDS and not qualified
    ]
    rows = []
    for name, label, _, train, heldout in run_rows(metrics, labels):
        cells = [
            crossing_cell(train, heldout, metric, kind)
            if kind in CROSSING
            else final_value(train, heldout, metric)
            for metric, kind in columns
        ]
        rows.append([name, *([scores[1].get(label, NO_VALUE)] if scores else []), *cells])
    header = [
        "Label",
        *([scores[0]] if scores else []),
        *(name for name, _ in columns),
    ]
    qualified = [name for name, _, q in diagnostics if q]
    others = sorted({kind for _, kind, _ in diagnostics} - set(TABLE_KINDS + MONITOR_KINDS))
    return "\n\n".join(
        [
            "## Pre-training: did each model learn, and when?",
            "*Nats learnt* (`*_nats_learnt`): the frequency-only (unigram) loss on the same "
            "targets minus the model's MLM loss, or the entropy of the replaced/original labels "
            "minus the detection loss. 0 means the model is at its prior; positive, it predicts "
            "better than the prior; negative, worse: its loss is still above that of predicting "
            "by frequency alone (an MLM head starts near-uniform, several nats worse than the "
            "unigram loss, and approaches it from below; a detector above the label entropy is "
            "miscalibrated). BERT's MLM is "
            "also scored at its [MASK]ed positions alone (`mlm_masked_*`): the 10% of selected "
            "tokens it sees unchanged can be predicted by copying, so only the [MASK] positions "
            "measure prediction from context, as a generator's loss does. "
            + detection_scope(metrics, qualified)
            + " Each cell: the held-out value at the last checkpoint (the smoothed training "
            f"value in brackets); *≥ x at*: the pre-training FLOPs (paper convention) at which "
            f"the training curve, smoothed over {SMOOTHING} logged points, first reaches x "
            f"({CROSSING['nats_learnt']:g} nats learnt: off the plateau; AUC "
            f"{CROSSING['auc']:g}: ranks replacements)."
            + monitor_note(diagnostics)
            + (
                f" The other diagnostics ({', '.join(KIND_TITLES[k] for k in others)}) are drawn "
                f"below and listed per run in [`{DIAGNOSTICS_FILE}`]({DIAGNOSTICS_FILE})."
                if others
                else ""
            ),
            table(header, rows),
            *([scores[2]] if scores and scores[2] else []),
            *([note] if (note := one_class_note(metrics, labels)) else []),
            figure("Pre-training diagnostics vs FLOPs", "pretrain_curves"),
            "Solid: training batches, smoothed; dots: held-out split at checkpoints.",
        ]
    )


ONE_CLASS = 0.99
"""A detector accuracy at least this (or at most 1 − it) beside an AUC within ``CHANCE_AUC``
of 0.5: its scored positions hold one class (``one_class_note``)."""
CHANCE_AUC = 0.02


def one_class_note(metrics: pl.DataFrame, labels: Sequence[str]) -> str:
    """Names the runs whose held-out detection accuracy is near 1 (or 0) while their AUC is
    0.5 (issue 69: ELECTRA 15%'s ``disc_acc`` 1.00 beside AUC 0.500 read as learning): where
    a detector is scored only at the selected positions and the generator replaced every one,
    the target has one class, and the accuracy of always answering it measures nothing."""
    found = []
    for name, _, _, _, heldout in run_rows(metrics, labels):
        acc, auc = last(heldout, "disc_acc"), last(heldout, "disc_auc")
        if acc is None or auc is None or abs(auc - 0.5) > CHANCE_AUC:
            continue
        if acc >= ONE_CLASS or acc <= 1 - ONE_CLASS:
            found.append(f"{name} ({acc:.2f} beside AUC {auc:.3f})")
    if not found:
        return ""
    return (
        f"*One class at the scored positions*: {', '.join(found)}. Its detector's accuracy is "
        "that of always answering the one class its target holds there (every selected token "
        "replaced, or none): it measures nothing learnt; the AUC at 0.5 says so."
    )


def monitor_note(diagnostics: list[tuple[str, str, bool]]) -> str:
    """What the collapse monitor's columns mean, where the runs logged them."""
    if not any(kind in MONITOR_KINDS for _, kind, _ in diagnostics):
        return ""
    return (
        " The collapse monitor: `enc_spread` is how much the kept encoder's final states "
        "differ across a sequence's positions (per unit, the standard deviation over positions, "
        "over the states' root mean square): 0 means every position has the same state, an "
        "encoder that has collapsed; `disc_head_logit_spread` is the standard deviation of the "
        "detection head's logits over ordinary tokens: 0 means one answer whatever the token "
        "(AUC 0.5 with it is a constant detector, not one still learning). A run warns when a "
        "held-out value crosses its threshold (`electra_ablate.pretraining.metric_names."
        "COLLAPSE_SIGNALS`)."
    )


def detection_scope(metrics: pl.DataFrame, qualified: list[str]) -> str:
    """Which positions a detector's AUC and nats learnt are scored over, in these runs."""
    if qualified:
        return (
            "A detector's ROC-AUC and nats learnt are scored over ordinary tokens, the "
            "positions a replacement could hit ([CLS] and [SEP], never replaced, left out); the "
            f"same figures over every scored position are labelled *{INCL_SPECIAL}* "
            f"({', '.join(f'`{n}`' for n in qualified)})."
        )
    detects = any(
        metric_kind(name) == "auc" and metrics[name].null_count() < metrics.height
        for name in metrics.columns
    )
    if not detects:
        return ""
    return (
        "These runs were logged before detection metrics left out [CLS] and [SEP]: their "
        "ROC-AUC and nats learnt are over every scored position, "
        f"{INCL_SPECIAL} (a detector that knows only that those are never replaced scores "
        "AUC about 0.51 there)."
    )
