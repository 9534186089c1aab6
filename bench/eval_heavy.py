"""Two runs of one study side by side (``bench/eval_heavy.sh``): evaluation job seconds per
task, summed over seeds, and the mean headline score of each, with their largest difference.

    python bench/eval_heavy.py BEFORE_STUDY AFTER_STUDY
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl


def per_task(study: Path) -> pl.DataFrame:
    """Seconds and mean headline per task of the study's pre-trained encoders (the runs of
    ``runs.parquet``; the references, which run no encoder, left out)."""
    results = pl.read_parquet(study / "results.parquet")
    runs = pl.read_parquet(study / "runs.parquet")["run_id"]
    return (
        results.filter(pl.col("headline") & pl.col("run_id").is_in(runs.implode()))
        .group_by("family", "task")
        .agg(pl.col("wall_s").sum().alias("seconds"), pl.col("value").mean().alias("score"))
    )


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    before, after = (per_task(Path(folder)) for folder in sys.argv[1:])
    both = before.join(after, on=("family", "task"), suffix="_after").sort("family", "task")
    print("| family | task | seconds before | after | score before | after |")
    print("|---|---|---|---|---|---|")
    for row in both.iter_rows(named=True):
        print(
            f"| {row['family']} | {row['task']} | {row['seconds']:.1f} | "
            f"{row['seconds_after']:.1f} | {row['score']:.3f} | {row['score_after']:.3f} |"
        )
    for family, part in both.group_by("family", maintain_order=True):
        print(
            f"{family[0]}: {part['seconds'].sum():.1f} s -> {part['seconds_after'].sum():.1f} s "
            f"of jobs; largest score change {(part['score'] - part['score_after']).abs().max():.4f}"
        )
    print(f"all evaluations: {both['seconds'].sum():.1f} s -> {both['seconds_after'].sum():.1f} s")


if __name__ == "__main__":
    main()
