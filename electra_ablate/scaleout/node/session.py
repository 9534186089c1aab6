"""One stretch of lent GPU time in one command: diagnostics, then as much of the study as fits.

``bash KIT/node.sh KIT OUT session`` sets the kit up and runs this file with the node's Python.
A lent GPU comes for a few minutes (one command of about ten, a few files back, nothing kept),
so every second is accounted for against one deadline (``--seconds`` from the moment node.sh
started) and nothing finished is ever lost:

1. ``doctor``: ``ablate doctor`` (software, devices, a timed micro run) -> ``OUT/doctor.json``;
2. ``tests``: the repository's tests marked ``cuda`` (``tests/test_cuda.py``);
3. ``bench``: ``bench/pretrain_throughput.py``, ELECTRA-Small at batch 128, ours eager,
   compiled and (on CUDA) replayed as CUDA graphs against ``transformers``' ELECTRA, each of ours
   profiled (kernels, launches, host syncs, the card's busy time per step) -> ``OUT/bench.json``;
   ``finetune`` (only when named in ``--phases``): ``bench/finetune_throughput.py``, the
   ``small`` fine-tuning step eager, compiled and as CUDA graphs -> ``OUT/finetune.json``. The
   fastest mode each measured (a compiled one only where the CUDA tests passed) is kept in
   ``WORK/measured.json``, which a later command on the same machine reads with
   ``--compile measured``;
4. ``plan`` (optional): the study's dry run on this device (``ablate run --dry-run
   --plan-json``: each objective's training step and each task's estimate) -> ``OUT/plan.json``,
   kept beside the replay's plan for comparison;
5. ``study``: the largest rung of ``LADDER``, then the most fine-tuning seeds, that the time
   model (``electra_ablate.scaleout.replay``: the command replayed job by job, its rates and
   the card's sharing fitted to the committed stretches in ``reports/gpu_sessions``) says end inside
   the time left (``budget.flops``, ``finetune.seeds``), run with ``--workers`` processes
   sharing the GPU; session.json keeps the replayed plan, job by job. While it runs, the
   finished work is collected and packed every ``PACK_EVERY`` seconds (``ablate run --collect``,
   ``ablate pack``) into ``OUT/<study>-<rung>.pack.tar.gz``, replaced atomically; at the
   deadline the study is stopped (SIGTERM: finished runs and fine-tunes are kept) and packed a
   last time. Where the deadline cut the evaluations of a run that finished pre-training, the
   run's kept encoders (fp32, byte for byte: the pack carries no weights) go back as split parts
   ``OUT/<study>-<rung>.kept.partIofN`` (``electra_ablate.scaleout.kept_parts``), as many as
   the files left allow, the run with the most cut work first. ``--reuse FOLDER`` first copies
   finished evaluation records of earlier studies (``FOLDER/<study>/finetune/*.json``) beside
   the study folder: a job with the same id (the same model, task, seed and data; the
   baseline's do not depend on the budget) is read back, not run again; and rebuilds the runs
   of the kept parts lying in ``FOLDER`` in a study folder beside it, which ``ablate run``
   copies as identical finished runs: their cut evaluations finish without pre-training again.

Each phase is bounded by its cap (``CAPS``) and by the time left, and skipped with the reason
when too little is left. ``OUT/session.json`` is rewritten after every change of state: per
phase finished / stopped / failed / skipped and why, its seconds, the measured rates and the
time model's prediction beside them, so a kill at any moment leaves a truthful record and the
last pack. Its ``jobs`` say where the time went: every job of the study (from the study's
``schedule.jsonl``) with its start, end, status and compile seconds, and the bench's and the
compile cache's. Every phase's output goes to ``OUT/session.log``. OUT holds at most
``OUT_FILES`` files: session.json, session.log, doctor.json, bench.json, finetune.json,
plan.json, the pack, then the kept parts and ``compile-cache.tar.xz`` as far as files are left.
A file that could not be written (the pack, the kept parts, the compile cache) is never named
as written: the record says why, and the session exits non-zero. The exit status is 0 only
where every phase finished and every file was written; SIGTERM or SIGINT stop the phase at
hand, pack what finished and exit 143 or 130.

Every child runs with ``ABLATE_COMPILE_CACHE=WORK/compile-cache``
(``electra_ablate.infra.compile_cache``): the cache a kit carries (``ablate kit
--compile-cache``) is checked and unpacked there first, and a study command saves it back as
``OUT/compile-cache.tar.xz``. ``--mps`` starts CUDA's MPS daemon for the session (and stops
it); without it the session only records whether one is there.

This file imports nothing but the standard library and the kit's own standard-library-only
modules (``electra_ablate.scaleout.kept_parts``, ``electra_ablate.scaleout.replay``,
``electra_ablate.infra.compile_cache``, ``electra_ablate.infra.manifest``):
everything that needs torch runs in a child process, so this one stays small and can always
write the record and the pack.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from electra_ablate.infra import compile_cache
from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.manifest import sha256
from electra_ablate.scaleout import kept_parts, replay

LADDER = replay.LADDER
"""Pre-training budgets in paper-convention FLOPs per objective. Every stretch picks one of
these, so runs from different stretches of GPU time and different cards line up."""

CAPS = {"doctor": 75.0, "tests": 150.0, "bench": 240.0, "finetune": 200.0, "plan": 150.0}
"""The most seconds each phase before the study may take (its share of the deadline)."""

MIN_PHASE_S = 15.0
"""A phase with less than this left is skipped: it could not finish anything."""

PACK_EVERY = 45.0
"""Seconds between packs of the finished work while the study runs."""

PACK_RESERVE_S = 60.0
"""Seconds kept at the end for stopping the study and its last collect and pack."""

OUT_FILES = 8
"""The most files a lent GPU node sends back (``.ci/check_session.py`` holds OUT to it)."""
OUT_BYTES = 64 * 2**20
"""The most they may weigh together (each at most 16 MiB: ``kept_parts.PART_BYTES``)."""
RECORD_RESERVE = 2**20
"""Bytes kept for session.json and session.log to grow after the last files are written."""

WORKERS = 12
"""The study's worker processes unless ``--workers`` says otherwise. On one card the schedule
(``schedule.shape: auto`` resolves to ``one_card``) trains one run at a time and then runs the
evaluations, longest first, so workers only matter for the evaluations: a Small fine-tuning
step is bound by the host (about 2,250 operations a step), so N processes on N host cores keep
the card N times as busy until it saturates. ``studies/gpu_session.yaml`` has 24 evaluations
at one fine-tuning seed (15 GLUE fine-tunes, 9 RTD probes and reference scorers); 12 of the
node's 16 cores leave four for the parent, the packer's collects and the data loaders.
ASSUMED, NOT MEASURED: that 12 CUDA contexts with a Small fine-tune each (a few GiB at most)
fit the H200's 139 GiB with room to spare, and that the card saturates no sooner."""

SCHEDULE_KINDS = ("pretrain", "finetune", "probe")
"""What a study's ``schedule.jsonl`` calls its work (``electra_ablate.study.execute``)."""
COMPILE_CACHE_SAVE_S = 20.0
"""The least time left at the end in which the compile cache is still packed and saved."""

REPLAYED_DEVICE = "cuda"
"""The device the replay's rates were fitted on (one H200, ``reports/gpu_sessions``); a study on
another device (the CPU rehearsal) runs the ladder's first rung with the spec's seeds."""


