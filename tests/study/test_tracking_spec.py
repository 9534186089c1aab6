"""The spec's ``tracking`` key: any subset of the registered trackers (the
``electra_ablate.trackers`` entry-point group, which a third party's package joins), checked when
the spec is validated and never mid-run: an unknown name gets a "did you mean", a missing
package the ``pip install`` to run, a tracker that cannot be imported its package's name. The
retired ``pretrain.tensorboard`` is refused with what to write instead, yet a ``study.json``
that recorded it still reads back. Trackers are in no id: two shards of a study may tell
different ones."""

from __future__ import annotations

import copy
import sys

import pytest
from ablate_cli import needs_extra

from electra_ablate.infra.errors import SpecError
from electra_ablate.infra.tracking import available_trackers, tracker_problem
from electra_ablate.scaleout.packs import spec_fingerprint
from electra_ablate.spec import parse_spec, recorded_spec

MINIMAL = {
    "name": "p",
    "data": {"corpus": {"paths": ["x"]}, "glue": "hub"},
    "budget": {"steps": 5},
    "objectives": [{"name": "bert_mlm"}],
}


def spec(**changes) -> dict:
    return {**copy.deepcopy(MINIMAL), **changes}


def test_the_built_in_trackers_are_registered_like_a_third_partys():
    assert {"tensorboard", "wandb", "mlflow"} <= set(available_trackers())


@needs_extra("tensorboard", "tensorboard")
def test_tracking_defaults_to_none_and_takes_a_subset_or_one_name():
    assert parse_spec(spec()).tracking == []
    assert parse_spec(spec(tracking=["tensorboard", "tensorboard"])).tracking == ["tensorboard"]
    assert parse_spec(spec(), overrides={"tracking": "tensorboard"}).tracking == ["tensorboard"]


def test_an_unknown_tracker_gets_a_did_you_mean():
    with pytest.raises(
        SpecError, match=r"tracking: unknown tracker 'wandbb' \(did you mean 'wandb'"
    ):
        parse_spec(spec(tracking=["wandbb"]))
    with pytest.raises(SpecError, match=r"unknown tracker 'comet'; choose from .*mlflow"):
        parse_spec(spec(tracking=["comet"]))


@pytest.mark.parametrize("name", ["wandb", "mlflow", "tensorboard"])
def test_a_missing_package_is_refused_naming_the_extra(monkeypatch, name):
    monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    with pytest.raises(SpecError) as refused:
        parse_spec(spec(tracking=[name]))
    line = str(refused.value)
    assert "\n" not in line
    assert f"tracking: tracker '{name}' needs the {name} package" in line
    assert f"pip install 'electra-ablate[{name}]'" in line


def test_a_third_party_tracker_that_cannot_be_imported_is_named(tmp_path, monkeypatch):
    dist = tmp_path / "broken_tracker_test-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-tracker-test\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[electra_ablate.trackers]\nbroken = no_such_tracker_module_xyz:Tracker\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    problem = tracker_problem("broken")
    assert problem is not None and "no_such_tracker_module_xyz" in problem
    assert "broken-tracker-test" in problem
    with pytest.raises(SpecError, match="tracker 'broken' cannot be loaded"):
        parse_spec(spec(tracking=["broken"]))


def test_the_retired_tensorboard_switch_says_what_to_write():
    raw = spec(pretrain={"tensorboard": True})
    with pytest.raises(SpecError) as refused:
        parse_spec(raw)
    assert "pretrain.tensorboard: retired" in str(refused.value)
    assert "`tracking: [tensorboard]`" in str(refused.value)
    with pytest.raises(SpecError, match="pretrain.tensorboard: retired"):
        parse_spec(spec(), overrides={"pretrain.tensorboard": True})
    variant = spec(variants=[{"label": "v", "set": {"pretrain.tensorboard": True}}])
    with pytest.raises(SpecError, match=r"variants\[0\] \(v\): pretrain.tensorboard: retired"):
        parse_spec(variant)


def test_a_study_json_from_before_reads_back_without_its_trackers(monkeypatch):
    """What an older ``study.json`` holds (``pretrain.tensorboard``), or one whose trackers are
    not installed here, still reads back: reading a study sends nothing."""
    recorded = parse_spec(spec()).model_dump(mode="json")
    recorded["pretrain"]["tensorboard"] = True
    recorded["tracking"] = ["wandb"]
    monkeypatch.setitem(sys.modules, "wandb", None)
    again = parse_spec(recorded_spec(recorded))
    assert again.tracking == [] and "tensorboard" not in again.pretrain.model_dump()
    assert recorded["tracking"] == ["wandb"]  # the record itself is left as it was


@needs_extra("tensorboard", "tensorboard")
def test_trackers_are_not_part_of_what_makes_a_study():
    plain = parse_spec(spec()).model_dump(mode="json")
    tracked = parse_spec(spec(tracking=["tensorboard"])).model_dump(mode="json")
    assert spec_fingerprint({"name": "p", "spec": plain}) == spec_fingerprint(
        {"name": "p", "spec": tracked}
    )
