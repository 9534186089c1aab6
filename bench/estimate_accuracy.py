"""How close is ``ablate run SPEC --dry-run``'s estimate to what a committed study really took?

For a committed report folder (``reports/<name>``, which keeps ``study.json`` and
``runs.parquet``), this plans the study's spec again as its command ran it (same ``--workers``,
same overrides), times it with ``estimate_study`` exactly as ``--dry-run`` does, and prints per
objective the estimated pre-training time beside the run's recorded wall time, then the study's
estimated wall time beside its recorded one. With ``--busy N`` it first starts N processes that
spin a core each (``python -c 'while 1: pass'``), the condition that used to multiply the old
estimate (3 steps timed on all threads) by up to 20; ``--old`` also times that old way.

Recorded wall times: a run's ``wall_s`` is its own pre-training (a run copied by ``--reuse``
keeps the wall time it took where it ran); the study's is from its start to its end.

    python bench/estimate_accuracy.py reports/objectives [--busy 1] [--old]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import torch

from electra_ablate.infra.progress import format_duration
from electra_ablate.infra.threads import torch_threads
from electra_ablate.spec import load_spec
from electra_ablate.study.context import Study
from electra_ablate.study.estimate import estimate_study, machine_load, stepper
from electra_ablate.study.plan import plan_study
from electra_ablate.study.units import RunUnit

ROOT = Path(__file__).resolve().parent.parent


def workers_of(command: str) -> int:
    words = shlex.split(command)
    return int(words[words.index("--workers") + 1]) if "--workers" in words else 1


def old_step_seconds(study: Study, unit: RunUnit, threads: int) -> float:
    """The estimate before issue 43: the median of 3 steps on all the worker's threads."""
    with torch_threads(threads), stepper(study, unit) as step:
        return statistics.median(step() for _ in range(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a committed report folder")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning a core each")
    parser.add_argument("--old", action="store_true", help="also time the old way")
    args = parser.parse_args()

    study_json = json.loads((args.report / "study.json").read_text())
    runs = pl.read_parquet(args.report / "runs.parquet")
    workers = workers_of(study_json.get("command") or "")
    spec = load_spec(ROOT / study_json["spec_path"], study_json.get("overrides") or {})
    spinners = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.busy)]
    try:
        time.sleep(2 if spinners else 0)
        with tempfile.TemporaryDirectory() as tmp:
            study = Study(spec, ROOT / study_json["spec_path"], Path(tmp) / "out", "cpu", {})
            started = time.perf_counter()
            units = plan_study(study).units
            prepared = time.perf_counter() - started
            found = estimate_study(study, units, workers)
            timed = time.perf_counter() - started - prepared
            old = {}
            if args.old:
                threads = max(1, torch.get_num_threads() // workers)
                for unit in units:
                    if isinstance(unit, RunUnit) and unit.label not in old:
                        old[unit.label] = old_step_seconds(study, unit, threads) * (
                            unit.plan.total_steps
                        )
            load_after = machine_load()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()

    print(f"## `{args.report}` with --workers {workers}, {args.busy} core(s) kept busy\n")
    print(f"estimate measured at {found.load}; {load_after} at the end")
    print(f"data preparation {prepared:.0f} s, timing {timed:.0f} s\n")
    head = "| objective | estimated pre-training | recorded wall time | ratio |"
    rule = "|---|---|---|---|"
    if old:
        head, rule = head + " old estimate | old ratio |", rule + "---|---|"
    print(head + "\n" + rule)
    for row in found.rows:
        if row["objective"] == "none":
            continue
        recorded = runs.filter(pl.col("label") == row["label"])["wall_s"].to_list()
        if not recorded:
            continue
        real = statistics.median(recorded)
        est = row["est_pretrain_min"] * 60
        line = f"| {row['label']} | {format_duration(est)} | {format_duration(real)} | "
        line += f"{est / real:.2f} |"
        if old:
            line += f" {format_duration(old[row['label']])} | {old[row['label']] / real:.2f} |"
        print(line)
    low, high = found.wall_range_s
    real = study_json.get("wall_s") or float("nan")
    print(
        f"\nstudy: estimated {format_duration(found.wall_s)} (range {format_duration(low)} to "
        f"{format_duration(high)}), recorded {format_duration(real)} "
        f"(ratio {found.wall_s / real:.2f}); {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
