"""Sharing a run between studies in one parent folder, through the installed ``ablate``: a dry
run says which runs it will copy from a study beside, and for a run of the same objective beside
that differs, which identity field differs with both values and how to make them agree.

The workflow is the core ablation: study ``a`` trains BERT; study ``b`` adds an arm beside it and
should train only the arm. With budgets given in steps of different objectives the two BERTs
differ by a fraction of a percent in FLOPs, so they are different runs; the line says so, and
the budget it names makes them one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ablate_cli import E2E, SMOKE, ablate

pytestmark = E2E


def spec_of(name: str, objectives: list[str], budget: dict) -> dict:
    """The smoke study cut down to ``objectives`` at a few steps, one task, one seed."""
    spec = yaml.safe_load(SMOKE.read_text())
    spec |= {"name": name, "objectives": [{"name": o} for o in objectives], "budget": budget}
    spec["pretrain"] = {"batch_size": 4, "log_every": 1, "eval_batches": 1, "resume_every": 0}
    spec["finetune"] = {
        "tasks": ["rte"],
        "seeds": [0],
        "caps": {"rte": 16},
        "eval_caps": {"rte": 16},
        "recipe": {"epochs": 1, "task_epochs": {}},
        "baseline": False,
    }
    return spec


@pytest.fixture(scope="module")
def parent(smoke_env, tmp_path_factory) -> Path:
    """A parent folder with study ``a`` (BERT alone, 3 steps) finished in it."""
    root = tmp_path_factory.mktemp("reuse")
    spec = root / "a.yaml"
    spec.write_text(yaml.safe_dump(spec_of("a", ["bert_mlm"], {"steps": 3, "checkpoints": [1.0]})))
    done = ablate("run", spec, "--out", root / "runs" / "a", env=smoke_env, timeout=900)
    assert done.returncode == 0, done.stderr
    return root


def dry_run(parent: Path, spec: dict, env: dict) -> str:
    path = parent / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = ablate("run", path, "--out", parent / "runs" / spec["name"], "--dry-run", env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_near_run_beside_is_explained_and_the_named_budget_shares_it(parent, smoke_env):
    (bert,) = (parent / "runs" / "a" / "pretrain").glob("bert_mlm-s0-*")
    flops_a = json.loads((bert / "run.json").read_text())["budget_flops"]

    # 3 steps of ELECTRA's cost converted into BERT steps: not exactly a's budget
    near = spec_of("b", ["bert_mlm", "electra"], {"steps": 3, "steps_of": "electra"})
    near["budget"]["checkpoints"] = [1.0]
    plan = dry_run(parent, near, smoke_env)
    (line,) = [x for x in plan.splitlines() if "not reused" in x]
    assert line.startswith(f"bert_mlm (seed 0) not reused from a/{bert.name}: budget_flops is ")
    assert f"set `budget.flops: {flops_a!r}`" in line
    assert "electra (seed 0) not reused" not in plan  # no ELECTRA beside: nothing to explain

    shared = spec_of("b", ["bert_mlm", "electra"], {"flops": flops_a, "checkpoints": [1.0]})
    plan = dry_run(parent, shared, smoke_env)
    assert "not reused" not in plan
    assert "reused" in plan and "from a" in plan  # the status column, wrapped by the table

    # and the run does what the plan said: BERT copied, ELECTRA trained
    path = parent / "b.yaml"
    ran = ablate("run", path, "--out", parent / "runs" / "b", env=smoke_env, timeout=900)
    assert ran.returncode == 0, ran.stderr
    (copied,) = (parent / "runs" / "b" / "pretrain").glob("bert_mlm-s0-*")
    assert copied.name == bert.name
    done = json.loads((copied / "done.json").read_text())
    assert done["message"] == "identical run reused from a"
