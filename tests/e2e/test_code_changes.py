"""Editing an objective's code re-runs its finished runs (issue 68, group 1), through the
installed ``ablate`` as a researcher meets it: a micro study of their own objective (a plugin
package on ``PYTHONPATH``, named ``package.module:Class``) finishes; they change its corruption
from 80/10/10 to 50/10 and run the same study again. The run id names no code, so before code
was recorded beside it the run stayed done and the old numbers were reported under the new
code. Now the dry run says why the run will be redone, and the run redoes it, moving the old one
aside. (Keeping it with ``--keep-code-changes``, sibling studies and evaluations are
``tests/study/test_code_change.py``, in-process.)"""

from __future__ import annotations

import json
from pathlib import Path

from ablate_cli import E2E, ablate
from torchrun_helpers import micro_spec, with_pythonpath

pytestmark = E2E

OBJECTIVE = '''"""A researcher's own objective: BERT MLM with the corruption split set here."""

from electra_ablate.plugin import get_objective

CORRUPTION = {"mask_token_prob": 0.8, "random_token_prob": 0.1}


class SpanMLM(get_objective("bert_mlm")):
    name = "span_mlm"

    def forward(self, batch):
        given, self.params = self.params, self.params.model_copy(update=CORRUPTION)
        try:
            return super().forward(batch)
        finally:
            self.params = given
'''


def last_heldout_loss(run: Path) -> float:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if x.get("split") == "heldout"][-1]["loss"]


def test_an_edited_objective_is_re_run_and_the_dry_run_says_why(tmp_path, smoke_env):
    package = tmp_path / "plugin" / "codechange_plugin_test"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "span_mlm.py").write_text(OBJECTIVE)
    env = with_pythonpath(smoke_env, tmp_path / "plugin")
    spec = micro_spec(
        tmp_path,
        "own",
        objectives=[{"name": "codechange_plugin_test.span_mlm:SpanMLM", "label": "span_mlm"}],
        budget={"steps": 3, "checkpoints": [1.0]},
        pretrain={"batch_size": 4, "log_every": 1, "eval_batches": 1, "resume_every": 0},
    )
    out = tmp_path / "runs" / "own"
    first = ablate("run", spec, "--out", out, "--no-progress", env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    (run,) = (out / "pretrain").glob("span_mlm-s0-*")
    old_loss = last_heldout_loss(run)

    (package / "span_mlm.py").write_text(
        OBJECTIVE.replace('"mask_token_prob": 0.8', '"mask_token_prob": 0.5')
    )
    plan = ablate("run", spec, "--out", out, "--dry-run", "--no-progress", env=env, timeout=600)
    assert plan.returncode == 0, plan.stderr
    assert (
        f"span_mlm (seed 0): code changed since {out} finished "
        "(codechange_plugin_test/span_mlm.py changed): re-run"
    ) in plan.stdout

    again = ablate("run", spec, "--out", out, "--no-progress", env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "pre-train span_mlm (seed 0, 3 steps): running" in again.stdout  # not "finished earlier"
    (moved,) = (out / "superseded").glob(f"*/pretrain/{run.name}")
    assert f"re-run; the old one moved to {moved}" in again.stderr
    assert last_heldout_loss(moved) == old_loss  # the old run, kept whole
    assert last_heldout_loss(run) != old_loss  # the number reported now is the new code's
    assert json.loads((run / "code.json").read_text()) != json.loads(
        (moved / "code.json").read_text()
    )
