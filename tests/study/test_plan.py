"""``plan_study`` is the one step that prepares a study's data: opening a study prepares
nothing, the planned units carry their data and backbone, and nothing after planning (jobs,
building, a run's batches, the tables' fingerprints) prepares data again. Under ``torchrun``
rank 0 prepares while the other ranks wait at one barrier around the whole step."""

from __future__ import annotations

import pytest
import yaml
from ablate_cli import SMOKE

from electra_ablate.spec import load_spec, parse_spec
from electra_ablate.study import building, plan
from electra_ablate.study.context import Study
from electra_ablate.study.data_identity import current_evaluation_fingerprints
from electra_ablate.study.plan import plan_study
from electra_ablate.study.units import BaselineUnit, RunUnit


@pytest.fixture
def smoke_cache(smoke_env, monkeypatch):
    """The session's smoke data cache: planning reads the tokenizer and packed corpus from it."""
    for name in ("ABLATE_DATA_DIR", "ABLATE_CACHE"):
        monkeypatch.setenv(name, smoke_env[name])


def refuse_to_prepare(monkeypatch) -> None:
    def prepare(*args, **kwargs):
        raise AssertionError("data prepared outside plan_study")

    monkeypatch.setattr(plan, "prepare_pretraining", prepare)


def test_opening_a_study_prepares_nothing(monkeypatch, tmp_path):
    refuse_to_prepare(monkeypatch)
    study = Study(load_spec(SMOKE), SMOKE, tmp_path / "out", "cpu")
    assert study.spec.name == "smoke"
    assert not (tmp_path / "out").exists()


def test_units_carry_their_data_and_nothing_after_planning_prepares_it(
    smoke_cache, monkeypatch, tmp_path
):
    study = Study(load_spec(SMOKE), SMOKE, tmp_path / "out", "cpu")
    planned = plan_study(study)
    (variant, spec, data), *others = planned.variants
    assert variant is None and not others
    assert planned.base is data
    assert data.backbone == spec.backbone_config(vocab_size=data.data.vocab_size)
    tasks = {name for block in spec.evaluation_blocks() for name in block.tasks}
    assert set(data.task_fingerprints) == tasks
    runs = [u for u in planned.units if isinstance(u, RunUnit)]
    assert len(runs) == len(spec.objectives) * len(spec.pretrain.seeds)
    assert all(u.data is data for u in planned.units)  # one data setting, prepared once
    assert any(isinstance(u, BaselineUnit) for u in planned.units)

    refuse_to_prepare(monkeypatch)
    unit = runs[0]
    jobs = study.jobs(unit, ready_only=False)
    assert {j.task for j in jobs} == tasks
    objective = study.build(unit)
    run = building.pretrain_run(study, unit, objective, unit.layout)
    assert run.tokenizer_dir == data.data.tokenizer_dir
    assert set(current_evaluation_fingerprints(planned)) == tasks


def test_a_variant_that_changes_the_backbone_shares_the_data_but_not_the_backbone(
    smoke_cache, tmp_path
):
    raw = yaml.safe_load(SMOKE.read_text())
    raw["objectives"] = [{"name": "electra"}]
    raw["variants"] = [
        {"label": "base"},
        {"label": "pre_ln", "set": {"backbone.overrides.layer_norm": "pre"}},
    ]
    study = Study(parse_spec(raw), SMOKE, tmp_path / "out", "cpu")
    planned = plan_study(study)
    (_, base_spec, base), (_, pre_spec, pre) = planned.variants
    assert pre.data is base.data and pre.task_fingerprints is base.task_fingerprints
    assert base.backbone == base_spec.backbone_config(vocab_size=base.data.vocab_size)
    assert pre.backbone == pre_spec.backbone_config(vocab_size=base.data.vocab_size)
    assert pre.backbone.layer_norm == "pre" and base.backbone.layer_norm != "pre"
    runs = {u.variant: u for u in planned.units if isinstance(u, RunUnit)}
    assert runs["pre_ln"].backbone == pre.backbone
    assert runs["pre_ln"].config["backbone"] == pre.backbone.model_dump()
    assert runs["pre_ln"].run_id != runs["base"].run_id


class RecordedRanks:
    """A stand-in for ``Distributed`` on one rank, recording barriers beside data preparation."""

    def __init__(self, is_main: bool, events: list[str]) -> None:
        self.is_main, self.events = is_main, events

    def barrier(self) -> None:
        self.events.append("barrier")


@pytest.mark.parametrize(
    ("is_main", "expected"),
    [(True, ["prepare", "barrier"]), (False, ["barrier", "prepare"])],
)
def test_rank_0_prepares_while_the_other_ranks_wait(
    smoke_cache, monkeypatch, tmp_path, is_main, expected
):
    events: list[str] = []
    real = plan.prepare_pretraining

    def recorded(*args, **kwargs):
        events.append("prepare")
        return real(*args, **kwargs)

    monkeypatch.setattr(plan, "prepare_pretraining", recorded)
    study = Study(load_spec(SMOKE), SMOKE, tmp_path / "out", "cpu")
    study.dist = RecordedRanks(is_main, events)  # type: ignore[assignment]
    plan_study(study)
    assert events == expected  # one data setting: prepared once, one barrier around it
