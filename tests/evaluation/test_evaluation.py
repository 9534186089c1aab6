"""The evaluation seam: a task family joins through the ``electra_ablate.tasks`` entry-point
group, and probe-like tasks (frozen features, the kept detection head, reference scorers with no
encoder) fit the contract as they are.

``PROBES`` below is a complete third-party family written the way the probes will be: a
detection task that reads a discriminator's kept head (and is skipped for an MLM encoder) with a
token-identity reference, and an unseeded frozen-feature task. It is installed as a real
distribution (a ``*.dist-info`` folder on ``sys.path``), as ``pip install`` leaves a plugin.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from ablate_cli import ablate

from electra_ablate.cli import run_cli
from electra_ablate.conformance import TASK_RULES, ContractError, check_task
from electra_ablate.conformance.task import _contract_kept
from electra_ablate.evaluation.glue.task import GLUE, GLUE_TASKS
from electra_ablate.evaluation.run import job_identity, plan_job, run_job
from electra_ablate.evaluation.task import TaskSettings, available_tasks, get_task
from electra_ablate.infra.errors import AblateError, SpecError
from electra_ablate.spec import parse_spec

PROBES = textwrap.dedent('''
    import numpy as np
    import torch
    from pydantic import BaseModel, ConfigDict
    from sklearn.metrics import roc_auc_score

    from electra_ablate.evaluation.task import Task, TaskFamily


    class DetectParams(BaseModel):
        model_config = ConfigDict(extra="forbid")
        rows: int = 16


    def corrupted(seed, rows, vocab_size, length=12):
        """Random ordinary tokens, a seeded sixth of them replaced uniformly."""
        rng = np.random.default_rng(seed)
        ids = rng.integers(5, vocab_size, size=(rows, length))
        replaced = rng.random((rows, length)) < 1 / 6
        ids[replaced] = rng.integers(5, vocab_size, size=int(replaced.sum()))
        return ids, replaced


    class Detect(Task):
        name, family, needs = "detect_test", "probes_test", "detection_head"
        metrics = ("auc",)
        references = ("token_identity_test",)
        Params = DetectParams

        def identity(self, settings):
            return {"params": DetectParams.model_validate(settings.params).model_dump()}

        def evaluate(self, kept, settings, seed, device="cpu", progress=None):
            rows = DetectParams.model_validate(settings.params).rows
            ids, replaced = corrupted(seed, rows, kept.model.encoder.cfg.vocab_size)
            with torch.no_grad():
                x = torch.from_numpy(ids)
                hidden = kept.model.encoder(x, torch.zeros_like(x), torch.ones_like(x))
                logits = kept.model.head(hidden).numpy()
            return {"auc": 100 * roc_auc_score(replaced.ravel(), logits.ravel())}

        def evaluate_reference(self, reference, settings, seed, tokenizer_dir):
            rows = DetectParams.model_validate(settings.params).rows
            ids, replaced = corrupted(seed, rows, 100)
            return {"auc": 100 * roc_auc_score(replaced.ravel(), ids.ravel() % 7)}


    class Features(Task):
        name, family, needs, seeded = "features_test", "probes_test", "frozen_features", False
        metrics = ("norm",)

        def evaluate(self, kept, settings, seed, device="cpu", progress=None):
            x = torch.arange(5, 17).reshape(1, -1)
            with torch.no_grad():
                hidden = kept.model.encoder(x, torch.zeros_like(x), torch.ones_like(x))
            return {"norm": float(hidden.norm())}


    class Probes(TaskFamily):
        name, title, aggregate = "probes_test", "Probes", None

        def tasks(self):
            return [Detect(), Features()]

        def fingerprint(self, task, settings):
            return "generated"


    FAMILY = Probes()
''')


def install(tmp_path, monkeypatch, name: str, source: str | None, entry: str) -> None:
    if source is not None:
        (tmp_path / f"{name}.py").write_text(source)
    dist = tmp_path / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[electra_ablate.tasks]\n{entry}\n")
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.fixture
def probes(tmp_path, monkeypatch):
    install(
        tmp_path,
        monkeypatch,
        "probes_plugin_test",
        PROBES,
        "probes_test = probes_plugin_test:FAMILY",
    )
    yield
    sys.modules.pop("probes_plugin_test", None)


def settings(**params) -> TaskSettings:
    return TaskSettings(params=params)


def test_a_probe_family_joins_through_the_entry_point_and_keeps_the_contract(probes, capsys):
    assert {"detect_test", "features_test", "rte"} <= set(available_tasks())
    assert check_task("detect_test") == list(TASK_RULES)
    assert (
        check_task("features_test")[-1]
        == "task-references (skipped: the task declares no reference)"
    )
    assert run_cli(["tasks", "--json"]) == 0
    listed = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert listed["detect_test"]["needs"] == "detection_head"
    assert listed["detect_test"]["references"] == ["token_identity_test"]
    assert (
        listed["features_test"]["seeded"] is False and listed["features_test"]["aggregate"] is None
    )
    assert run_cli(["check", "--task", "detect_test"]) == 0
    assert "ok  task-skip" in capsys.readouterr().out


def test_the_detection_head_task_is_skipped_for_an_mlm_encoder_with_a_reason(probes, tmp_path):
    task = get_task("detect_test")
    discriminator = _contract_kept(tmp_path, "discriminator")
    mlm = _contract_kept(tmp_path, "mlm")
    job = plan_job("run", 1.0, None, task, 0, settings(), "generated")
    skipped = run_job(job, kept=mlm)
    assert skipped["status"] == "skipped" and "detection head" in skipped["message"]
    done = run_job(job, kept=discriminator)
    assert done["status"] == "done" and 0 <= done["metrics"]["auc"] <= 100
    assert run_job(job, kept=discriminator)["metrics"] == done["metrics"]


def test_a_job_id_changes_exactly_with_what_changes_the_result(probes):
    task = get_task("detect_test")
    same = [plan_job("run", 1.0, None, task, 0, settings(rows=16), "generated") for _ in range(2)]
    assert same[0].job_id == same[1].job_id
    assert (
        plan_job("run", 1.0, None, task, 0, settings(rows=32), "generated").job_id != same[0].job_id
    )
    assert (
        plan_job("run", 1.0, None, task, 1, settings(rows=16), "generated").job_id != same[0].job_id
    )
    assert plan_job("run", 1.0, None, task, 0, settings(rows=16), "other").job_id != same[0].job_id


def test_a_glue_job_is_named_by_exactly_what_named_it_before_the_seam():
    """The keys every committed study's fine-tune ids were hashed from, and nothing else
    (the values are pinned by tests/study/test_pinned_identities.py)."""
    identity = job_identity("run", 0.5, GLUE_TASKS["rte"], 2, TaskSettings(eval_cap=128), "fp")
    assert set(identity) == {
        "run_id",
        "fraction",
        "task",
        "seed",
        "recipe",
        "train_cap",
        "epochs",
        "eval_cap",
        "glue",
    }
    assert identity["glue"] == "fp" and identity["epochs"] == 10 and identity["eval_cap"] == 128
    assert "train_caps" not in identity["recipe"] and "task_epochs" not in identity["recipe"]


def raw_spec(**sections) -> dict:
    return {
        "name": "p",
        "data": {"corpus": {"paths": ["x"]}, "glue": "hub"},
        "budget": {"steps": 5},
        "objectives": [{"name": "electra"}],
        **sections,
    }


def test_a_spec_lists_tasks_of_any_family_under_evaluation(probes):
    spec = parse_spec(
        raw_spec(
            finetune={"tasks": ["rte"]},
            evaluation={
                "tasks": ["detect_test", "features_test"],
                "params": {"detect_test": {"rows": 8}},
            },
        )
    )
    blocks = spec.evaluation_blocks()
    assert [b.tasks for b in blocks] == [["rte"], ["detect_test", "features_test"]]
    assert blocks[1].task_params("detect_test") == {"rows": 8}
    errors = [
        (
            raw_spec(finetune={"tasks": ["detect_test"]}),
            "finetune.tasks: task 'detect_test' needs detection_head",
        ),
        (
            raw_spec(evaluation={"tasks": ["detect_tset"]}),
            "unknown task 'detect_tset' (did you mean 'detect_test'?)",
        ),
        (
            raw_spec(evaluation={"tasks": ["detect_test"], "params": {"detect_test": {"row": 3}}}),
            "evaluation.params: detect_test: row: unknown key (did you mean 'rows'?)",
        ),
        (
            raw_spec(
                evaluation={"tasks": ["features_test"], "params": {"features_test": {"a": 1}}}
            ),
            "task 'features_test' takes no params",
        ),
        (
            raw_spec(finetune={"tasks": ["rte"]}, evaluation={"tasks": ["rte"]}),
            "tasks in both finetune and evaluation: rte",
        ),
    ]
    for raw, message in errors:
        with pytest.raises(
            SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")
        ):
            parse_spec(raw)


def test_glue_is_one_family_whose_score_leaves_wnli_out():
    assert [t.name for t in GLUE.tasks()] == list(GLUE_TASKS)
    assert {t.family for t in GLUE.tasks()} == {"glue"}
    assert [t.name for t in GLUE.tasks() if not GLUE.in_aggregate(t)] == ["wnli"]
    assert all(t.needs == "finetuned_head" and t.seeded for t in GLUE.tasks())


def test_a_broken_task_plugin_is_one_clear_error(tmp_path, monkeypatch):
    install(tmp_path, monkeypatch, "broken_tasks_test", None, "broken = no_such_module_xyz:FAMILY")
    with pytest.raises(AblateError, match="task entry point 'broken'"):
        available_tasks()


def test_a_task_that_reports_an_undeclared_metric_breaks_the_contract(probes):
    task = get_task("features_test")
    leaky = type("Leaky", (type(task),), {"metrics": ("norm", "size")})()
    with pytest.raises(ContractError, match="task-evaluate: evaluate lacks the declared metric"):
        check_task(leaky)


def test_ablate_lists_tasks_and_rejects_an_unknown_one_in_one_line():
    """Through the CLI's entry function, as the console script runs it (``ablate_cli.ablate``)."""
    listed = ablate("tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    tasks = {t["name"]: t for t in json.loads(listed.stdout)}
    assert tasks["rte"]["family"] == "glue" and tasks["rte"]["aggregate"] == "GLUE score"
    assert tasks["wnli"]["aggregate"] is None and tasks["cola"]["headline"] == "matthews"
    unknown = ablate("check", "--task", "rtee")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert unknown.stderr.strip().splitlines() == [
        "error: unknown task 'rtee' (did you mean 'rte'?); registered: " + ", ".join(tasks)
    ]
