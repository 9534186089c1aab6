"""Checks what one ``node.sh ... session`` left in OUT (.ci/rehearse.sh runs it after each
rehearsed session): at most eight files, a ``session.json`` that tells the truth about every
phase and names no file that is not there, and packs that ``ablate merge`` accepts here.

    python .ci/check_session.py OUT RC --expect EXPECTATION [--one-card] [--after CUT_OUT]

``RC`` is the exit status node.sh returned; each expectation says what a session that ended that
way must show: ``finished``, ``skipped-study``, ``stopped`` (SIGTERM), ``killed`` (SIGKILL),
``cut`` (the deadline cut evaluations of a finished run: its kept encoders came back as parts),
``reused`` (a session given the cut one's parts and pack with ``--reuse``: no pre-training, and
the cut evaluations done; ``--after`` names the cut session's OUT) and ``pack-refused`` (the pack
could not be written: a non-zero exit, and the record says why). ``--one-card``: the study ran
the one-card schedule, so its pre-trainings never overlap and the first evaluation to start is
the longest.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from electra_ablate.scaleout.node.session import OUT_FILES as MAX_FILES  # what a node sends back

EVALUATIONS = ("finetune", "probe")


def check(
    out: Path, rc: int, expect: str, one_card: bool = False, after: Path | None = None
) -> list[str]:
    problems = []
    files = [p for p in out.rglob("*") if p.is_file()]
    if len(files) > MAX_FILES:
        problems.append(
            f"{len(files)} files in OUT, more than {MAX_FILES}: {sorted(map(str, files))}"
        )
    if not (out / "session.json").is_file():
        return problems + [f"no session.json in {out}: the session wrote no record (exit {rc})"]
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
    elif expect == "cut":
        problems += cut_problems(out, rc, record)
    elif expect == "reused":
        problems += reused_problems(rc, record, after)
    elif expect == "pack-refused":
        study = phases.get("study", {})
        if rc == 0 or not record["status"].startswith("failed") or "pack" not in record["status"]:
            problems.append(f"an unwritten pack fails the session: rc {rc}, {record['status']}")
        if study.get("packed") is not False or not study.get("pack_error"):
            problems.append(f"the study phase says the pack was not written, and why: {study}")
    problems += named_files_problems(out, record)
    if one_card:
        problems += one_card_problems(record)
    if expect in ("finished", "stopped", "killed", "cut", "reused"):
        if len(packs) != 1:
            problems.append(f"one pack of the study's rung: {packs}")
        else:
            problems += merge_problems(packs[0])
    if rc == 0 and expect not in ("finished", "reused"):
        problems.append("a session that did not finish every phase must not exit 0")
    return problems


def named_files_problems(out: Path, record: dict) -> list[str]:
    """Every file the record names as written is in OUT: the pack, the kept parts, the compile
    cache (the third H200 stretch's record named a pack that was never written)."""
    study = record["phases"].get("study", {})
    named = [study["pack"]] if study.get("pack") else []
    named += [part["file"] for part in (study.get("kept") or {}).get("parts", [])]
    saved = (record.get("compile_cache") or {}).get("saved")
    named += [saved["file"]] if saved else []
    return [f"session.json names {name}, which is not in OUT" for name in named
            if not (out / name).is_file()]  # fmt: skip


def cut_problems(out: Path, rc: int, record: dict) -> list[str]:
    """The deadline stopped the study with an evaluation of a finished run in flight: the
    session exits non-zero, the job is recorded ``cut``, and the run's kept encoders came back
    as parts in OUT; the compile cache was saved."""
    problems = []
    study = record["phases"].get("study", {})
    if rc == 0 or study.get("status") != "stopped" or "deadline" not in study.get("why", ""):
        problems.append(f"the deadline stopped the study, rc != 0: {rc}, {study.get('status')}")
    cut = [j for j in record["jobs"] if j["kind"] in EVALUATIONS and j["status"] == "cut"]
    returned = (study.get("kept") or {}).get("units", {})
    runs = {name.rsplit("-", 1)[-1] for name in returned}
    if not cut or not any(j["run_id"] in runs for j in cut):
        problems.append(f"a cut evaluation's run has its kept encoders back: {cut}, {returned}")
    if not list(out.glob("*.kept.part*")):
        problems.append("the kept parts are in OUT")
    if not (record.get("compile_cache") or {}).get("saved"):
        problems.append(f"the compile cache is saved: {record.get('compile_cache')}")
    return problems


def reused_problems(rc: int, record: dict, after: Path | None) -> list[str]:
    """With the cut session's parts and pack given to ``--reuse``, nothing pre-trains and
    every evaluation the deadline cut is done here; the kit's compile cache was carried,
    checked and used (or ignored, saying why)."""
    problems = []
    if rc != 0 or record["status"] != "finished":
        problems.append(f"the reusing session finishes: rc {rc}, {record['status']}")
    pretrained = [j for j in record["jobs"] if j["kind"] == "pretrain" and j["start_s"] is not None]
    if pretrained:
        problems.append(f"nothing is pre-trained again: {pretrained}")
    if not record["phases"].get("study", {}).get("reused_kept"):
        problems.append("the study phase names the kept parts it rebuilt")
    if after is not None:
        earlier = json.loads((after / "session.json").read_text())["jobs"]
        cut = {j["job_id"] for j in earlier if j["status"] == "cut" and j["job_id"]}
        done = {j["job_id"] for j in record["jobs"] if j["status"] == "done" and j["start_s"]}
        if not cut or cut - done:
            problems.append(f"every cut evaluation is done here: {sorted(cut - done)} are not")
    cache = record.get("compile_cache") or {}
    used = cache.get("used") or {}
    if not cache.get("carried") or not str(cache.get("unpacked", "")).startswith("yes"):
        problems.append(f"the kit's compile cache is checked and unpacked: {cache}")
    if not used.get("warm") and not (used.get("ignored") and used.get("why")):
        problems.append(f"the carried cache is used warm, or ignored saying why: {used}")
    return problems


def one_card_problems(record: dict) -> list[str]:
    """One pre-training trains at a time (the next may compile meanwhile, then waits for the
    card: its training is ``trained_from_s`` to ``trained_until_s`` where it held the device
    gate), and the first evaluation to start is the longest: none of another task that finished
    ran longer than it did (at least until the last end, where it was cut). Evaluations of its
    own task cost the schedule's estimate the same, so which of them starts first is a tie, and
    their times differ by noise alone (a reused session's two RTE fine-tunes took 2.7 s and
    3.2 s in one CI run)."""
    problems = []
    jobs = [j for j in record["jobs"] if j["start_s"] is not None]
    runs = sorted(
        (j.get("trained_from_s") or j["start_s"], j.get("trained_until_s") or j["end_s"])
        for j in jobs
        if j["kind"] == "pretrain"
    )
    pairs = zip(runs, runs[1:], strict=False)
    if any(end is None or start < end for (_, end), (start, _) in pairs):
        problems.append(f"pre-trainings overlap on one card: {runs}")
    evaluations = [j for j in jobs if j["kind"] in EVALUATIONS]
    if evaluations:
        first = min(evaluations, key=lambda j: j["start_s"])
        last_end = max((j["end_s"] for j in record["jobs"] if j["end_s"] is not None), default=0)
        ran = (first["end_s"] if first["end_s"] is not None else last_end) - first["start_s"]
        longer = [
            j for j in evaluations
            if j["task"] != first["task"]
            and j["end_s"] is not None and j["end_s"] - j["start_s"] > ran + 0.5
        ]  # fmt: skip
        if longer:
            problems.append(
                f"the first evaluation to start ({first['task']}, {ran:.1f} s) is the longest: "
                f"{[(j['task'], round(j['end_s'] - j['start_s'], 1)) for j in longer]} ran longer"
            )
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
                        choices=["finished", "skipped-study", "stopped", "killed", "cut",
                                 "reused", "pack-refused"])  # fmt: skip
    parser.add_argument("--one-card", action="store_true", help="the study ran on one card")
    parser.add_argument("--after", type=Path, help="--expect reused: the cut session's OUT")
    args = parser.parse_args()
    problems = check(args.out, args.rc, args.expect, args.one_card, args.after)
    for problem in problems:
        print(f"FAILED ({args.expect}): {problem}", file=sys.stderr)
    if not problems:
        print(f"session {args.expect}: as expected ({args.out})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
