"""Freeing the disk a finished study no longer needs (``ablate clean --states``).

A run's training states are what resuming it needs; once the run is finished, its kept encoders
and records are all a report or a later fine-tune reads, so its states can go. States of runs
that are unfinished, failed or damaged stay: they resume them. The study is locked meanwhile, so
that no ``ablate run`` writes it while states are removed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import StudyLayout
from electra_ablate.infra.locks import lock_study
from electra_ablate.study.survey import folder_bytes, is_study, read_json


def remove_finished_states(study_dir: Path) -> tuple[int, int]:
    """Remove the training states of every finished run of the study; returns how many runs'
    states went and the bytes freed."""
    if not is_study(study_dir):
        raise InputError(f"not a study folder: {study_dir}")
    layout = StudyLayout(study_dir)
    lock = lock_study(layout.lock, layout.root)  # not while an `ablate run` writes it
    try:
        freed, runs = 0, 0
        for run in layout.run_folders():
            done, _ = read_json(run.done)
            if not isinstance(done, dict) or not run.states.is_dir():
                continue  # unfinished, failed or damaged: its states resume it
            freed += folder_bytes(run.states)
            shutil.rmtree(run.states)
            runs += 1
    finally:
        lock.release()
    return runs, freed
