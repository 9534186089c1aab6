"""What a report is made from: a study folder, or a report folder that kept its study's tables.

``ablate report`` copies the tidy tables it read (``layout.TABLE_FILES``) and ``study.json``
beside ``report.md``, so a committed report folder is a source too: ``ablate report
reports/objectives --out /tmp/x`` regenerates it from the repository alone, with the author's
``notes.md``, and ``ablate compare`` reads it like a study folder. A report folder written
before it kept its tables cannot be reported again; that is one line, not a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from electra_ablate.analysis.results import complete_runs, no_results_error, read_results
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import (
    NOTES_FILE,
    PRETRAIN_METRICS_FILE,
    RESULTS_FILE,
    RUNS_FILE,
    STUDY_FILE,
    TABLE_FILES,
    is_report_folder,
)
from electra_ablate.infra.storage import atomic_file, atomic_write_text


@dataclass(frozen=True)
class StudyTables:
    """One study's tables, read from ``folder``; ``results`` is None when nothing was evaluated
    (a pre-training-only study, or one collected before any evaluation finished)."""

    folder: Path
    study: dict[str, Any]
    results: pl.DataFrame | None
    runs: pl.DataFrame | None
    metrics: pl.DataFrame | None
    from_report: bool
    """True when ``folder`` is a report folder (its tables kept beside ``report.md``)."""

    @property
    def name(self) -> str:
        return self.study.get("name") or self.folder.name

    @property
    def notes(self) -> Path | None:
        """A report folder's ``notes.md``: what regenerating it includes by default."""
        path = self.folder / NOTES_FILE
        return path if self.from_report and path.is_file() else None


def read_tables(folder: Path) -> StudyTables:
    """The tables of a study folder or of a report folder, or a one-line error saying what to
    do."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            f"no results in {folder} (no such folder): pass a study folder or a report folder"
        )
    from_report = is_report_folder(folder)
    present = [name for name in TABLE_FILES if (folder / name).is_file()]
    if from_report and not present:
        raise InputError(
            f"{folder} is a report folder without its tables ({', '.join(TABLE_FILES)}): it "
            "was written before reports kept them; report its study folder instead "
            f"(`ablate report STUDY_DIR --out {folder}`)"
        )
    if not present and not (folder / STUDY_FILE).is_file():
        raise no_results_error(folder)
    runs = read_optional_table(folder / RUNS_FILE)
    metrics = read_optional_table(folder / PRETRAIN_METRICS_FILE)
    # a pre-training-only study, or one collected before any fine-tune (or any run) finished,
    # has no evaluation rows
    no_results = (metrics is not None or runs is not None) and not has_rows(folder / RESULTS_FILE)
    return StudyTables(
        folder=folder,
        study=read_study(folder),
        results=None if no_results else read_results(folder),
        runs=complete_runs(runs) if runs is not None else None,
        metrics=metrics,
        from_report=from_report,
    )


def read_study(folder: Path) -> dict[str, Any]:
    path = folder / STUDY_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from exc


def read_optional_table(path: Path) -> pl.DataFrame | None:
    if not path.is_file():
        return None
    try:
        return pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc


def has_rows(path: Path) -> bool:
    """False for a missing or empty table; an unreadable one counts as rows, so that reading
    it reports the problem."""
    try:
        return not pl.read_parquet(path).is_empty()
    except FileNotFoundError:
        return False
    except (OSError, pl.exceptions.PolarsError):
        return True


def keep_tables(source: Path, out_dir: Path) -> list[str]:
    """Copy the source's tables and ``study.json`` into the report folder (atomically; nothing
    to do when they are the same folder). Returns the table files the report folder holds."""
    kept = []
    for name in (*TABLE_FILES, STUDY_FILE):
        src, dst = source / name, out_dir / name
        if not src.is_file():
            continue
        if not (dst.exists() and dst.resolve() == src.resolve()):
            with atomic_file(dst) as tmp:
                Path(tmp).write_bytes(src.read_bytes())
        if name in TABLE_FILES:
            kept.append(name)
    return kept


def keep_notes(notes: Path | None, out_dir: Path) -> None:
    """The notes a report includes go beside it as ``notes.md``, so regenerating the report
    folder keeps them."""
    if notes is None:
        return
    dst = out_dir / NOTES_FILE
    if dst.exists() and dst.resolve() == Path(notes).resolve():
        return
    atomic_write_text(dst, Path(notes).read_text(encoding="utf-8"))
