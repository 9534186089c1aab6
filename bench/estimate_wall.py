"""Is ``ablate run SPEC --dry-run``'s estimate within 2x of the wall time of the run that follows?

For each of a few small studies (a micro smoke of two objectives, the committed smoke study and
a tiny objectives study, each shrunk by ``--set``), this runs the dry run into a fresh folder,
then the real ``ablate run`` into the same folder, exactly as a user would, and records the
estimate, its range, the run's wall time (the whole process, as a user waits for it), the ratio
wall / estimate, and the machine's load (1-minute load average) before and after. The dry run
prepares the data, so the run that follows finds it cached, as it would for a user.

One command (4 minutes on the idle 2-core machine; ``--only`` picks studies by the start of
their names, repeatable); ``--busy N`` first starts N processes spinning a core each (a steady
load), ``--condition`` names the machine's state in the JSON, which is appended to
``bench/estimate_wall.json`` (the target: every ratio in [0.5, 2]; the results and what they
say: docs/performance.md, "The dry run's estimate"):

    python bench/estimate_wall.py --condition idle
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "estimate_wall.json"

# name -> (spec, --set options): from a micro smoke to a tiny objectives study
STUDIES: dict[str, tuple[str, list[str]]] = {
    "micro smoke (2 objectives, rte)": (
        "studies/smoke.yaml",
        [
            "objectives=[{name: bert_mlm}, {name: electra}]",
            "budget.steps=30",
            "finetune.tasks=[rte]",
        ],
    ),
    "smoke (7 objectives, rte + stsb)": ("studies/smoke.yaml", []),
    "tiny objectives (5 objectives, 2 tasks, 2 probes)": (
        "studies/objectives.yaml",
        [
            "data.corpus.paths=[{data}/corpus/gutenberg/*.txt.gz]",
            "data.corpus.max_documents=3000",
            "budget.flops=1e11",
            "budget.checkpoints=[0.5, 1.0]",
            "finetune.tasks=[rte, mrpc]",
            "finetune.seeds=[0]",
            "finetune.checkpoints=[0.5, 1.0]",
            "finetune.caps={rte: 120, mrpc: 200}",
            "finetune.recipe={epochs: 1, task_epochs: {}}",
            "evaluation.tasks=[rtd_uniform, rte_probe]",
            "evaluation.seeds=[0]",
            "device=cpu",
        ],
    ),
}


def load() -> float:
    return os.getloadavg()[0]


def measure(name: str, spec: str, sets: list[str], ablate: str, tmp: Path) -> dict:
    """The dry run, then the run, of one study in a fresh folder."""
    slug = name.split(" (")[0].replace(" ", "_")
    out = tmp / slug / slug  # alone in its parent: no study beside it to reuse from
    out.parent.mkdir(parents=True)
    data = os.environ.get("ABLATE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    sets = [s.replace("{data}", data) for s in sets]
    options = [x for s in sets for x in ("--set", s)]
    plan = tmp / slug / "plan.json"
    load_before = load()
    started = time.perf_counter()
    dry = [ablate, "run", spec, "--out", str(out), "--no-progress", *options]
    subprocess.run([*dry, "--dry-run", "--plan-json", str(plan)], cwd=ROOT, check=True)
    dry_s = time.perf_counter() - started
    found = json.loads(plan.read_text())
    load_between = load()
    started = time.perf_counter()
    subprocess.run(dry, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    low, high = found["wall_range_s"]
    return {
        "study": name,
        "command": " ".join(["ablate run", spec, *(f"--set '{s}'" for s in sets)]),
        "dry_run_s": round(dry_s, 1),
        "estimate_s": round(found["wall_s"], 1),
        "range_s": [round(low, 1), round(high, 1)],
        "fixed_s": round(found.get("fixed_s", 0.0), 1),
        "slowdown": round(found.get("slowdown", 1.0), 2),
        "wall_s": round(wall, 1),
        "ratio": round(wall / found["wall_s"], 2),
        "in_range": low <= wall <= high,
        "load": [round(load_before, 1), round(load_between, 1), round(load(), 1)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--condition", required=True, help="the machine's state: loaded, idle")
    parser.add_argument(
        "--only", action="append", help="a study of STUDIES by the start of its name (repeatable)"
    )
    parser.add_argument("--no-save", action="store_true", help="print, do not append the JSON")
    parser.add_argument(
        "--busy", type=int, default=0, help="start N processes spinning a core each: a steady load"
    )
    args = parser.parse_args()
    spin = [sys.executable, "-c", "while 1: pass"]
    spinners = [subprocess.Popen(spin) for _ in range(args.busy)]
    try:
        time.sleep(20 if spinners else 0)  # the load average catches up
        run_all(args)
    finally:
        for spinner in spinners:
            spinner.kill()


def run_all(args: argparse.Namespace) -> None:
    """Every study of ``STUDIES`` (or ``--only`` one), then the table and the JSON."""
    ablate = shutil.which("ablate", path=str(Path(sys.executable).parent)) or "ablate"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (spec, sets) in STUDIES.items():
            if args.only and not name.startswith(tuple(args.only)):
                continue
            rows.append(measure(name, spec, sets, ablate, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    entry = {
        "date": datetime.date.today().isoformat(),
        "condition": args.condition,
        "busy": args.busy,
        "cores": os.cpu_count(),
        "studies": rows,
    }
    print("\n| study | estimate (range) | wall | wall / estimate | load (1 min) |")
    print("|---|---|---|---|---|")
    for r in rows:
        low, high = r["range_s"]
        loads = " → ".join(f"{x:g}" for x in r["load"])
        print(
            f"| {r['study']} | {r['estimate_s']:.0f} s ({low:.0f}–{high:.0f}) | "
            f"{r['wall_s']:.0f} s | {r['ratio']:.2f} | {loads} |"
        )
    if not args.no_save:
        previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
        RESULTS.write_text(json.dumps([*previous, entry], indent=1) + "\n")


if __name__ == "__main__":
    main()
