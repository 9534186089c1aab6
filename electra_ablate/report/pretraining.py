"""The report's pre-training section: whether each model learnt anything, and when.

An MLM is "off the unigram plateau" once its (smoothed) training loss is ``PLATEAU_NATS`` below
what a frequency-only predictor scores on the same targets; a discriminator "ranks" once its
training ROC-AUC reaches ``RANKING_AUC``. Those first crossings, in pre-training FLOPs, are the
learning-speed numbers; final values come from the held-out split at the last checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from electra_ablate.report.markdown import NO_VALUE, figure, sci, table

PLATEAU_NATS = 0.1
RANKING_AUC = 0.6
SMOOTHING = 5  # logged points in the rolling mean of a training curve

# (metric, panel title), in the order the panels are drawn; only metrics a run logged appear.
# Raw losses are left out: each objective scales its own (ELECTRA's total is MLM + 50 x BCE),
# and "nats learnt" is the same loss measured against the prior, with a meaningful zero.
PANELS: tuple[tuple[str, str], ...] = (
    ("mlm_masked_nats_learnt", "BERT at [MASK] only: nats learnt over unigram"),
    ("mlm_nats_learnt", "main MLM: nats learnt over unigram"),
    ("gen_mlm_nats_learnt", "generator MLM: nats learnt over unigram"),
    ("disc_auc", "discriminator ROC-AUC"),
    ("disc_nats_learnt", "discriminator: nats learnt over label entropy"),
    ("gen_entropy", "generator sampling entropy (nats)"),
    ("gen_kl_unigram", "generator KL from unigram (nats)"),
    ("replaced_frac", "replaced share of masked tokens"),
    ("mlm_acc", "main MLM accuracy"),
    ("gen_mlm_acc", "generator MLM accuracy"),
    ("all_tokens_acc", "All-Tokens accuracy (every token)"),
    ("copy_prob", "All-Tokens copy probability"),
)


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


def diagnostics_section(
    metrics: pl.DataFrame, labels: Sequence[str], glue: dict[str, str] | None = None
) -> str:
    """One row per run; ``glue`` (label -> final GLUE cell) puts each run's GLUE beside what
    its pre-training learnt."""
    rows = []
    for label in labels:
        run = metrics.filter(pl.col("label") == label)
        if run.is_empty():
            continue
        for seed in sorted(set(run["pretrain_seed"])):
            one = run.filter(pl.col("pretrain_seed") == seed).sort("step")
            train = one.filter(pl.col("split") == "train")
            heldout = one.filter(pl.col("split") == "heldout")
            name = label if run["pretrain_seed"].n_unique() == 1 else f"{label} (seed {seed})"
            rows.append(
                [
                    name,
                    *([glue.get(label, NO_VALUE)] if glue is not None else []),
                    crossing_text(train, "mlm_nats_learnt", PLATEAU_NATS),
                    final_value(train, heldout, "mlm_nats_learnt"),
                    crossing_text(train, "mlm_masked_nats_learnt", PLATEAU_NATS),
                    final_value(train, heldout, "mlm_masked_nats_learnt"),
                    crossing_text(train, "gen_mlm_nats_learnt", PLATEAU_NATS),
                    final_value(train, heldout, "gen_mlm_nats_learnt"),
                    final_value(train, heldout, "gen_mlm_acc"),
                    final_value(train, heldout, "gen_entropy"),
                    final_value(train, heldout, "gen_kl_unigram"),
                    crossing_text(train, "disc_auc", RANKING_AUC),
                    final_value(train, heldout, "disc_auc"),
                    final_value(train, heldout, "disc_nats_learnt"),
                    final_value(train, heldout, "replaced_frac"),
                ]
            )
    header = [
        "Label",
        *(["GLUE per model (final)"] if glue is not None else []),
        f"MLM off plateau at (≥ {PLATEAU_NATS} nats)",
        "MLM nats learnt",
        "BERT at [MASK]: off plateau at",
        "BERT at [MASK]: nats learnt",
        f"generator off plateau at (≥ {PLATEAU_NATS} nats)",
        "generator nats learnt",
        "generator accuracy",
        "generator entropy",
        "generator KL from unigram",
        f"discriminator AUC ≥ {RANKING_AUC} at",
        "discriminator AUC",
        "discriminator nats learnt",
        "replaced share",
    ]
    return "\n\n".join(
        [
            "## Pre-training: did each model learn, and when?",
            "*Nats learnt*: the frequency-only (unigram) loss on the same targets minus the "
            "model's MLM loss, or the entropy of the replaced/original labels minus the detection "
            "loss: 0 means the model is still at its prior. BERT's MLM is also scored at its "
            "[MASK]ed positions alone: the 10% of selected tokens it sees unchanged can be "
            "predicted by copying, so only the [MASK] positions measure prediction from context, "
            "as a generator's loss does. *Off plateau at*: the pre-training "
            f"FLOPs (paper convention) at which the training curve, smoothed over {SMOOTHING} "
            f"logged points, first reaches {PLATEAU_NATS} nats learnt; *AUC ≥ {RANKING_AUC} at*: "
            "likewise for the discriminator's ranking of replaced tokens. Final values: held-out "
            "split at the last checkpoint, smoothed training value in brackets.",
            table(header, rows),
            figure("Pre-training diagnostics vs FLOPs", "pretrain_curves"),
            "Solid: training batches, smoothed; dots: held-out split at checkpoints.",
        ]
    )
