"""The columns and types of a study's tidy tables, in Arrow terms.

Defined with pyarrow, not polars, because the tables are written on the job path
(``electra_ablate.study.tables``), which must run on a GPU node that has pyarrow but no polars;
``electra_ablate.analysis.results`` reads them with polars under the same schemas
(``results.RESULTS_SCHEMA`` and ``results.RUNS_SCHEMA`` are these, converted).

A column added here is documented in ``docs/outputs.md`` ("The tables"), with its meaning and
units: ``tests/analysis/test_table_docs.py`` fails until it is. ``pretrain_metrics.parquet``
has no schema here: its columns are the keys of the runs' logged rows.
"""

from __future__ import annotations

import pyarrow as pa

RESULTS_COLUMNS = pa.schema(
    [
        ("study", pa.string()),
        ("run_id", pa.string()),
        ("variant", pa.string()),
        ("objective", pa.string()),
        ("label", pa.string()),
        ("pretrain_seed", pa.int64()),
        ("checkpoint_fraction", pa.float64()),
        ("pretrain_step", pa.int64()),
        ("flops_paper", pa.float64()),
        ("flops_standard", pa.float64()),
        ("family", pa.string()),
        ("task", pa.string()),
        ("finetune_seed", pa.int64()),
        ("metric", pa.string()),
        ("headline", pa.bool_()),
        ("in_aggregate", pa.bool_()),
        ("value", pa.float64()),
        ("train_examples", pa.int64()),
        ("wall_s", pa.float64()),
        # the autocast precision a fine-tune trained in (bf16, fp16, fp32); null for a task
        # that trains nothing in torch, and in tables written before it was recorded
        ("precision", pa.string()),
    ]
)
"""``results.parquet``: one row per (run, checkpoint, task, fine-tuning seed, metric)."""

RUNS_COLUMNS = pa.schema(
    [
        ("run_id", pa.string()),
        ("variant", pa.string()),
        ("objective", pa.string()),
        ("label", pa.string()),
        ("pretrain_seed", pa.int64()),
        ("params_json", pa.string()),
        ("status", pa.string()),
        ("message", pa.string()),
        ("steps", pa.int64()),
        ("flops_paper", pa.float64()),
        ("flops_standard", pa.float64()),
        ("wall_s", pa.float64()),
        # whether the training loss ran away (engine.trainer.DIVERGENCE_FACTOR); null: baseline
        ("diverged", pa.bool_()),
        # the run's training curve: "logged", "rebuilt" (re-trained after its log was damaged)
        # or "missing" (its metrics.jsonl is missing or damaged); null for the baseline
        ("curve", pa.string()),
    ]
)
"""``runs.parquet``: one row per pre-training run (and baseline) with its status."""
