"""Where a study's outputs live: every path is built here and nowhere else.

<study>/
  study.json                        what ran, where, when, with which (resolved) spec
  study.lock                        held by the `ablate run` writing the study (its PID, host)
  study.shard-<i>-of-<n>.lock       held by `ablate run --shard I/N` (with study.lock shared)
  device.lock                       held by the worker whose pre-training trains on one card
  jobs/<job id>_*                   cluster jobs' logs and pickled calls (`ablate run --launcher`)
  results.parquet                   one row per (run, checkpoint, task, seed, metric)
  runs.parquet                      one row per pre-training run with its status
  pretrain_metrics.parquet          the runs' logged metrics
  schedule.jsonl                    when each item of work started and ended, by which process
  pretrain/<label>-s<seed>-<id>/    one pre-training run:
    run.json, done.json | failed.json, error.log, metrics.jsonl, warnings.log,
    code.json                       the code that computed it (``infra.code_identity``)
    tracking.json, tensorboard/     what each tracker has been sent; TensorBoard's files
    states/step-<n>/                resumable training state (checksummed)
    kept/<fraction>/                the kept encoder at a budget fraction (checksummed): what
                                    `ablate finetune` and `ablate export` take
    rebuild/                        scratch re-training of a damaged kept encoder or curve
  baseline/<label>-<id>/kept/0/     the freshly initialised encoder of the no-pre-training
                                    baseline (fine-tuned like any checkpoint)
  reference/<name>-<id>/            a task's reference scorer (no encoder); only its
                                    tracking.json and tensorboard/ when tracked
  finetune/<job id>.json            one (checkpoint, task, seed) fine-tune: metrics or failure
  superseded/<folder>-<UTC time>/   finished work whose code has changed since, moved aside
                                    to be redone (``study.code_change``), never deleted
  report/                           what `ablate report` writes
  wandb/                            W&B's files when the spec tracks with it and $WANDB_DIR is
                                    unset (``infra.tracking.wandb``)
  pack.json                         in a result pack (`ablate pack`): what it holds, checksummed
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STUDY_FILE = "study.json"
PLAN_FILE = "plan.json"  # the units a study plans, written before any trains (``ablate status``)
RESULTS_FILE = "results.parquet"
RUNS_FILE = "runs.parquet"
PRETRAIN_METRICS_FILE = "pretrain_metrics.parquet"
TABLE_FILES = (RESULTS_FILE, RUNS_FILE, PRETRAIN_METRICS_FILE)
"""The tidy tables a study writes and ``ablate report`` copies beside ``report.md`` (no weights),
so a report folder can be reported again, or compared, without its study folder."""
REPORT_FILE = "report.md"
SUMMARY_FILE = "summary.csv"
PROBES_FILE = "probes.csv"
"""Beside ``summary.csv``: every probe task's metrics per checkpoint, reference scorers included
(``results.probe_summary``)."""
NOTES_FILE = "notes.md"
"""An author's discussion kept in a report folder; reporting that folder again includes it."""

KEPT_META = "kept.json"
"""The file of a kept folder that describes its encoder (written by ``kept.save_kept``)."""


@dataclass(frozen=True)
class RunLayout:
    """One pre-training run's folder."""

    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def done(self) -> Path:
        return self.root / "done.json"

    @property
    def failed(self) -> Path:
        return self.root / "failed.json"

    @property
    def error_log(self) -> Path:
        return self.root / "error.log"

    @property
    def code(self) -> Path:
        """The code that computed the unit (``infra.code_identity.code_fingerprint``): beside
        its id, which names no code, and checked before the unit is reused."""
        return self.root / "code.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    @property
    def tracking(self) -> Path:
        """What the trackers of the study's ``tracking`` have been sent (``infra.tracking``)."""
        return self.root / "tracking.json"

    @property
    def states(self) -> Path:
        return self.root / "states"

    def state(self, step: int) -> Path:
        return self.states / f"step-{step:09d}"

    @property
    def kept_root(self) -> Path:
        return self.root / "kept"

    def kept(self, fraction: float) -> Path:
        return self.kept_root / f"{fraction:.6g}"

    def kept_on_disk(self) -> list[float]:
        """The fractions of the kept folders the run holds now, smallest first."""
        fractions = []
        try:
            folders = [p for p in self.kept_root.iterdir() if p.is_dir()]
        except OSError:  # no kept folder yet
            return []
        for folder in folders:
            try:
                fractions.append(float(folder.name))
            except ValueError:
                continue
        return sorted(fractions)

    @property
    def warnings_log(self) -> Path:
        return self.root / "warnings.log"

    @property
    def lock(self) -> Path:
        return self.root / UNIT_LOCK

    @property
    def scratch(self) -> Path:
        """Where a kept encoder or a training curve is rebuilt, away from the run's files."""
        return self.root / "rebuild"

    def scratch_run(self, purpose: str) -> RunLayout:
        """A scratch run folder for one rebuild (``curve``, ``kept-0.5``): it resumes if killed."""
        return RunLayout(self.scratch / purpose)


