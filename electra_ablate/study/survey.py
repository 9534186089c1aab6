"""What a study folder holds, read without changing anything: the units done, failed, running and
pending, the fine-tunes, the kept encoders that are missing or fail their checksums, damaged
records, the lock's holder and the disk used. ``ablate status`` prints it; the report names the
kept encoders it finds missing or corrupt. Torch-free, so it answers at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from electra_ablate.checkpoints.kept_files import kept_problem, weights_elsewhere
from electra_ablate.infra.layout import BASELINE_FRACTION, PLAN_FILE, RunLayout, StudyLayout
from electra_ablate.infra.locks import Holder, current_holder


@dataclass
class UnitState:
    kind: str  # "run" or "baseline"
    label: str
    seed: int | None
    folder: Path
    state: str  # done, failed, running, unfinished, pending
    message: str = ""


@dataclass
class Survey:
    root: Path
    name: str
    holder: Holder | None
    units: list[UnitState] = field(default_factory=list)
    finetunes: dict[str, int] = field(default_factory=dict)  # done, skipped, failed, pending
    reference_scores: int = 0  # evaluations of reference scorers (no encoder), all states
    kept_problems: list[tuple[Path, str]] = field(default_factory=list)
    kept_elsewhere: list[Path] = field(default_factory=list)  # merged from packs: no weights
    damaged: list[tuple[Path, str]] = field(default_factory=list)
    disk_bytes: int = 0
    state_bytes: int = 0  # training states of finished runs (what `clean --states` frees)

    def count(self, state: str) -> int:
        return sum(u.state == state for u in self.units)


def is_study(root: Path) -> bool:
    layout = StudyLayout(Path(root))
    markers = (layout.study_json, layout.lock, layout.root / "pretrain", layout.root / "baseline")
    return Path(root).is_dir() and any(p.exists() for p in markers)


def read_json(path: Path) -> tuple[Any, str | None]:
    """``(value, None)``, ``(None, None)`` if the file is absent, ``(None, why)`` if damaged."""
    try:
        return json.loads(path.read_bytes()), None
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"unreadable ({type(exc).__name__})"


def survey(root: Path, check_kept: bool = True) -> Survey:
    root = Path(root)
    layout = StudyLayout(root)
    info, _ = read_json(layout.study_json)
    info = info if isinstance(info, dict) else {}
    holder = current_holder(layout.lock)
    plan, _ = read_json(root / PLAN_FILE)
    plan = plan if isinstance(plan, dict) else {}
    found = Survey(root, str(info.get("name") or plan.get("name") or root.name), holder)
    spec = info.get("spec") if isinstance(info.get("spec"), dict) else {}
    blocks = [b for b in (spec.get("finetune"), spec.get("evaluation")) if isinstance(b, dict)]
    expected_jobs = 0
    on_disk = set()
    for run in layout.run_folders():
        unit, fractions = unit_state(run, holder is not None, found)
        on_disk.add(run.root.name.rsplit("-", 1)[-1])
        found.units.append(unit)
        expected_jobs += planned_jobs(blocks, unit.kind, fractions)
        if unit.state == "done":
            if check_kept:
                for fraction in fractions:
                    if weights_elsewhere(run.kept(fraction)):
                        found.kept_elsewhere.append(run.kept(fraction))
                    elif (problem := kept_problem(run.kept(fraction))) is not None:
                        found.kept_problems.append((run.kept(fraction), problem))
            if unit.kind == "run" and run.states.is_dir():
                found.state_bytes += folder_bytes(run.states)
    found.units += pending_units(root, on_disk)
    if not blocks and not layout.runs.is_file():  # before the first tables: the plan says
        planned = [u for u in plan.get("units", []) if u.get("kind") != "reference"]
        expected_jobs = sum(int(u.get("jobs") or 0) for u in planned)
        for unit in planned:
            if unit.get("run_id") not in on_disk:
                folder = layout.pretrain_dir if unit["kind"] == "run" else layout.baseline_dir
                found.units.append(
                    UnitState(unit["kind"], str(unit["label"]), unit.get("seed"), folder, "pending")
                )
    count_finetunes(layout, found, expected_jobs)
    found.disk_bytes = folder_bytes(root)
    return found


def unit_state(run: RunLayout, locked: bool, found: Survey) -> tuple[UnitState, list[float]]:
    """One run or baseline folder's state, and the budget fractions it keeps encoders at."""
    kind = "baseline" if run.root.parent.name == "baseline" else "run"
    if kind == "baseline":
        meta, _ = read_json(run.kept(BASELINE_FRACTION) / "kept.json")
        label = meta.get("label") if isinstance(meta, dict) else None
        label = label or run.root.name.rsplit("-", 1)[0]
        seed, fractions = None, [BASELINE_FRACTION]
    else:
        head, seed_part, _ = run.root.name.rsplit("-", 2)
        label, seed = head, int(seed_part[1:]) if seed_part[1:].isdigit() else None
        config, problem = read_json(run.run_json)
        if problem:
            found.damaged.append((run.run_json, problem))
        checkpoints = config.get("checkpoints") if isinstance(config, dict) else None
        fractions = [float(f) for f in checkpoints] if checkpoints else run.kept_on_disk()
    if kind == "baseline":
        state = "done" if (run.kept(BASELINE_FRACTION) / "kept.json").exists() else "pending"
        return UnitState(kind, label, seed, run.root, state), fractions
    done, problem = read_json(run.done)
    if problem:
        found.damaged.append((run.done, problem))
    if isinstance(done, dict):
        notes = [str(done.get("message") or "")]
        if done.get("diverged"):
            notes.append(f"diverged at step {done['diverged'].get('step')}")
        if done.get("curve_rebuilt"):
            notes.append(f"curve rebuilt {done['curve_rebuilt']}")
        message = "; ".join(n for n in notes if n)
        return UnitState(kind, label, seed, run.root, "done", message), fractions
    failed, problem = read_json(run.failed)
    if problem:
        found.damaged.append((run.failed, problem))
    if isinstance(failed, dict):
        message = str(failed.get("message", ""))
        return UnitState(kind, label, seed, run.root, "failed", message), fractions
    steps = sorted(int(s.name.split("-")[1]) for s in run.states.glob("step-*"))
    where = f"resumable from step {steps[-1]}" if steps else "no resumable state yet"
    state = "running" if locked else "unfinished"
    return UnitState(kind, label, seed, run.root, state, where), fractions


