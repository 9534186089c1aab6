"""The dry run's line on schedule shapes (issue 72): ``pretrain.warmup_steps`` without a decay
horizon gives objectives of different step counts at one budget different shapes, which the
plan's notes say in one line with each run's peak and final rate; the budget shape and the
paper's give one shape for all and say nothing."""

from __future__ import annotations

import pytest
import yaml
from ablate_cli import SMOKE

from electra_ablate.spec import parse_spec
from electra_ablate.study.context import Study
from electra_ablate.study.plan import plan_study


@pytest.fixture
def smoke_cache(smoke_env, monkeypatch):
    """The session's smoke data cache: planning reads the tokenizer and packed corpus from it."""
    for name in ("ABLATE_DATA_DIR", "ABLATE_CACHE"):
        monkeypatch.setenv(name, smoke_env[name])


def notes(tmp_path, **pretrain) -> list[str]:
    raw = yaml.safe_load(SMOKE.read_text())
    raw["objectives"] = [{"name": "bert_mlm"}, {"name": "electra"}]  # 40 ELECTRA steps, more BERT
    raw["pretrain"] = {**raw["pretrain"], **pretrain}
    return plan_study(Study(parse_spec(raw), SMOKE, tmp_path / "out", "cpu")).notes


def test_only_a_per_run_warm_up_is_stated_as_different_shapes(smoke_cache, tmp_path):
    (line,) = [n for n in notes(tmp_path, warmup_steps=4) if "schedule shapes" in n]
    assert line.startswith("pretrain.warmup_steps 4 with decay at each run's end gives the")
    assert "`electra` 40 steps, peak 1.00e-03, final " in line and "`bert_mlm` " in line
    for shape in ({}, {"decay_horizon_steps": 1_000, "warmup_steps": 100}):
        assert not [n for n in notes(tmp_path, **shape) if "schedule shapes" in n]
