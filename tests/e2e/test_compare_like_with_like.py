"""``ablate compare`` compares like with like, through the installed script on synthetic study
folders whose scores are known in advance (no pre-training: a results table and a
``study.json`` make a study ``ablate compare`` reads).

Each score is ``base of the label + offset of the task + offset of the fine-tuning seed``, so a
mean over any set of tasks is known exactly: a 2-task study (cola, rte) beside a 5-task one
averages the 5-task one over cola and rte only, never over its own five tasks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from ablate_cli import E2E, ROOT, ablate, one_line_error

from electra_ablate.analysis.results import write_table
from electra_ablate.backbone.config import preset as backbone_preset

pytestmark = E2E

GLUE_OFFSETS = {"cola": 0.0, "sst2": 30.0, "mrpc": 25.0, "stsb": 20.0, "rte": 10.0}
SEED_OFFSETS = (-1.0, 0.0, 2.0)
BASES = {"ELECTRA": ("electra", 40.0), "BERT": ("bert_mlm", 30.0), "Big": ("electra", 50.0)}
BASELINE = ("no pre-training", "none", 20.0)
FRACTIONS = (0.5, 1.0)


def result_rows(
    name: str,
    tasks: dict[str, tuple[str, str, float]],
    labels: list[str],
    pretrain_seeds: int,
    finetune_seeds: int,
    flops: float,
) -> list[dict]:
    """Every (label, checkpoint, task, seeds) row; ``tasks``: task -> (family, metric,
    offset); the no-pre-training baseline at fraction 0."""
    points = [(label, *BASES[label], f) for label in labels for f in FRACTIONS]
    points.append((*BASELINE, 0.0))
    rows = []
    for label, objective, base, fraction in points:
        for pretrain_seed in range(1 if objective == "none" else pretrain_seeds):
            for seed in range(finetune_seeds):
                for task, (family, metric, offset) in tasks.items():
                    probe = family != "glue"
                    rows.append(
                        {
                            "study": name,
                            "run_id": f"{label}-{pretrain_seed}",
                            "objective": objective,
                            "label": label,
                            "pretrain_seed": pretrain_seed,
                            "checkpoint_fraction": fraction,
                            "pretrain_step": int(100 * fraction),
                            "flops_paper": flops * fraction,
                            "flops_standard": 1.5 * flops * fraction,
                            "family": family,
                            "task": task,
                            "finetune_seed": seed,
                            "metric": metric,
                            "headline": True,
                            "in_aggregate": True,
                            "value": base + offset + SEED_OFFSETS[seed] + 5 * fraction,
                            "train_examples": None if probe else 500,
                            "wall_s": 1.0,
                        }
                    )
    return rows


def make_study(
    folder: Path,
    glue_tasks: list[str],
    *,
    labels: tuple[str, ...] = ("ELECTRA", "BERT"),
    probe: bool = False,
    preset: str = "micro",
    fingerprint: str = "aaaa1111",
    pretrain_seeds: int = 1,
    finetune_seeds: int = 1,
    flops: float = 1e14,
) -> Path:
    """A study folder ``ablate compare`` reads: its results table and its ``study.json``."""
    folder.mkdir(parents=True)
    tasks = {t: ("glue", "accuracy", GLUE_OFFSETS[t]) for t in glue_tasks}
    if probe:
        tasks["rtd_unigram"] = ("rtd_probe", "auc", 0.0)
    rows = result_rows(folder.name, tasks, list(labels), pretrain_seeds, finetune_seeds, flops)
    write_table(folder / "results.parquet", rows)
    study = {
        "name": folder.name,
        "spec": {"backbone": {"preset": preset, "overrides": {}}},
        "backbone": backbone_preset(preset).model_dump(),  # resolved, as a run records it
        "data_fingerprints": [fingerprint],
        "finetune": {"tasks": glue_tasks, "seeds": list(range(finetune_seeds)), "caps": {}},
    }
    if glue_tasks:
        study["finetune"]["caps"] = {glue_tasks[0]: 500}
    (folder / "study.json").write_text(json.dumps(study))
    return folder


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("like")
    return {
        "two": make_study(root / "micro2", ["cola", "rte"], probe=True),
        "five": make_study(
            root / "small5",
            list(GLUE_OFFSETS),
            labels=("ELECTRA", "BERT", "Big"),
            probe=True,
            preset="small",
            fingerprint="bbbb2222",
            pretrain_seeds=2,
            finetune_seeds=3,
            flops=3e14,
        ),
        "stsb": make_study(root / "stsb_only", ["stsb"], probe=True, fingerprint="cccc3333"),
        "stsb_bare": make_study(root / "stsb_bare", ["stsb"], fingerprint="cccc3333"),
    }


def without(folder: Path, out: Path, *dropped: tuple[str, str]) -> Path:
    """A copy of a study folder without the rows of each (label, task) in ``dropped``: a
    fine-tune that failed."""
    out.mkdir(parents=True)
    (out / "study.json").write_text((folder / "study.json").read_text())
    results = pl.read_parquet(folder / "results.parquet")
    for label, task in dropped:
        results = results.filter((pl.col("label") != label) | (pl.col("task") != task))
    results.write_parquet(out / "results.parquet")
    return out


def compare(*folders: Path, out: Path) -> tuple[str, pl.DataFrame]:
    done = ablate("compare", *folders, "--out", out, timeout=300)
    assert done.returncode == 0, done.stderr
    return (out / "compare.md").read_text(encoding="utf-8"), pl.read_csv(out / "compare.csv")


@pytest.fixture(scope="module")
def two_and_five(studies, tmp_path_factory) -> tuple[str, pl.DataFrame]:
    """The 2-task study compared with the 5-task one, once for the tests that read the page."""
    return compare(studies["two"], studies["five"], out=tmp_path_factory.mktemp("two5") / "c")


def row(text: str, first: str, after: str = "") -> list[str]:
    """The cells of the first table row starting with ``first`` after the heading ``after``."""
    part = text.split(after, 1)[1] if after else text
    line = next(x for x in part.splitlines() if x.startswith(f"| {first} |"))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.mark.parametrize("second", ["same", "dot", "relative"])
def test_a_study_given_twice_is_refused(studies, tmp_path, second):
    """The same folder twice, however it is spelt, is one error line and exit 2: a study
    compared with itself would show once, without a word."""
    folder = studies["two"]
    other = {
        "same": folder,
        "dot": folder / ".",
        "relative": Path(os.path.relpath(folder, ROOT)),  # ablate runs from the repository
    }[second]
    done = ablate("compare", folder, other, "--out", tmp_path / "out", timeout=300)
    one_line_error(done, 2, "given twice", str(folder))


def test_the_aggregate_is_over_the_tasks_every_study_shares(two_and_five):
    """A 2-task study beside a 5-task one: both averaged over cola and rte (ELECTRA at the
    final checkpoint: 40 + 5 + mean(0, 10) = 50 and the seed's offset: 49 with seed 0 alone,
    50 the median over three), not the 5-task study over its own five (62), and the page says
    so."""
    text, table = two_and_five
    assert "GLUE score over the 2 tasks all studies share: cola, rte" in text
    assert "small5 also evaluated sst2, mrpc, stsb" in text
    cells = row(text, "ELECTRA", "## GLUE")
    assert cells[1].startswith("49.0") and cells[3].startswith("50.0 [")
    final = table.filter(
        (pl.col("family") == "glue")
        & (pl.col("label") == "ELECTRA")
        & (pl.col("checkpoint_fraction") == 1.0)
    )
    assert sorted(final["median"].to_list()) == [49.0, 50.0]
    assert set(final["tasks"].to_list()) == {"cola rte"}
    # the probe family's one task is shared: nothing restricted there
    assert "RTD probe AUC over the task every study evaluated: rtd_unigram." in text


def test_objectives_not_in_every_study_are_named_as_left_out(two_and_five):
    text, _ = two_and_five
    glue = text.split("## GLUE", 1)[1].split("## ", 1)[0]
    assert "Left out, without a score in every study: Big (only in small5)." in glue
    assert "| Big |" not in text


def test_the_page_says_what_each_study_ran(two_and_five):
    """Tasks, caps, backbone, data fingerprints and both kinds of seeds, study by study."""
    text, _ = two_and_five
    assert row(text, "Tasks") == [
        "Tasks",
        "GLUE: cola, rte; RTD probe: rtd_unigram",
        "GLUE: cola, sst2, mrpc, stsb, rte; RTD probe: rtd_unigram",
    ]
    caps = row(text, "Training examples per task")
    assert caps[1].startswith("cola: capped at 500 examples (500 used); rte: full training set")
    assert row(text, "Backbone")[1:] == [
        "micro (hidden 32, 2 layers, 2 heads)",
        "small (hidden 256, 12 layers, 4 heads)",
    ]
    assert row(text, "Data fingerprint") == ["Data fingerprint", "`aaaa1111`", "`bbbb2222`"]
    assert row(text, "Pre-training seeds") == ["Pre-training seeds", "0", "0, 1"]
    assert row(text, "Fine-tuning seeds") == ["Fine-tuning seeds", "0", "0, 1, 2"]


def test_a_family_whose_aggregate_tasks_no_two_studies_share_is_left_out(studies, tmp_path):
    """cola, rte beside stsb: no GLUE column at all (it would average different tasks), the
    page saying why; the probe family they share is still compared."""
    text, table = compare(studies["two"], studies["stsb"], out=tmp_path / "c")
    assert "## GLUE" not in text and "## RTD probe" in text
    assert (
        "GLUE: not compared, the studies share none of the tasks of its GLUE score "
        "(micro2: cola, rte; stsb_only: stsb)." in text
    )
    assert set(table["family"].to_list()) == {"rtd_probe"}


def test_studies_sharing_no_aggregate_task_at_all_are_refused(studies, tmp_path):
    done = ablate(
        "compare", studies["two"], studies["stsb_bare"], "--out", tmp_path / "o", timeout=300
    )
    one_line_error(
        done, 2, "share none of the tasks of its GLUE score", "micro2: cola, rte", "stsb_bare: stsb"
    )


def test_an_objective_without_every_shared_task_is_named_with_what_it_lacks(studies, tmp_path):
    """ELECTRA's RTE fine-tune failed in one study: it has no GLUE score there, so it leaves
    the table, and the page says what it lacks where (it is in every study, so "only in" would
    mislead); with BERT's CoLA gone too, GLUE is not compared, saying why."""
    gap = without(studies["two"], tmp_path / "gap", ("ELECTRA", "rte"))
    text, _ = compare(gap, studies["five"], out=tmp_path / "c")
    glue = text.split("## GLUE", 1)[1].split("## ", 1)[0]
    assert "| BERT |" in glue and "| ELECTRA |" not in glue
    assert "Left out, without a score in every study: ELECTRA (lacks rte in micro2); Big " in glue
    both = without(studies["two"], tmp_path / "both", ("ELECTRA", "rte"), ("BERT", "cola"))
    text, _ = compare(both, studies["five"], out=tmp_path / "d")
    assert "## GLUE" not in text
    assert (
        "GLUE: not compared, no objective has a GLUE score in every study (over cola, rte; "
        "ELECTRA lacks rte in micro2; BERT lacks cola in micro2)." in text
    )
