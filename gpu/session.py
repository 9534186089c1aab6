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
4. ``plan``: the study's own time model measured here (``ablate run --dry-run --plan-json``:
   each objective's real training step and each task's estimate, timed on this device);
5. ``study``: the largest rung of ``LADDER`` that the time model says fits the time left
   (``budget.flops``), run with ``--workers`` processes sharing the GPU. While it runs, the
   finished work is collected and packed every ``PACK_EVERY`` seconds (``ablate run --collect``,
   ``ablate pack``) into ``OUT/<study>-<rung>.pack.tar.gz``, replaced atomically; at the
   deadline the study is stopped (SIGTERM: finished runs and fine-tunes are kept) and packed a
   last time. ``--reuse FOLDER`` first copies finished evaluation records of earlier studies
   (``FOLDER/<study>/finetune/*.json``) beside the study folder: a job with the same id (the same
   model, task, seed and data; the baseline's do not depend on the budget) is read back, not run
   again.

Each phase is bounded by its cap (``CAPS``) and by the time left, and skipped with the reason
when too little is left. ``OUT/session.json`` is rewritten after every change of state: per
phase finished / stopped / failed / skipped and why, its seconds, the measured rates and the
time model's prediction beside them, so a kill at any moment leaves a truthful record and the
last pack. Every phase's output goes to ``OUT/session.log``. OUT holds at most seven files:
session.json, session.log, doctor.json, bench.json, finetune.json, plan.json and the pack. The
exit status is 0 only where every phase finished; SIGTERM or SIGINT stop the phase at hand,
pack what finished and exit 143 or 130.

This file imports nothing but the standard library: everything that needs torch runs in a
child process, so this one stays small and can always write the record and the pack.
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

LADDER = (1e15, 3e15, 1e16, 3e16, 1e17)
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

MARGIN = 1.25
"""The time model's prediction is multiplied by this before it is compared with the time left."""

GPU_SHARING = 2.0
"""ASSUMED, NOT MEASURED: how many of the worker processes' pre-training steps and fine-tunes
one GPU runs side by side at full speed (the small model is bound by the host, not the GPU).
session.json puts the study's measured wall time beside the prediction made with it."""

STARTUP_S = 45.0
"""ASSUMED: seconds an ``ablate run`` spends before its first step (imports, the workers'
start and CUDA contexts, loading the data), and its tables at the end."""


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
            "status": "running",
        }
        self.lock = threading.Lock()
        self.child: subprocess.Popen | None = None
        self.deferred: int | None = None  # a signal held back while the last pack is written
        self.deferring = False
        self.stopping = False  # a signal is being handled: the next ones change nothing
        self.rung = 0.0  # the budget the study phase chose

    def left(self) -> float:
        return self.deadline - now()

    def say(self, line: str) -> None:
        stamp = f"[{now() - self.args.started:6.1f}s]"
        print(f"{stamp} {line}", flush=True)
        with open(self.log_path, "a") as log:
            log.write(f"{stamp} {line}\n")

    def save(self) -> None:
        """``session.json``, written whole and renamed into place: never half a record."""
        with self.lock:
            self.record["elapsed_s"] = round(now() - self.args.started, 1)
            tmp = self.out / ".session.json.tmp"
            tmp.write_text(json.dumps(self.record, indent=2))
            os.replace(tmp, self.out / "session.json")

    def phase(self, name: str, **facts: Any) -> dict[str, Any]:
        entry = self.record["phases"].setdefault(name, {})
        entry.update(facts)
        self.save()
        return entry

    def run(self, name: str, command: list[str], limit: float, cwd: Path | None = None) -> str:
        """Run ``command`` (its own process group, its output appended to the log) for at most
        ``limit`` seconds: "finished", "failed (exit N)" or "stopped"."""
        self.say(f"{name}: {' '.join(command)} (at most {limit:.0f} s)")
        with open(self.log_path, "a") as log:
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


def bench(session: Session) -> None:
    out = session.out / "bench.json"
    bench_args = session.args.bench_args.split()
    command = [sys.executable, str(Path(session.args.kit) / "bench" / "pretrain_throughput.py"),
               "--device", session.args.device, *bench_args, "--json-out", str(out)]  # fmt: skip
    if session.args.device == "cuda":
        command += ["--compile", "true,reduce-overhead", "--profile", str(PROFILE_STEPS)]
    if bounded_phase(session, "bench", command, cwd=Path(session.args.work)):
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
FINETUNE_MODES = {"dynamic": False, "compiled": True, "cuda_graphs": "reduce-overhead"}
"""``bench/finetune_throughput.py``'s modes and the ``finetune.recipe.compile`` value of each."""
PROFILE_STEPS = 5
PROFILE_KEYS = ("host_ms", "device_busy_ms", "busy_share_of_timed", "kernels", "launches",
                "launch_ms", "graph_launches", "syncs", "cpu_ops", "top_ops")  # fmt: skip


def recorded_profile(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures of a ``bench/step_profile.py`` summary that ``session.json`` keeps (a
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
    command = [sys.executable, str(Path(session.args.kit) / "bench" / "finetune_throughput.py"),
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
        remember(session, "finetune.recipe.compile", fastest(rates, FINETUNE_MODES, session))


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


def remember(session: Session, key: str, value: Any) -> None:
    """Keep ``key``'s measured value for ``--compile measured`` (None: nothing to keep)."""
    if value is None:
        return
    session.record.setdefault("measured", {})[key] = value  # not a phase: it has no status
    session.save()
    path = measured_path(session)
    with contextlib.suppress(OSError, ValueError):
        known = json.loads(path.read_text()) if path.exists() else {}
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
    """The study's time model at the spec's own budget, measured on this device."""
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


def predict(model: dict[str, Any], rung: float, workers: int) -> dict[str, float]:
    """Seconds the study takes at ``rung``: each run's pre-training scales with its steps, so
    with its budget (the plan's row says the FLOPs it was timed at), the evaluations do not;
    ``workers`` processes share the GPU as ``GPU_SHARING`` says."""
    pretrain = [
        r["est_pretrain_s"] * rung / r["flops_paper"]
        for r in model["rows"]
        if r["status"] != "done" and r["flops_paper"] > 0
    ]
    finetune = [r["est_finetune_s"] for r in model["rows"]]
    serial = sum(pretrain) + sum(finetune)
    sharing = min(float(workers), GPU_SHARING)
    wall = max(serial / sharing, max(pretrain, default=0.0)) + STARTUP_S
    return {
        "pretrain_s": sum(pretrain),
        "finetune_s": sum(finetune),
        "serial_s": serial,
        "wall_s": wall,
    }


def choose_rung(session: Session, model: dict[str, Any] | None) -> tuple[float, str, dict]:
    """The largest rung whose predicted wall time (times ``MARGIN``) fits the time left; the
    first rung when none does (its finished parts are packed as they come) or the plan failed."""
    left = session.left() - PACK_RESERVE_S
    ladder = session.args.ladder
    if model is None:
        return ladder[0], "no time model (the plan phase did not finish): the first rung", {}
    predictions = {f"{r:.3g}": predict(model, r, session.args.workers) for r in ladder}
    fitting = [r for r in ladder if predictions[f"{r:.3g}"]["wall_s"] * MARGIN <= left]
    if fitting:
        rung = fitting[-1]
        return (
            rung,
            f"the largest rung predicted to fit {left:.0f} s (x{MARGIN} margin)",
            predictions,
        )
    return ladder[0], (f"no rung is predicted to fit {left:.0f} s: the first rung, its finished "
                       "parts packed as they come"), predictions  # fmt: skip


def rung_label(rung: float) -> str:
    """A rung as it names files and folders: ``3e15``, ``1.2e10``."""
    return f"{rung:.3g}".replace("+", "")


def study_folder(session: Session) -> Path:
    """The study folder of this session's rung (each rung is a study of its own: the budget is
    part of the spec that makes a study)."""
    return Path(session.args.work) / f"study-{rung_label(session.rung)}"


def pack(session: Session, rung_args: list[str], pack_path: Path) -> bool:
    """Collect the finished work into the study's tables, then pack it (atomically)."""
    study = study_folder(session)
    with open(session.log_path, "a") as log:
        for command in (
            study_args(session, "--out", str(study), *rung_args, "--collect"),
            session.ablate("pack", str(study), "--out", str(pack_path)),
        ):
            done = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=session.args.work
            )
            if done.returncode != 0:
                return False
    return True


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


def study(session: Session, model: dict[str, Any] | None) -> None:
    left = session.left() - PACK_RESERVE_S
    if left < MIN_PHASE_S * 4:
        session.phase("study", status="skipped", why=f"{session.left():.0f} s left of the session")
        return
    rung, why, predictions = choose_rung(session, model)
    session.rung = rung
    settings = study_settings(session)
    rung_args = [
        "--set",
        f"budget.flops={rung:.1e}",
        *(a for kv in settings for a in ("--set", kv)),
    ]
    reused = reuse_records(session)
    name = json.loads((Path(session.args.kit) / "kit.json").read_text())["study"]
    pack_path = session.out / f"{name}-{rung_label(rung)}.pack.tar.gz"
    started = now()
    session.phase("study", status="running", budget_flops=rung, chosen=why,
                  predicted=predictions.get(f"{rung:.3g}"), ladder_predictions=predictions,
                  assumed={"gpu_sharing": GPU_SHARING, "startup_s": STARTUP_S},
                  settings=settings, reused_from=reused, pack=pack_path.name)  # fmt: skip
    stop_packing = threading.Event()

    def packer() -> None:  # the last pack is never older than PACK_EVERY seconds
        while not stop_packing.wait(session.args.pack_every):
            if pack(session, rung_args, pack_path):
                session.phase(
                    "study",
                    packed_at_s=round(now() - session.args.started, 1),
                    **finished_work(session),
                )

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
        packed = pack(session, rung_args, pack_path)
        session.phase(
            "study", seconds=round(now() - started, 1), packed=packed, **finished_work(session)
        )
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
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--doctor-steps", type=int, default=10)
    parser.add_argument(
        "--bench-args", default="--preset small --batch 128 --steps 20 --warmup 3 --no-memory"
    )
    parser.add_argument(
        "--finetune-args",
        default=f"--preset small --tasks cola,mrpc --cap 4096 --profile {PROFILE_STEPS}",
        help="bench/finetune_throughput.py's arguments for the finetune phase",
    )  # fmt: skip
    parser.add_argument(
        "--phases",
        default="doctor,tests,bench,plan,study",
        help="of doctor, tests, bench, finetune, plan, study (run in that order)",
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
        for name, step in (
            ("doctor", doctor), ("tests", tests), ("bench", bench), ("finetune", finetune),
        ):  # fmt: skip
            if name in phases:
                step(session)
        model = plan(session) if "plan" in phases else None
        if "study" in phases:
            study(session, model)
    except Stopped as e:
        for entry in session.record["phases"].values():
            if entry.get("status") == "running":
                entry.update(status="stopped", why=f"{e} reached the session")
        session.record["status"] = f"stopped by {e}"
        session.say(f"stopped by {e}: the record and the last pack are in {session.out}")
        session.save()
        return 128 + e.signum
    statuses = {n: p.get("status") for n, p in session.record["phases"].items()}
    ok = all(s == "finished" for s in statuses.values()) and len(statuses) == len(phases)
    session.record["status"] = (
        "finished"
        if ok
        else "incomplete: " + ", ".join(f"{n} {s}" for n, s in statuses.items() if s != "finished")
    )
    session.save()
    session.say(f"session {session.record['status']} ({now() - args.started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