def pending_units(root: Path, on_disk: set[str]) -> list[UnitState]:
    """Units the last tables list that have no folder yet (a study not started that far)."""
    import polars as pl

    try:
        runs = pl.read_parquet(StudyLayout(root).runs)
    except (OSError, pl.exceptions.PolarsError):  # no table yet, or a damaged one
        return []
    out = []
    for row in runs.iter_rows(named=True):
        if row.get("run_id") not in on_disk:
            kind = "baseline" if row.get("objective") == "none" else "run"
            seed = row.get("pretrain_seed") if kind == "run" else None
            out.append(UnitState(kind, str(row.get("label")), seed, root, "pending"))
    return out


def planned_jobs(blocks: list[dict], kind: str, fractions: list[float]) -> int:
    """The evaluations a run or baseline gets from the spec's evaluation blocks: per checkpoint,
    each task at each seed (an unseeded task, evaluated once, is counted per seed too: reading
    which tasks are seeded would load the task registry, and torch with it)."""
    total = 0
    for block in blocks:
        if kind == "baseline" and not block.get("baseline", True):
            continue
        wanted = block.get("checkpoints") if kind == "run" else None
        per_checkpoint = len(block.get("tasks") or []) * len(block.get("seeds") or [])
        total += per_checkpoint * len(wanted or fractions)
    return total


def count_finetunes(layout: StudyLayout, found: Survey, expected: int) -> None:
    """Evaluation records by status: done, skipped (the task does not apply to that encoder)
    and failed; a reference scorer's records are counted apart (they are not per encoder)."""
    counts = {"done": 0, "skipped": 0, "failed": 0}
    for path in sorted(layout.finetune_dir.glob("*.json")):
        record, problem = read_json(path)
        if problem or not isinstance(record, dict):
            found.damaged.append((path, problem or "not a JSON object"))
        elif record.get("reference") is not None:
            found.reference_scores += 1
        else:
            status = record.get("status")
            counts[status if status in counts else "failed"] += 1
    found.finetunes = {**counts, "pending": max(0, expected - sum(counts.values()))}


def folder_bytes(folder: Path) -> int:
    total = 0
    for path in Path(folder).rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
