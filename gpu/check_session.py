"""Checks what one ``node.sh ... session`` left in OUT (gpu/rehearse.sh runs it after each
rehearsed session): at most eight files, a ``session.json`` that tells the truth about every
phase, and packs that ``ablate merge`` accepts here.

    python gpu/check_session.py OUT RC --expect finished|skipped-study|stopped|killed

``RC`` is the exit status node.sh returned; each expectation says what a session that ended that
way must show.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

MAX_FILES = 8  # what a lent GPU node sends back


def check(out: Path, rc: int, expect: str) -> list[str]:
    problems = []
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > MAX_FILES:
        problems.append(
            f"{len(files)} files in OUT, more than {MAX_FILES}: {sorted(map(str, files))}"
        )
    record = json.loads((out / "session.json").read_text())
    phases = record["phases"]
    statuses = {name: phase["status"] for name, phase in phases.items()}
    packs = sorted(out.glob("*.pack.tar.gz"))
    if expect == "finished":
        if rc != 0 or record["status"] != "finished":
            problems.append(f"a finished session exits 0 and says so: rc {rc}, {record['status']}")
        if any(s != "finished" for s in statuses.values()):
            problems.append(f"every phase finished: {statuses}")
        if not phases["study"].get("runs") or not phases["study"].get("evaluations", {}).get(
            "done"
        ):
            problems.append("a finished study records its runs and evaluations")
    elif expect == "skipped-study":
        if rc == 0 or statuses.get("study") != "skipped" or not phases["study"].get("why"):
            problems.append(
                f"no time for the study: skipped with a reason, rc != 0 ({rc}, {phases})"
            )
        if packs:
            problems.append(f"a skipped study packs nothing: {packs}")
    elif expect == "stopped":
        if rc != 143 or not record["status"].startswith("stopped"):
            problems.append(
                f"a SIGTERM'd session exits 143 and says stopped: {rc}, {record['status']}"
            )
        if statuses.get("study") != "stopped":
            problems.append(f"the study phase says stopped: {statuses}")
        if not phases["study"].get("packed"):
            problems.append("a stopped study is packed a last time")
    elif expect == "killed" and (
        record["status"] != "running" or statuses.get("study") != "running"
    ):
        problems.append(f"a killed session's record is its last state: {record['status']}")
    if expect in ("finished", "stopped", "killed"):
        if len(packs) != 1:
            problems.append(f"one pack of the study's rung: {packs}")
        else:
            problems += merge_problems(packs[0])
    if rc == 0 and expect != "finished":
        problems.append("a session that did not finish every phase must not exit 0")
    return problems


def merge_problems(pack: Path) -> list[str]:
    """The pack merges into a new folder here (``ablate merge`` checks its checksums)."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["ablate", "merge", str(pack), "--into", f"{tmp}/merged"],
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        return [f"ablate merge refused {pack.name}: {done.stderr.strip()[-300:]}"]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("rc", type=int)
    parser.add_argument("--expect", required=True,
                        choices=["finished", "skipped-study", "stopped", "killed"])  # fmt: skip
    args = parser.parse_args()
    problems = check(args.out, args.rc, args.expect)
    for problem in problems:
        print(f"FAILED ({args.expect}): {problem}", file=sys.stderr)
    if not problems:
        print(f"session {args.expect}: as expected ({args.out})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