@dataclass(frozen=True)
class StudyLayout:
    """One study's output folder."""

    root: Path

    @property
    def study_json(self) -> Path:
        return self.root / STUDY_FILE

    @property
    def results(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def runs(self) -> Path:
        return self.root / RUNS_FILE

    @property
    def pretrain_metrics(self) -> Path:
        return self.root / PRETRAIN_METRICS_FILE

    @property
    def schedule_log(self) -> Path:
        """One line per start and end of a unit's work (``study.execute``): the timeline of
        who did what when, which a GPU session's record and its replay read."""
        return self.root / "schedule.jsonl"

    @property
    def lock(self) -> Path:
        return self.root / STUDY_LOCK

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def jobs(self) -> Path:
        """Cluster jobs' logs and pickled calls (``ablate run --launcher``): ``<job id>_*``."""
        return self.root / "jobs"

    def shard_lock(self, index: int, count: int) -> Path:
        """Held by the ``ablate run --shard I/N`` writing shard I of N into this folder."""
        return self.root / f"study.shard-{index}-of-{count}.lock"

    @property
    def device_gate(self) -> Path:
        """The gate a study's workers on one card train through, one at a time, while the next
        compiles (``electra_ablate.infra.device_gate``)."""
        return self.root / "device.lock"

    @property
    def tables_lock(self) -> Path:
        """Held while a shard rebuilds the tables of a folder that other shards write too."""
        return self.root / "tables.lock"

    @property
    def pack_manifest(self) -> Path:
        return self.root / "pack.json"

    @property
    def pretrain_dir(self) -> Path:
        return self.root / "pretrain"

    @property
    def baseline_dir(self) -> Path:
        return self.root / "baseline"

    @property
    def reference_dir(self) -> Path:
        return self.root / "reference"

    @property
    def finetune_dir(self) -> Path:
        return self.root / "finetune"

    def run_folders(self) -> list[RunLayout]:
        """Every pre-training run and baseline folder on disk, whatever the spec says now."""
        found = sorted(self.pretrain_dir.glob("*")) + sorted(self.baseline_dir.glob("*"))
        return [RunLayout(p) for p in found if p.is_dir() and not p.name.startswith(".")]

    def run(self, label: str, seed: int, run_id: str) -> RunLayout:
        return RunLayout(self.pretrain_dir / f"{safe_name(label)}-s{seed}-{run_id}")

    def baseline(self, label: str, baseline_id: str) -> RunLayout:
        return RunLayout(self.baseline_dir / f"{safe_name(label)}-{baseline_id}")

    def reference(self, label: str, reference_id: str) -> RunLayout:
        return RunLayout(self.reference_dir / f"{safe_name(label)}-{reference_id}")

    def finetune_record(self, job_id: str) -> Path:
        return self.finetune_dir / f"{job_id}.json"

    @property
    def superseded_dir(self) -> Path:
        """Where finished work whose code changed since is moved, to be redone
        (``electra_ablate.study.code_change``): kept, never deleted."""
        return self.root / "superseded"


BASELINE_FRACTION = 0.0  # the no-pre-training baseline's one kept encoder: kept/0
STUDY_LOCK = "study.lock"  # held by `ablate run` for its whole life (electra_ablate.infra.locks)
UNIT_LOCK = "unit.lock"  # held while one unit's kept encoder is rebuilt


def is_study_folder(folder: Path) -> bool:
    """A folder holding a study's outputs: its ``study.json`` or one of its tables (a study
    folder, a result pack, or a report folder that kept its study's tables)."""
    folder = Path(folder)
    return any((folder / name).is_file() for name in (STUDY_FILE, *TABLE_FILES))


def is_report_folder(folder: Path) -> bool:
    """A folder ``ablate report`` wrote: its ``report.md`` sits at the top, a study's does not."""
    return (folder / REPORT_FILE).is_file() and not StudyLayout(folder).pretrain_dir.is_dir()


def study_folders_in(folder: Path) -> list[Path]:
    """The study folders directly inside ``folder`` (as ``runs/`` holds them), by name."""
    try:
        children = sorted(Path(folder).iterdir())
    except OSError:
        return []
    return [c for c in children if not c.name.startswith(".") and c.is_dir() and is_study_folder(c)]


def study_containing(folder: Path) -> Path | None:
    """The nearest study folder above ``folder`` (for a folder inside a study, such as one of
    its runs), spelt as ``folder`` is where it can be; None outside any study."""
    folder = Path(folder)
    spelt = {parent.absolute(): parent for parent in folder.parents}
    for parent in folder.absolute().parents:
        if is_study_folder(parent):
            return spelt.get(parent, parent)
    return None


def safe_name(label: str) -> str:
    """A label as a folder name: letters, digits and ``._@=-`` kept, anything else ``_``."""
    return "".join(c if c.isalnum() or c in "._@=-" else "_" for c in label)
