"""``electra_ablate.infra.layout``: a study's paths are built in one place, and what it finds on
disk (kept checkpoints, run folders, study and report folders) is what is there.

(Named ``study_layout``: ``tests/test_layout.py`` holds the imports to their layers.)"""

from __future__ import annotations

from pathlib import Path

from electra_ablate.infra.layout import (
    REPORT_FILE,
    RESULTS_FILE,
    STUDY_FILE,
    RunLayout,
    StudyLayout,
    is_report_folder,
    is_study_folder,
    safe_name,
    study_containing,
    study_folders_in,
)


def test_kept_folders_are_found_back_as_their_fractions_smallest_first(tmp_path):
    run = RunLayout(tmp_path / "run")
    assert run.kept_on_disk() == []  # no kept folder yet
    for fraction in (1.0, 0.25, 0.5):
        run.kept(fraction).mkdir(parents=True)
    (run.kept_root / "notes").mkdir()  # not a fraction
    (run.kept_root / "0.75").write_text("a file, not a kept folder")
    assert run.kept_on_disk() == [0.25, 0.5, 1.0]
    assert [run.kept(f) for f in run.kept_on_disk()] == sorted(
        p for p in run.kept_root.iterdir() if p.is_dir() and p.name != "notes"
    )


def test_run_folders_are_the_runs_and_baselines_on_disk(tmp_path):
    study = StudyLayout(tmp_path)
    run = study.run("electra (tied)", 0, "abc123")
    baseline = study.baseline("none", "def456")
    for folder in (run.root, baseline.root, study.pretrain_dir / ".partial"):
        folder.mkdir(parents=True)
    (study.pretrain_dir / "stray.txt").write_text("")
    assert study.run_folders() == [run, baseline]
    assert run.root.name == "electra__tied_-s0-abc123"


def test_safe_names_keep_what_a_folder_name_may_hold():
    assert safe_name("electra_15@0.5=x-y") == "electra_15@0.5=x-y"
    assert safe_name("a/b c:d") == "a_b_c_d"


def test_study_and_report_folders_are_told_apart_by_what_they_hold(tmp_path):
    study, report, other = tmp_path / "study", tmp_path / "report", tmp_path / "other"
    for folder in (study / "pretrain", report, other):
        folder.mkdir(parents=True)
    (study / STUDY_FILE).write_text("{}")
    (study / REPORT_FILE).write_text("# a study's own report, at its top")
    (report / RESULTS_FILE).write_bytes(b"")
    (report / REPORT_FILE).write_text("# report")
    assert [is_study_folder(f) for f in (study, report, other)] == [True, True, False]
    assert [is_report_folder(f) for f in (study, report, other)] == [False, True, False]
    assert study_folders_in(tmp_path) == [report, study]
    assert study_folders_in(tmp_path / "missing") == []


def test_the_study_holding_a_folder_is_found_above_it_as_it_was_spelt(tmp_path, monkeypatch):
    study = tmp_path / "runs" / "smoke"
    inside = StudyLayout(study).run("electra", 0, "abc").kept(0.5)
    inside.mkdir(parents=True)
    (study / STUDY_FILE).write_text("{}")
    assert study_containing(inside) == study
    monkeypatch.chdir(tmp_path)
    assert study_containing(Path("runs/smoke/pretrain")) == Path("runs/smoke")
    assert study_containing(tmp_path) is None
