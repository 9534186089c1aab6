"""Issue 54: messages that say what is true, through the installed ``ablate``: a folder of
studies, or a folder inside one, given to ``ablate report`` / ``ablate compare`` is named as
such (never "no results in … run `ablate run SPEC` first"), and ``ablate export`` of a fraction
the run never kept names the fractions it kept (never "corrupt checkpoint … missing").

Every probe reads the session's smoke study (``smoke_study``) or a copy of a few of its files;
none trains anything of its own.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ablate_cli import E2E, ablate, one_line_error

pytestmark = E2E


def one_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2 (an input error), one ``error:`` line holding every needle, nothing else."""
    line = one_line_error(result, 2, *needles)
    assert "a bug or an environment problem" not in line, line
    return line


def run_folder(study: Path, label: str) -> Path:
    (found,) = sorted((study / "pretrain").glob(f"{label}-s0-*"))
    return found


# --------------------------------------------------------- report: folders that are not studies


@pytest.fixture
def studies_folder(smoke_study, tmp_path) -> Path:
    """A ``runs/`` folder holding four studies (each the smoke study's ``study.json`` and
    tables), beside a folder that is no study."""
    runs = tmp_path / "runs"
    for name in ("smoke", "long_budget", "objectives", "generator_size"):
        (runs / name).mkdir(parents=True)
        for table in ("study.json", "results.parquet", "runs.parquet"):
            shutil.copy2(smoke_study / table, runs / name / table)
    (runs / "scratch").mkdir()
    return runs


def test_report_of_a_folder_of_studies_names_them_and_one_to_give(studies_folder, smoke_env):
    result = ablate("report", studies_folder, "--out", studies_folder / "out", env=smoke_env)
    line = one_line(
        result,
        f"{studies_folder} holds 4 studies (generator_size, long_budget, objectives, …)",
        f"e.g. {studies_folder / 'generator_size'}",
    )
    assert "no results in" not in line and "ablate run SPEC" not in line, line
    assert "scratch" not in line, line
    assert not (studies_folder / "out").exists()


def test_report_of_the_smoke_studys_parent_names_the_one_study(smoke_study, smoke_env, tmp_path):
    result = ablate("report", smoke_study.parent, "--out", tmp_path / "out", env=smoke_env)
    one_line(result, f"{smoke_study.parent} holds 1 study (smoke)", f"e.g. {smoke_study}")


@pytest.mark.parametrize("inside", ["a run", "finetune", "pretrain"])
def test_report_of_a_folder_inside_a_study_names_the_study(
    smoke_study, smoke_env, tmp_path, inside
):
    folder = {
        "a run": run_folder(smoke_study, "electra"),
        "finetune": smoke_study / "finetune",
        "pretrain": smoke_study / "pretrain",
    }[inside]
    assert folder.is_dir()
    result = ablate("report", folder, "--out", tmp_path / "out", env=smoke_env)
    line = one_line(result, f"{folder} is a folder inside the study folder {smoke_study}")
    assert line.endswith(f"give {smoke_study}"), line
    assert "no results in" not in line, line


def test_compare_gives_the_same_truthful_line_for_a_folder_of_studies(
    studies_folder, smoke_study, smoke_env, tmp_path
):
    result = ablate(
        "compare", smoke_study, studies_folder, "--out", tmp_path / "out", env=smoke_env
    )
    one_line(result, f"{studies_folder} holds 4 studies", "give one of them")


def test_a_folder_with_no_study_in_or_above_it_still_says_to_run_one(smoke_env, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = ablate("report", empty, "--out", tmp_path / "out", env=smoke_env)
    one_line(result, f"no results in {empty}: run `ablate run SPEC` first")


# ------------------------------------------------------------ export: a fraction never kept


def test_export_of_a_fraction_the_run_never_kept_names_the_kept_ones(
    smoke_study, smoke_env, tmp_path
):
    run = run_folder(smoke_study, "electra")
    asked = run / "kept" / "0.03125"
    result = ablate("export", asked, "--out", tmp_path / "hf", env=smoke_env)
    line = one_line(result, f"{run} kept no checkpoint at fraction 0.03125; kept fractions: 0.5, 1")
    assert "corrupt" not in line and "missing" not in line, line
    assert not asked.exists() and not (tmp_path / "hf").exists()


def test_finetune_of_a_fraction_the_run_never_kept_names_the_kept_ones(smoke_study, smoke_env):
    run = run_folder(smoke_study, "electra")
    asked = run / "kept" / "0.03125"
    result = ablate("finetune", asked, "--tasks", "rte", env=smoke_env)
    line = one_line(result, f"{run} kept no checkpoint at fraction 0.03125; kept fractions: 0.5, 1")
    assert "corrupt" not in line, line
    assert not asked.exists()


def test_export_of_a_kept_fraction_spelt_otherwise_points_at_its_folder(
    smoke_study, smoke_env, tmp_path
):
    run = run_folder(smoke_study, "bert_mlm")
    result = ablate("export", run / "kept" / "1.0", "--out", tmp_path / "hf", env=smoke_env)
    one_line(result, "kept no checkpoint at fraction 1.0", f"did you mean {run / 'kept' / '1'}?")


def test_export_of_a_fraction_of_the_baseline_names_its_one_kept_encoder(
    smoke_study, smoke_env, tmp_path
):
    (baseline,) = sorted((smoke_study / "baseline").iterdir())
    result = ablate("export", baseline / "kept" / "0.5", "--out", tmp_path / "hf", env=smoke_env)
    one_line(result, f"{baseline} kept no checkpoint at fraction 0.5; kept fractions: 0")


def test_a_kept_folder_that_exists_but_is_damaged_is_still_called_corrupt(
    smoke_study, smoke_env, tmp_path
):
    # a copy of a run outside any study (so nothing rebuilds it), its kept 0.5 damaged
    run = tmp_path / "run"
    shutil.copytree(
        run_folder(smoke_study, "electra"), run, ignore=shutil.ignore_patterns("states")
    )
    weights = run / "kept" / "0.5" / "kept.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    result = ablate("export", weights.parent, "--out", tmp_path / "hf", env=smoke_env)
    line = one_line(result, f"corrupt checkpoint {weights.parent}")
    assert "kept no checkpoint" not in line, line
    # and the copy's never-kept fraction is named as such, from its run.json
    result = ablate("export", run / "kept" / "0.25", "--out", tmp_path / "hf", env=smoke_env)
    one_line(result, f"{run} kept no checkpoint at fraction 0.25; kept fractions: 0.5, 1")