def now() -> float:
    return time.time()


class Stopped(Exception):
    """SIGTERM or SIGINT reached the session: stop, pack, record, leave."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Session:
    """The deadline, the record (``session.json``) and the log every phase writes to."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.deadline = args.started + args.seconds
        self.log_path = self.out / "session.log"
        self.record: dict[str, Any] = {
            "format": "electra-ablate GPU session",
            "started": dt.datetime.fromtimestamp(args.started, dt.timezone.utc).isoformat(
                timespec="seconds"
            ),
            "session_seconds": args.seconds,
            "device": args.device,
            "workers": args.workers,
            "phases": {},
            "jobs": [],
            "status": "running",
        }
        self.phase_jobs: list[dict[str, Any]] = []  # the bench's and the compile cache's
        self.study_jobs: list[dict[str, Any]] = []  # the study's, from its schedule.jsonl
        self.unwritten: list[str] = []  # files that could not be written: the session fails
        self.lock = threading.Lock()
        self.child: subprocess.Popen | None = None
        self.deferred: int | None = None  # a signal held back while the last pack is written
        self.deferring = False
        self.stopping = False  # a signal is being handled: the next ones change nothing
        self.rung = 0.0  # the budget the study phase chose

    def left(self) -> float:
        return self.deadline - now()

    def since(self, t: float) -> float:
        """Seconds from the session's start to the epoch time ``t``."""
        return round(t - self.args.started, 1)

    def say(self, line: str) -> None:
        stamp = f"[{now() - self.args.started:6.1f}s]"
        print(f"{stamp} {line}", flush=True)
        # a full OUT: the line is on stdout all the same
        with contextlib.suppress(OSError), open(self.log_path, "a") as log:
            log.write(f"{stamp} {line}\n")

    def log_file(self) -> Any:
        """``session.log`` to append a child's output to, or the null device where OUT refuses
        (full, gone): the child's work matters more than its log."""
        try:
            return open(self.log_path, "a")
        except OSError:
            return open(os.devnull, "w")

    def save(self) -> None:
        """``session.json``, written whole and renamed into place: never half a record. Where
        OUT refuses the write (full), the line says so on stdout and the session fails at its
        end, never here."""
        with self.lock:
            self.record["elapsed_s"] = round(now() - self.args.started, 1)
            self.record["jobs"] = sorted(  # by start; those never started last
                self.phase_jobs + self.study_jobs,
                key=lambda j: (j["start_s"] is None, j["start_s"] or 0.0),
            )
            tmp = self.out / ".session.json.tmp"
            try:
                tmp.write_text(json.dumps(self.record, indent=2))
                os.replace(tmp, self.out / "session.json")
            except OSError as e:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                why = f"session.json: {e.strerror or e}"
                if why not in self.unwritten:
                    self.unwritten.append(why)
                    print(f"error: {why} (OUT refuses the record)", flush=True)

    def phase(self, name: str, **facts: Any) -> dict[str, Any]:
        entry = self.record["phases"].setdefault(name, {})
        entry.update(facts)
        self.save()
        return entry

    def run(self, name: str, command: list[str], limit: float, cwd: Path | None = None) -> str:
        """Run ``command`` (its own process group, its output appended to the log) for at most
        ``limit`` seconds: "finished", "failed (exit N)" or "stopped"."""
        self.say(f"{name}: {' '.join(command)} (at most {limit:.0f} s)")
        with self.log_file() as log:
            self.child = subprocess.Popen(
                command,
                cwd=cwd,
                # PYTHONSAFEPATH: a checkout in the current folder must never hide the wheel
                env={**os.environ, "PYTHONSAFEPATH": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the group is ended whole: workers, compilers, children
            )
            try:
                rc = self.child.wait(timeout=max(limit, 1.0))
            except subprocess.TimeoutExpired:
                end_group(self.child)
                return "stopped"
            finally:
                if self.child.poll() is None:  # a signal reached us while it ran
                    end_group(self.child)
                self.child = None
        return "finished" if rc == 0 else f"failed (exit {rc})"

    def ablate(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "electra_ablate", *args]


def end_group(child: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM to the child's process group (``ablate`` keeps finished work and exits), then
    SIGKILL to whatever is left after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def reserve(session: Session) -> float:
    """Seconds a diagnostic phase leaves at the end: the study's last pack, where one follows."""
    return PACK_RESERVE_S if "study" in session.args.phases else 5.0


def bounded_phase(session: Session, name: str, command: list[str], cwd: Path | None = None) -> bool:
    """One diagnostic phase: run it within its cap and the time left, or skip it and say why."""
    limit = min(CAPS[name], session.left() - reserve(session))
    if limit < MIN_PHASE_S:
        session.phase(name, status="skipped", why=f"{session.left():.0f} s left of the session")
        return False
    started = now()
    session.phase(name, status="running", limit_s=round(limit))
    status = session.run(name, command, limit, cwd)
    why = f"its limit of {limit:.0f} s was reached" if status == "stopped" else ""
    session.phase(
        name, status=status, seconds=round(now() - started, 1), **({"why": why} if why else {})
    )
    return status == "finished"


# ------------------------------------------------------------------------- the phases


def doctor(session: Session) -> None:
    """``ablate doctor``; a check it reports as failed fails the phase (the doctor itself
    always exits 0: its problems are rows of its report)."""
    out = session.out / "doctor.json"
    steps = "--steps=" + str(session.args.doctor_steps)
    command = session.ablate("doctor", "--no-compile", steps, "--json", str(out))
    if not bounded_phase(session, "doctor", command, cwd=Path(session.args.work)):
        return
    try:
        report = json.loads(out.read_text())
        devices = [
            {
                "device": d["device"],
                "name": d.get("name"),
                "facts": d.get("facts"),
                "failed": [f"{c['name']}: {c.get('detail')}" for c in d["checks"] if not c["ok"]],
            }
            for d in report["devices"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as e:
        session.phase("doctor", status="failed", why=f"doctor.json unreadable: {e}")
        return
    failed = [f"{d['device']}: {line}" for d in devices for line in d["failed"]]
    session.phase("doctor", software=report.get("software"), devices=devices)
    if failed:
        session.phase("doctor", status="failed", why="; ".join(failed)[:1000])


def tests(session: Session) -> None:
    repo = Path(session.args.repo)
    files = sorted(
        str(p) for p in (repo / "tests").rglob("test_*.py") if "mark.cuda" in p.read_text()
    )
    if not files:
        session.phase("tests", status="skipped", why=f"no test file under {repo}/tests marks cuda")
        return
    command = [
        sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-rs", "-p", "no:cacheprovider",
        "-o", "addopts=", *files,
    ]  # fmt: skip
    bounded_phase(session, "tests", command, cwd=repo)
    with contextlib.suppress(OSError):  # pytest's last line: "12 passed, 1 skipped in 30.1s"
        lines = [
            ln
            for ln in session.log_path.read_text().splitlines()
            if " in " in ln and ("passed" in ln or "failed" in ln or "skipped" in ln)
        ]
        if lines:
            session.phase("tests", summary=lines[-1].strip("= "))


def bench_command(name: str) -> list[str]:
    """The command of the bench module ``name`` of this package (``pretrain_throughput``,
    ``finetune_throughput``), run with this Python from the installed wheel: the kit carries
    the bench inside the project's wheel, not as loose files."""
    return [sys.executable, "-m", f"{__package__ or 'electra_ablate.scaleout.node'}.{name}"]


def bench(session: Session) -> None:
    out = session.out / "bench.json"
    bench_args = session.args.bench_args.split()
    command = [*bench_command("pretrain_throughput"),
               "--device", session.args.device, *bench_args, "--json-out", str(out)]  # fmt: skip
    if session.args.device == "cuda":
        command += ["--compile", "true,reduce-overhead", "--profile", str(PROFILE_STEPS)]
    begun = now()
    finished = bounded_phase(session, "bench", command, cwd=Path(session.args.work))
    session.phase_jobs += bench_jobs(session, out, begun)
    if finished:
        with contextlib.suppress(OSError, ValueError):
            result = json.loads(out.read_text())
            sides = ("ours", *PRETRAIN_MODES, "peer", "electra_pytorch")
            steps_per_s = {
                side: 1.0 / result[f"{side}_step_s"] for side in sides if f"{side}_step_s" in result
            }
            profiles = {
                side: recorded_profile(result[f"{side}_profile"])
                for side in sides
                if f"{side}_profile" in result
            }
            session.phase(
                "bench",
                steps_per_s=steps_per_s,
                ratio=result.get("ratio"),
                mfu=result.get("mfu"),
                tokens_per_s=result.get("ours_tokens_per_s"),
                compile_first_step_s={
                    side: result[f"{side}_first_step_s"]
                    for side in PRETRAIN_MODES
                    if f"{side}_first_step_s" in result
                },
                compile_errors={
                    side: result[f"{side}_error"]
                    for side in PRETRAIN_MODES
                    if f"{side}_error" in result
                },
                profile=profiles,
            )
            remember(session, "pretrain.compile", fastest(steps_per_s, PRETRAIN_MODES, session))


PRETRAIN_MODES = {"ours": False, "ours_compiled": True, "ours_cuda_graphs": "reduce-overhead"}
"""The bench's sides of our step and the ``pretrain.compile`` value each times."""


def bench_jobs(session: Session, out: Path, begun: float) -> list[dict[str, Any]]:
    """The bench phase in ``jobs``: one entry per side of ours it timed (one process times
    them all, so each has the phase's start and end), its first step's seconds as its compile
    seconds; one entry for the phase where it left no report."""
    status = session.record["phases"].get("bench", {}).get("status", "")
    if status == "skipped":
        return []
    times = {"start_s": session.since(begun), "end_s": session.since(now())}
    ended = {"finished": "done", "stopped": "cut"}.get(status, "failed")
    try:
        result = json.loads(out.read_text())
        keys = ("step_s", "error", "first_step_s")
        sides = [side for side in PRETRAIN_MODES if any(f"{side}_{k}" in result for k in keys)]
    except (OSError, ValueError, AttributeError):
        return [job_entry(kind="bench", label="pretrain_throughput", status=ended, **times)]
    return [
        job_entry(
            kind="bench", label=side, status="done" if f"{side}_step_s" in result else ended,
            compile_s=result.get(f"{side}_first_step_s"), **times,
        )
        for side in sides
    ]  # fmt: skip


FINETUNE_MODES = {"dynamic": False, "compiled": True, "cuda_graphs": "reduce-overhead"}
"""``bench/finetune_throughput.py``'s modes and the ``finetune.recipe.compile`` value of each."""
PROFILE_STEPS = 5
PROFILE_KEYS = ("host_ms", "device_busy_ms", "busy_share_of_timed", "kernels", "launches",
                "launch_ms", "graph_launches", "syncs", "cpu_ops", "top_ops")  # fmt: skip


def recorded_profile(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures of a ``step_profile`` summary that ``session.json`` keeps (a
    fine-tuning profile has no ``busy_share_of_timed``)."""
    return {key: summary[key] for key in PROFILE_KEYS if key in summary}


def finetune(session: Session) -> None:
    """The fine-tuning step's throughput per compile mode: the evaluation's speed on the card,
    and (``--profile``, on by default) each mode's profiled steps, which say whether the host or
    the card bounds it. The bench writes each mode's report as soon as the mode is timed, so a
    phase stopped at its limit still records (and chooses among) the modes it finished."""
    out = session.out / "finetune.json"
    modes = [m for m in FINETUNE_MODES if m != "cuda_graphs" or session.args.device == "cuda"]
    glue = Path(session.args.work) / "data" / "glue"
    command = [*bench_command("finetune_throughput"),
               "--device", session.args.device, "--glue", str(glue),
               "--modes", ",".join(modes), *session.args.finetune_args.split(),
               "--json-out", str(out)]  # fmt: skip
    finished = bounded_phase(session, "finetune", command, cwd=Path(session.args.work))
    if not out.exists():
        return
    with contextlib.suppress(OSError, ValueError, KeyError):
        result = json.loads(out.read_text())
        rates = {m: result[f"{m}_examples_per_s"] for m in result["modes"]}
        profiles = {
            mode: recorded_profile(summary) for mode, summary in result.get("profiles", {}).items()
        }
        session.phase(
            "finetune",
            examples_per_s=rates,
            ratio=result.get("ratio"),
            compile_seconds=result.get("compile_seconds"),
            profile=profiles,
            **({} if finished else {"measured_modes": result["modes"]}),
        )
        chosen = fastest(rates, FINETUNE_MODES, session)
        if chosen is not None:  # the padding it was timed with goes with it (bucketed graphs)
            mode = next(m for m, value in FINETUNE_MODES.items() if value == chosen)
            padding = result.get("padding", {}).get(mode, "dynamic")
            buckets = result.get("length_buckets") if padding == "buckets" else None
            remember(session, "finetune.recipe.compile", chosen)
            remember(session, "finetune.recipe.padding", padding)
            remember(session, "finetune.recipe.length_buckets", buckets, forget=buckets is None)


def fastest(rates: dict[str, float], modes: dict[str, Any], session: Session) -> Any:
    """The compile value of the fastest side measured, or None (the spec's own setting stands)
    where this session's CUDA tests did not run and pass: a compiled step that ran fast but
    wrong must not be used, and the spec's default is the one the tests have vetted before."""
    if session.record["phases"].get("tests", {}).get("status") != "finished":
        return None
    measured = {side: rate for side, rate in rates.items() if side in modes}
    return modes[max(measured, key=measured.get)] if measured else None


def measured_path(session: Session) -> Path:
    """Where the fastest modes measured on this machine stay for a later command
    (``WORK`` outlives a command while the machine is held; ``OUT`` does not)."""
    return Path(session.args.work) / "measured.json"


def remember(session: Session, key: str, value: Any, forget: bool = False) -> None:
    """Keep ``key``'s measured value for ``--compile measured`` (None: nothing to keep);
    ``forget``: drop what an earlier command kept of it (a bucket list, once the fastest
    fine-tuning mode pads dynamically)."""
    if value is None and not forget:
        return
    measured = session.record.setdefault("measured", {})  # not a phase: it has no status
    if forget:
        measured.pop(key, None)
    else:
        measured[key] = value
    session.save()
    path = measured_path(session)
    with contextlib.suppress(OSError, ValueError):
        known = json.loads(path.read_text()) if path.exists() else {}
        if forget:
            known.pop(key, None)
        else:
            known[key] = value
        tmp = path.with_name(path.name + ".tmp")  # whole, then renamed, like session.json
        tmp.write_text(json.dumps(known))
        os.replace(tmp, path)


def study_settings(session: Session) -> list[str]:
    """``--set`` overrides of the study beyond its budget: ``--compile measured`` applies the
    fastest modes this machine measured (none where nothing was measured), then the session's
    own ``--set`` (e.g. ``finetune.seeds=[0,1,2]``), which come last and so win."""
    measured: list[str] = []
    if session.args.compile == "measured":
        with contextlib.suppress(OSError, ValueError):
            known = json.loads(measured_path(session).read_text())
            measured = [f"{key}={json.dumps(value)}" for key, value in sorted(known.items())]
    return [*measured, *session.args.settings]


def reuse_records(session: Session) -> list[str]:
    """Copy ``--reuse``'s finished evaluation records beside the study folder; their names."""
    copied = []
    for folder in session.args.reuse:
        for source in sorted(Path(folder).glob("*/finetune")):
            target = Path(session.args.work) / f"reused-{source.parent.name}" / "finetune"
            target.mkdir(parents=True, exist_ok=True)
            for record in source.glob("*.json"):
                shutil.copyfile(record, target / record.name)
            copied.append(source.parent.name)
    return copied


def study_args(session: Session, *extra: str) -> list[str]:
    a = session.args
    return session.ablate(
        "run", str(Path(a.kit) / "spec.yaml"), "--data-bundle", str(Path(a.work) / "data"),
        "--device", a.device, "--no-progress", *extra,
    )  # fmt: skip


def plan(session: Session) -> dict[str, Any] | None:
    """The study's dry run at the spec's own budget, timed on this device (``plan.json``, kept
    beside the replay's plan; the choice is the replay's)."""
    out = session.out / "plan.json"
    command = study_args(session, "--out", str(Path(session.args.work) / "plan-study"),
                         "--dry-run", "--plan-json", str(out))  # fmt: skip
    if not bounded_phase(session, "plan", command, cwd=Path(session.args.work)):
        return None
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError) as e:
        session.phase("plan", status="failed", why=f"plan.json unreadable: {e}")
        return None


def named_seeds(settings: list[str]) -> list[int] | None:
    """The fine-tuning seeds the session's own ``--set finetune.seeds=[...]`` names (the last
    one wins, as in ``ablate run``), or None: then the replay chooses them."""
    seeds = None
    for setting in settings:
        key, _, value = setting.partition("=")
        if key.strip() == "finetune.seeds":
            try:
                seeds = [int(seed) for seed in json.loads(value)]
            except (ValueError, TypeError):
                seeds = None  # not a list the replay can read: ablate run judges it
    return seeds


def named_schedule(session: Session) -> replay.Schedule:
    """The study's schedule as ``--set schedule.shape=...`` / ``schedule.beside=N`` leave it
    (the spec's defaults otherwise: ``auto``, resolved for one card, and 0 beside)."""
    shape, beside = "auto", 0
    for setting in session.args.settings:
        key, _, value = setting.partition("=")
        with contextlib.suppress(ValueError, TypeError):
            if key.strip() == "schedule.shape":
                shape = str(json.loads(value)) if value.startswith('"') else value.strip()
            elif key.strip() == "schedule.beside":
                beside = int(value)
    return replay.session_schedule(session.args.device, session.args.workers, shape, beside)


def carried_records(session: Session) -> list[dict[str, Any]]:
    """The finished evaluation records beside the study folder (``WORK/*/finetune``: earlier
    studies on this machine and ``--reuse``'s copies), which ``ablate run`` reads back by id
    instead of running them again."""
    records = []
    for path in sorted(Path(session.args.work).glob("*/finetune/*.json")):
        with contextlib.suppress(OSError, ValueError):
            if path.stat().st_size <= 64 * 2**10:  # a record is under 1 kB
                record = json.loads(path.read_text())
                if isinstance(record, dict):
                    records.append(record)
    return records


def compile_cache_state(session: Session) -> str:
    """``warm`` where a compile cache lies in ``WORK`` (carried by the kit or left by an
    earlier command; whether its processes could use it, ``compile_cache`` in session.json
    says afterwards), else ``cold``."""
    return "warm" if (cache_folder(session) / compile_cache.MANIFEST).is_file() else "cold"


def choose_rung(session: Session) -> replay.Choice | None:
    """The replay's choice for the time left (less ``PACK_RESERVE_S``): the largest rung, then
    the most fine-tuning seeds (or the seeds the session's ``--set`` names), replayed to end
    inside it with ``replay.MARGIN``; None on a device the replay was not fitted on."""
    if session.args.device != REPLAYED_DEVICE:
        return None
    schedule = named_schedule(session)
    study = replay.committed_study()
    return replay.choose(
        session.left() - PACK_RESERVE_S, session.args.workers, schedule.shape, schedule.beside,
        compile_cache_state(session), session.args.ladder, seeds=named_seeds(session.args.settings),
        carried=replay.carried_keys(carried_records(session), study), study=study,
    )  # fmt: skip


def replayed_record(session: Session, choice: replay.Choice | None) -> dict[str, Any]:
    """What session.json keeps of the choice: the replayed plan job by job (predicted start and
    end in seconds of the study command, and whether the deadline cuts it) and the card's share
    each kind of process takes (the sharing law's loads)."""
    if choice is None:
        return {"replayed": None}
    schedule = named_schedule(session)
    return {
        "replayed": {
            "seeds": list(choice.seeds), "fits": choice.fits, "shape": schedule.shape,
            "beside": schedule.beside, "compile_ahead": schedule.compile_ahead,
            "workers": session.args.workers, "compile_cache": compile_cache_state(session),
            "deadline_s": choice.replay.deadline_s, "margin": replay.MARGIN,
            "end_s": round(choice.replay.end_s, 1), "cut": len(choice.replay.cut),
            "jobs": replay.plan_record(choice.replay),
        },
        "card_load": replay.card_loads(replay.fitted()),
    }  # fmt: skip


def rung_label(rung: float) -> str:
    """A rung as it names files and folders: ``3e15``, ``1.2e10``."""
    return f"{rung:.3g}".replace("+", "")


def study_folder(session: Session) -> Path:
    """The study folder of this session's rung (each rung is a study of its own: the budget is
    part of the spec that makes a study)."""
    return Path(session.args.work) / f"study-{rung_label(session.rung)}"


def pack(session: Session, rung_args: list[str], pack_path: Path) -> str | None:
    """Collect the finished work into the study's tables, then pack it (atomically): None once
    the pack is written, else the line saying why not (the failing command's own ``error:``
    line: a full disk, a folder where the pack should go)."""
    study = study_folder(session)
    for what, command in (
        ("ablate run --collect", study_args(session, "--out", str(study), *rung_args, "--collect")),
        ("ablate pack", session.ablate("pack", str(study), "--out", str(pack_path))),
    ):
        with session.log_file() as log:
            done = subprocess.run(
                command, stdout=log, stderr=subprocess.PIPE, text=True, errors="replace",
                cwd=session.args.work,
            )  # fmt: skip
            with contextlib.suppress(OSError):
                log.write(done.stderr)
                log.flush()
        if done.returncode != 0:
            return f"{what} failed (exit {done.returncode}): {last_error(done.stderr)}"
    if not pack_path.is_file():
        return f"ablate pack exited 0 but left no file {pack_path}"
    return None


def last_error(stderr: str) -> str:
    """A failed command's one line: its last ``error:`` line, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or ["no output"])[-1][:500]


def record_pack(session: Session, pack_path: Path, error: str | None) -> None:
    """The study phase's pack facts: ``pack`` names the file only where it is there (an
    earlier pack, where the last one failed: ``packed_at_s`` says when), ``packed`` whether the
    last pack was written, ``pack_error`` why not."""
    entry = session.record["phases"]["study"]
    entry.pop("pack", None)
    entry.pop("pack_error", None)
    if pack_path.is_file():
        entry["pack"] = pack_path.name
    entry["packed"] = error is None
    if error is not None:
        entry["pack_error"] = error
    session.save()


def files_in(folder: Path) -> int:
    """The files under ``folder``, as a node counts what it sends back."""
    return sum(1 for p in Path(folder).rglob("*") if p.is_file())


def free_bytes(session: Session) -> int:
    """What the files still to be sent back may weigh: ``OUT_BYTES`` less what OUT holds and
    ``RECORD_RESERVE`` for the record and the log."""
    held = sum(p.stat().st_size for p in session.out.rglob("*") if p.is_file())
    return OUT_BYTES - held - RECORD_RESERVE


def read_json(path: Path) -> Any:
    """A JSON file's content, or None where it does not read."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------ where the time went: jobs

JOB_FIELDS = ("kind", "label", "task", "seed", "finetune_seed", "fraction", "run_id", "job_id",
              "pid", "start_s", "end_s", "status", "compile_s", "steps", "trained_from_s",
              "trained_until_s", "gate_wait_s")  # fmt: skip
"""What each entry of ``session.json``'s ``jobs`` has (None where unknown): ``seed`` is the
unit's, ``finetune_seed`` the evaluation's; ``start_s`` and ``end_s`` are seconds since the
session started; ``status`` done / failed / skipped, ``cut`` (started, not finished), ``running``
(while the study runs) or ``not started``. A pre-training that held the one card's device gate
(``electra_ablate.infra.device_gate``: it compiled first, then waited for the card) also has
the seconds it trained between (``trained_from_s``, ``trained_until_s``) and waited
(``gate_wait_s``)."""


def job_entry(**facts: Any) -> dict[str, Any]:
    """One entry of ``jobs``: every field of ``JOB_FIELDS``, then any other fact."""
    return {key: facts.get(key) for key in JOB_FIELDS} | {
        key: value for key, value in facts.items() if key not in JOB_FIELDS
    }


def read_schedule(path: Path) -> tuple[list[dict[str, Any]], int]:
    """A study's ``schedule.jsonl`` events in the order written, and how many lines did not
    read: a kill may tear the last line, and a line that is not an event of a known kind with a
    time is passed over, never trusted."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return [], 0
    events, unread = [], 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            unread += 1
            continue
        if (
            not isinstance(event, dict)
            or event.get("event") not in ("start", "end")
            or event.get("kind") not in SCHEDULE_KINDS
            or not isinstance(event.get("t"), (int, float))
        ):
            unread += 1
            continue
        events.append(event)
    return events, unread


def planned_units(study: Path) -> list[dict[str, Any]]:
    """The units the study plans (its ``plan.json``: kind, label, seed, run id, count of
    jobs); none where it is not written yet or does not read."""
    plan = read_json(Path(study) / "plan.json")
    units = plan.get("units") if isinstance(plan, dict) else None
    return [
        u
        for u in (units if isinstance(units, list) else [])
        if isinstance(u, dict)
        and isinstance(u.get("run_id"), str)
        and isinstance(u.get("jobs"), int)
    ]


def evaluation_records(study: Path) -> dict[str, dict[str, Any]]:
    """The study's evaluation records by job id (one that does not read is passed over)."""
    records = {}
    for path in sorted((Path(study) / "finetune").glob("*.json")):
        record = read_json(path)
        if isinstance(record, dict) and isinstance(record.get("job_id"), str):
            records[record["job_id"]] = record
    return records


def study_jobs(study: Path, started: float, final: bool) -> tuple[list[dict[str, Any]], int]:
    """Every job of a study as ``session.json``'s ``jobs`` says it, and the lines of its
    ``schedule.jsonl`` that did not read.

    Each start event is a job, matched with the first end of the same work by the same
    process: its seconds since ``started``, its status (its end's; with no end, ``cut`` once
    the study is over, else ``running``), its compile seconds and steps. An evaluation whose
    record is there but that no event names was read back or copied (``earlier: true``). The
    rest of the plan (``plan.json``) is ``not started``: a run as one entry, a unit's
    evaluations as one entry with their ``count`` (their ids are the study's to compute)."""
    events, unread = read_schedule(Path(study) / "schedule.jsonl")
    jobs: list[dict[str, Any]] = []
    in_flight: dict[tuple, list[dict[str, Any]]] = {}
    for event in events:
        key = (event.get("kind"), event.get("run_id"), event.get("job_id"), event.get("pid"))
        facts = {k: event.get(k) for k in JOB_FIELDS if k in event}
        at = round(event["t"] - started, 1)
        if event["event"] == "start":
            job = job_entry(**facts | {"start_s": at, "status": "cut" if final else "running"})
            jobs.append(job)
            in_flight.setdefault(key, []).append(job)
        elif in_flight.get(key):
            job = in_flight[key].pop(0)
            job.update(end_s=at, status=str(event.get("status") or "done"))
            job.update(compile_s=event.get("compile_s"), steps=event.get("steps"))
            job.update(gate_wait_s=event.get("gate_wait_s"))
            for key in ("trained_from", "trained_until"):
                if isinstance(event.get(key), (int, float)):
                    job[f"{key}_s"] = round(event[key] - started, 1)
        else:  # its start line did not read
            jobs.append(job_entry(**facts | {"end_s": at, "status": str(event.get("status"))}))
    units = planned_units(study)
    by_id = {u["run_id"]: u for u in units}
    records = evaluation_records(study)
    named = {j["job_id"] for j in jobs if j["job_id"]}
    for job_id, record in records.items():
        if job_id not in named:
            unit = by_id.get(record.get("run_id"), {})
            jobs.append(job_entry(
                kind="evaluation", label=unit.get("label"), task=record.get("task"),
                seed=unit.get("seed"), finetune_seed=record.get("seed"),
                fraction=record.get("fraction"), run_id=record.get("run_id"), job_id=job_id,
                status=record.get("status"), earlier=True,
            ))  # fmt: skip
    for unit in units:
        run_id, who = unit["run_id"], {"label": unit.get("label"), "seed": unit.get("seed")}
        pretrained = any(j["kind"] == "pretrain" and j["run_id"] == run_id for j in jobs)
        if unit.get("kind") == "run" and not pretrained and not run_done(study, run_id):
            jobs.append(job_entry(kind="pretrain", run_id=run_id, status="not started", **who))
        recorded = {i for i, r in records.items() if r.get("run_id") == run_id}
        cut = {j["job_id"] for j in jobs if j["run_id"] == run_id and j["job_id"]} - recorded
        if (left := unit["jobs"] - len(recorded) - len(cut)) > 0:
            jobs.append(job_entry(
                kind="evaluation", run_id=run_id, status="not started", count=left, **who
            ))  # fmt: skip
    return jobs, unread


def run_done(study: Path, run_id: str) -> bool:
    """Whether the study holds the run ``run_id`` finished (its ``done.json``)."""
    return any(Path(study).glob(f"pretrain/*-{run_id}/done.json"))


def refresh_jobs(session: Session, final: bool) -> None:
    """The study's part of ``jobs`` read again from its ``schedule.jsonl``, with each worker
    process's compile seconds summed (``compile_s_by_process``)."""
    jobs, unread = study_jobs(study_folder(session), session.args.started, final)
    session.study_jobs = jobs
    by_process: dict[str, float] = {}
    for job in jobs:
        if isinstance(job["compile_s"], (int, float)) and job["pid"] is not None:
            pid = str(job["pid"])
            by_process[pid] = round(by_process.get(pid, 0.0) + job["compile_s"], 1)
    facts: dict[str, Any] = {"compile_s_by_process": by_process}
    if unread:
        facts["schedule_lines_unread"] = unread
    session.phase("study", **facts)


# ---------------------------------------------------- what the deadline cut: kept encoders


def cut_units(study: Path, jobs: list[dict[str, Any]]) -> list[kept_parts.CutUnit]:
    """The study's runs that finished pre-training and have evaluations without a record (cut,
    or never started), each with its kept fractions in the order to return them: the final
    one, those its cut evaluations had started on, then the rest."""
    records = evaluation_records(study)
    units = []
    for unit in planned_units(study):
        if unit.get("kind") != "run":
            continue
        folders = [p.parent for p in Path(study).glob(f"pretrain/*-{unit['run_id']}/done.json")]
        done = read_json(folders[0] / "done.json") if len(folders) == 1 else None
        if not isinstance(done, dict) or done.get("status") != "done":
            continue
        unfinished = unit["jobs"] - sum(r.get("run_id") == unit["run_id"] for r in records.values())
        if unfinished <= 0:
            continue
        started_on = {
            float(j["fraction"])
            for j in jobs
            if j["run_id"] == unit["run_id"]
            and j["status"] in ("cut", "running")
            and isinstance(j["fraction"], (int, float))
        }
        order = kept_parts.return_order(folders[0], started_on)
        units.append(kept_parts.CutUnit(folders[0], unfinished, order))
    return units


def return_kept(session: Session, name: str) -> None:
    """Send back the kept encoders of the runs whose evaluations were cut, as parts
    ``<name>-<rung>.kept.partIofN`` (``name``: the study's; ``kept_parts``) in the files OUT
    has left, and record in the study phase's ``kept`` what went back (``units``, ``parts``,
    ``whole``) and what could not, with why (``left_out``, ``error``). Nothing is recorded
    where nothing was cut."""
    units = cut_units(study_folder(session), session.study_jobs)
    if not units:
        return
    plan = kept_parts.plan_return(units, OUT_FILES - files_in(session.out), free_bytes(session))
    facts: dict[str, Any] = {"cut_units": {u.run.name: u.unfinished for u in units}}
    if plan.chosen:
        try:
            rung = f"{name}-{rung_label(session.rung)}"  # as the pack is named
            facts |= kept_parts.write_parts(plan, rung, session.out, Path(session.args.work))
            sent = ", ".join(p["file"] for p in facts["parts"])
            session.say(f"study: the cut runs' kept encoders went back as {sent}")
        except (AblateError, OSError) as e:
            why = f"the parts could not be written ({e})"
            left = [kept_parts.left(run, f, why) for run, fs in plan.chosen.items() for f in fs]
            facts |= {"units": {}, "parts": [], "left_out": plan.left_out + left, "error": str(e)}
            session.unwritten.append(f"the kept parts ({e})")
            session.say(f"study: the kept encoders could not be sent back: {e}")
    else:
        facts |= plan.as_record() | {"parts": []}
    if facts["left_out"]:
        session.say(f"study: kept encoders not sent back: {facts['left_out']}")
    session.phase("study", kept=facts)


def reuse_kept(session: Session) -> dict[str, Any]:
    """Rebuild the runs of the kept parts lying in each ``--reuse`` folder in a study folder
    beside this session's (``reused-<name>``, where ``reuse_records`` puts that rung's
    evaluation records), which ``ablate run`` then copies as identical finished runs. Parts
    that do not verify are named and passed over: their runs are trained again."""
    rebuilt: dict[str, Any] = {}
    for folder in session.args.reuse:
        for name, paths in kept_parts.found_parts(Path(folder)).items():
            target = Path(session.args.work) / f"reused-{name}"
            try:
                rebuilt[name] = kept_parts.unpack_parts(paths, target, Path(session.args.work))
                session.say(f"study: kept parts {name} rebuilt {', '.join(rebuilt[name])}")
            except (AblateError, OSError) as e:
                rebuilt[name] = {"error": str(e)}
                session.say(f"study: kept parts {name} not used: {e}")
    return rebuilt


# ----------------------------------------------------------------- the compile cache


def cache_folder(session: Session) -> Path:
    return Path(session.args.work) / "compile-cache"


def carry_cache(session: Session) -> None:
    """Point every child at ``WORK/compile-cache`` (``ABLATE_COMPILE_CACHE``, set even without a
    carried cache, so the end can save a cold one) and, where the kit carries a compile cache
    (``kit.json``'s ``compile_cache``), check its sha256 and unpack it there first. A cache
    this machine filled in an earlier command is kept: it is this card's own."""
    folder = cache_folder(session)
    os.environ[compile_cache.ENV] = str(folder)
    kit = read_json(Path(session.args.kit) / "kit.json")
    entry = kit.get("compile_cache") if isinstance(kit, dict) else None
    record: dict[str, Any] = {"folder": str(folder), "carried": None}
    session.record["compile_cache"] = record
    if not isinstance(entry, dict):
        record["unpacked"] = "no: the kit carries no compile cache"
        session.save()
        return
    archive = Path(session.args.kit) / compile_cache.ARCHIVE
    record["carried"] = {"sha256": entry.get("sha256"), "bytes": entry.get("bytes")}
    begun, status = now(), "done"
    try:
        if sha256(archive) != entry.get("sha256"):
            raise AblateError(f"{archive} does not match the sha256 kit.json gives it")
        if folder.is_dir() and any(folder.iterdir()):
            record["unpacked"] = "no: this machine's own cache, from an earlier command, is used"
            status = "skipped"
        else:
            info = compile_cache.unpack_cache(archive, folder)
            record["unpacked"] = f"yes: {info.files} files, {info.unpacked_bytes} bytes"
            record["carried"]["made_by"] = info.manifest
    except (AblateError, OSError) as e:
        record["unpacked"] = f"no: {e}"
        status = "failed"
        session.say(f"compile cache: the kit's is not used: {e}")
    times = {"start_s": session.since(begun), "end_s": session.since(now())}
    session.phase_jobs.append(
        job_entry(kind="compile_cache", label="unpack", status=status, **times)
    )
    session.save()


def cache_activations(folder: Path) -> dict[str, Any]:
    """How the processes used the cache (``activations.jsonl``: warm, cold, ignored with why);
    a line that does not read is passed over."""
    counts: dict[str, Any] = {}
    whys: list[str] = []
    with contextlib.suppress(OSError):
        for line in (folder / compile_cache.ACTIVATIONS).read_text().splitlines():
            with contextlib.suppress(ValueError, AttributeError):
                activation = json.loads(line)
                status = str(activation.get("status"))
                counts[status] = counts.get(status, 0) + 1
                if status in ("ignored", "unusable") and activation.get("why") not in whys:
                    whys.append(str(activation.get("why")))
    return counts | ({"why": whys[:3]} if whys else {})


PACK_CACHE = (
    "import json, sys\n"
    "from electra_ablate.infra.compile_cache import pack_cache\n"
    "r = pack_cache(sys.argv[1], sys.argv[2])\n"
    "print(json.dumps({'refused': r.refused, 'bytes': r.bytes, 'files': r.files}))\n"
)
"""Packs the compile cache in a child process: xz takes as long as the cache is big, and a
child can be stopped at the deadline (its half-written archive is in WORK, never in OUT)."""


def save_cache(session: Session) -> None:
    """At the end of a study command: the compile cache as ``OUT/compile-cache.tar.xz`` where a
    file is left, the time allows and it packs within its limit; ``compile_cache`` in
    ``session.json`` says how it was used (``used``) and what was saved (``saved``, bytes) or
    why not (``not_saved``). A copy into OUT that fails fails the session."""
    folder = cache_folder(session)
    record = session.record.setdefault("compile_cache", {"folder": str(folder), "carried": None})
    record["used"] = cache_activations(folder)
    record["saved"] = None
    target = session.out / compile_cache.ARCHIVE
    left = session.left()
    if files_in(session.out) >= OUT_FILES:
        record["not_saved"] = f"no file is left of the {OUT_FILES} OUT may hold"
    elif left < COMPILE_CACHE_SAVE_S:
        record["not_saved"] = f"{left:.0f} s left of the session"
    else:
        begun, status = now(), "failed"
        scratch = Path(session.args.work) / compile_cache.ARCHIVE
        command = [sys.executable, "-c", PACK_CACHE, str(folder), str(scratch)]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=left - 5, cwd=session.args.work,
                env={**os.environ, "PYTHONSAFEPATH": "1"},
            )  # fmt: skip
            packed = (
                json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
            )
            if not packed:
                record["not_saved"] = f"packing failed: {last_error(done.stderr)}"
            elif packed.get("refused"):
                record["not_saved"] = packed["refused"]
            elif packed.get("bytes", 0) > free_bytes(session):
                record["not_saved"] = (
                    f"{packed['bytes']} bytes, more than the {free_bytes(session)} left of the "
                    f"{OUT_BYTES // 2**20} MiB OUT may send back"
                )
            else:
                tmp = target.with_name(f".{target.name}.tmp")
                try:
                    shutil.copyfile(scratch, tmp)
                    os.replace(tmp, target)
                except OSError as e:
                    tmp.unlink(missing_ok=True)
                    record["not_saved"] = f"cannot write {target}: {e.strerror or e}"
                    session.unwritten.append(f"the compile cache ({record['not_saved']})")
                else:
                    record["saved"] = {"file": target.name, "bytes": target.stat().st_size}
                    record.pop("not_saved", None)
                    status = "done"
        except subprocess.TimeoutExpired:
            record["not_saved"] = f"packing it took more than the {left - 5:.0f} s left"
            status = "cut"
        except (OSError, ValueError, IndexError) as e:
            record["not_saved"] = f"packing failed: {e}"
        times = {"start_s": session.since(begun), "end_s": session.since(now())}
        session.phase_jobs.append(
            job_entry(kind="compile_cache", label="pack", status=status, **times)
        )
    if record.get("not_saved"):
        session.say(f"compile cache not saved: {record['not_saved']}")
    session.save()


# ----------------------------------------------------------------------- MPS


MPS_CONTROL = "nvidia-cuda-mps-control"


def mps_running() -> bool:
    """Whether an MPS daemon seems to be running: a process named ``nvidia-cuda-mps…`` (the
    control daemon or its server), or the control pipe in ``CUDA_MPS_PIPE_DIRECTORY``."""
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")) / "control"
    if pipe.exists():
        return True
    for comm in glob.glob("/proc/[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if Path(comm).read_text().startswith("nvidia-cuda-mps"):
                return True
    return False


def mps(session: Session, start: bool) -> None:
    """Record whether CUDA's MPS control is installed and a daemon seems to run (``mps`` in
    ``session.json``); with ``--mps`` (``start``), start one for the session where none runs.
    A failure is one line, never the session's end."""
    control = shutil.which(MPS_CONTROL)
    record: dict[str, Any] = {"control": control, "daemon_running": mps_running()}
    session.record["mps"] = record
    if start:
        if control is None:
            record["started"] = f"no: {MPS_CONTROL} is not installed"
        elif record["daemon_running"]:
            record["started"] = "no: a daemon already runs (left as it is)"
        else:
            try:
                done = subprocess.run([control, "-d"], capture_output=True, text=True, timeout=15)
                ok = done.returncode == 0
                record["started"] = "yes" if ok else f"no: {last_error(done.stderr + done.stdout)}"
            except (OSError, subprocess.SubprocessError) as e:
                record["started"] = f"no: {e}"
        session.say(f"MPS: started {record['started']}")
    session.save()


def stop_mps(session: Session) -> None:
    """Stop the MPS daemon this session started (``quit`` to its control)."""
    record = session.record.get("mps") or {}
    if record.get("started") != "yes":
        return
    try:
        done = subprocess.run(
            [record["control"]], input="quit\n", capture_output=True, text=True, timeout=15
        )
        record["stopped"] = "yes" if done.returncode == 0 else f"no: {last_error(done.stderr)}"
    except (OSError, subprocess.SubprocessError) as e:
        record["stopped"] = f"no: {e}"
    session.save()


def finished_work(session: Session) -> dict[str, Any]:
    """What the study folder holds finished: each run's steps and steps/s, the fine-tunes."""
    study = study_folder(session)
    runs = []
    for done in sorted(glob.glob(str(study / "pretrain" / "*" / "done.json"))):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(Path(done).read_text())
            wall = record.get("wall_s") or 0.0
            runs.append({
                "run": Path(done).parent.name, "steps": record.get("steps"),
                "wall_s": round(wall, 1),
                "steps_per_s": round(record["steps"] / wall, 2) if wall else None,
                "flops_paper": record.get("flops_paper"),
                "compiled": record.get("compiled"), "compile_mode": record.get("compile_mode"),
                "compile_error": record.get("compile_error"),
            })  # fmt: skip
    jobs = {"done": 0, "failed": 0}
    rates: dict[str, list[float]] = {"finetune_examples_per_s": [], "probe_s": []}
    for path in glob.glob(str(study / "finetune" / "*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError, ZeroDivisionError):
            record = json.loads(Path(path).read_text())
            status = record.get("status")
            jobs[status if status in jobs else "failed"] += 1
            metrics = record.get("metrics") or {}
            if "epochs" in metrics:  # a fine-tune: examples seen per second of training
                seen = metrics["train_examples"] * metrics["epochs"]
                rates["finetune_examples_per_s"].append(seen / metrics["train_seconds"])
            elif "wall_seconds" in metrics:  # a probe: features and a fit
                rates["probe_s"].append(metrics["wall_seconds"])
    measured = {  # the median job's, and the range
        key: {"median": round(statistics.median(v), 1), "min": round(min(v), 1),
              "max": round(max(v), 1), "jobs": len(v)}
        for key, v in rates.items() if v
    }  # fmt: skip
    return {"runs": runs, "evaluations": jobs, **measured}


def study(session: Session) -> None:
    left = session.left() - PACK_RESERVE_S
    if left < MIN_PHASE_S * 4:
        session.phase("study", status="skipped", why=f"{session.left():.0f} s left of the session")
        return
    reused = reuse_records(session)  # first: the replay counts what they spare the study
    choice = choose_rung(session)
    rung, why = session.args.ladder[0], f"no replay on {session.args.device}: the first rung"
    if choice is not None:
        rung, why = choice.rung, choice.why
    session.rung = rung
    settings = study_settings(session)
    if choice is not None and named_seeds(session.args.settings) is None:
        settings.append("finetune.seeds=" + json.dumps(list(choice.seeds), separators=(",", ":")))
    rung_args = [
        "--set",
        f"budget.flops={rung:.1e}",
        *(a for kv in settings for a in ("--set", kv)),
    ]
    reused_kept = reuse_kept(session)
    name = json.loads((Path(session.args.kit) / "kit.json").read_text())["study"]
    pack_path = session.out / f"{name}-{rung_label(rung)}.pack.tar.gz"
    started = now()
    session.phase("study", status="running", budget_flops=rung, chosen=why,
                  **replayed_record(session, choice), settings=settings,
                  reused_from=reused)  # fmt: skip
    if reused_kept:
        session.phase("study", reused_kept=reused_kept)
    stop_packing = threading.Event()

    def packer() -> None:  # the last pack is never older than PACK_EVERY seconds
        while not stop_packing.wait(session.args.pack_every):
            error = pack(session, rung_args, pack_path)
            refresh_jobs(session, final=False)
            if error is None:
                session.phase("study", packed_at_s=session.since(now()), **finished_work(session))
            record_pack(session, pack_path, error)

    thread = threading.Thread(target=packer, daemon=True)
    thread.start()
    command = study_args(session, "--out", str(study_folder(session)), *rung_args,
                         "--workers", str(session.args.workers))  # fmt: skip
    try:
        status = session.run(
            "study", command, session.left() - PACK_RESERVE_S, Path(session.args.work)
        )
    finally:  # also when a signal stopped the study: the last pack is written first
        session.deferring = True
        stop_packing.set()
        thread.join()
        error = pack(session, rung_args, pack_path)
        if error is not None:
            session.unwritten.append(f"the pack ({error})")
            session.say(f"study: the pack could not be written: {error}")
        refresh_jobs(session, final=True)
        session.phase("study", seconds=round(now() - started, 1), **finished_work(session))
        record_pack(session, pack_path, error)
        return_kept(session, name)
        session.deferring = False
    if session.deferred is not None:
        raise Stopped(session.deferred)
    why = "the session's deadline came first" if status == "stopped" else ""
    session.phase("study", status=status, **({"why": why} if why else {}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kit", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument(
        "--repo", required=True, help="the checkout whose tests/ holds the CUDA tests"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seconds", type=float, default=540.0, help="the whole call's wall time")
    parser.add_argument(
        "--started", type=float, default=now(), help="when the call started (epoch s)"
    )
    parser.add_argument(
        "--workers", type=int, default=WORKERS, help=f"the study's processes (default {WORKERS})"
    )
    parser.add_argument("--doctor-steps", type=int, default=10)
    parser.add_argument(
        "--bench-args", default="--preset small --batch 128 --steps 20 --warmup 3 --no-memory"
    )
    parser.add_argument(
        "--finetune-args",
        default=f"--preset small --tasks sst2,mrpc --cap 2048 --profile {PROFILE_STEPS}",
        help="bench/finetune_throughput.py's arguments for the finetune phase",
    )  # fmt: skip
    parser.add_argument(
        "--phases",
        default="doctor,tests,bench,study",
        help="of doctor, tests, bench, finetune, plan, study (run in that order; finetune and "
        "plan only where named: the replay, not the dry run, chooses the rung)",
    )
    parser.add_argument(
        "--compile", choices=["spec", "measured"], default="spec",
        help="the study's compile settings: the spec's, or the fastest measured on this machine",
    )  # fmt: skip
    parser.add_argument(
        "--reuse", action="append", default=[], metavar="FOLDER",
        help="a folder of study folders whose finished evaluation records may be reused",
    )  # fmt: skip
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="a study override (ablate run --set), applied to the run and every collect",
    )  # fmt: skip
    parser.add_argument("--pack-every", type=float, default=PACK_EVERY, help="seconds")
    parser.add_argument(
        "--mps", action="store_true",
        help="start CUDA's MPS daemon for the session (and stop it at the end); without it the "
        "session only records whether one runs",
    )  # fmt: skip
    parser.add_argument(
        "--ladder",
        default=",".join(f"{r:.3g}" for r in LADDER),
        help="the budgets to choose from (a CPU rehearsal's are smaller)",
    )
    args = parser.parse_args()
    args.ladder = sorted(float(r) for r in args.ladder.split(","))
    args.phases = phases = args.phases.split(",")
    session = Session(args)

    def stop(signum: int, _frame: object) -> None:
        if session.deferring:  # the last pack is being written: finish it, then stop
            session.deferred = signum
            return
        if session.stopping:  # a second signal (node.sh forwards what its group got too)
            return
        session.stopping = True
        raise Stopped(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    session.save()
    try:
        mps(session, start=args.mps)
        carry_cache(session)
        for name, step in (
            ("doctor", doctor), ("tests", tests), ("bench", bench), ("finetune", finetune),
        ):  # fmt: skip
            if name in phases:
                step(session)
        if "plan" in phases:
            plan(session)
        if "study" in phases:
            study(session)
            save_cache(session)
    except Stopped as e:
        for entry in session.record["phases"].values():
            if entry.get("status") == "running":
                entry.update(status="stopped", why=f"{e} reached the session")
        session.record["status"] = f"stopped by {e}" + unwritten(session)
        session.say(f"stopped by {e}: the record and the last pack are in {session.out}")
        session.save()
        return 128 + e.signum
    finally:
        stop_mps(session)
    session.record["status"] = final_status(session)
    session.save()  # where OUT refuses even this, the status below says so on stdout
    session.say(f"session {final_status(session)} ({now() - args.started:.0f} s)")
    return 0 if final_status(session) == "finished" else 1


def final_status(session: Session) -> str:
    """``finished`` only where every phase asked for finished and every file the session meant
    to leave was written; else ``incomplete: <phase> <status>, ...`` or, where a file could not
    be written (the pack, the kept parts, the compile cache, the record itself), ``failed: not
    written: <file> (<why>); ...``."""
    statuses = {n: p.get("status") for n, p in session.record["phases"].items()}
    ok = all(s == "finished" for s in statuses.values()) and len(statuses) == len(
        session.args.phases
    )
    status = "finished" if ok else "incomplete: " + ", ".join(
        f"{n} {s}" for n, s in statuses.items() if s != "finished"
    )  # fmt: skip
    if session.unwritten:  # a file the session should have left is not there: it failed
        status = "failed: " + unwritten(session)[2:] + ("" if ok else f"; {status}")
    return status


def unwritten(session: Session) -> str:
    """``; not written: the pack (why)…`` for the status line, or nothing."""
    return f"; not written: {'; '.join(session.unwritten)}" if session.unwritten else ""


if __name__ == "__main__":
    sys.exit(main())
