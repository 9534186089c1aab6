"""How a run beside that is not this run is described: the identity fields that differ, in
order, with both values shown with the digits that tell them apart."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.manifest import write_manifest
from electra_ablate.study.reuse import NearRun, differing_fields, reuse_problem, shown
from electra_ablate.study.units import RunUnit


def test_differing_fields_are_named_in_identity_order_with_both_values():
    here = {"objective": "bert_mlm", "params": {"mask_rate": 0.15}, "budget_flops": 7.871e10}
    there = {"objective": "bert_mlm", "params": {"mask_rate": 0.2}, "budget_flops": 7.880e10}
    assert differing_fields(here, there) == [
        ("params.mask_rate", 0.15, 0.2),
        ("budget_flops", 7.871e10, 7.880e10),
    ]
    assert differing_fields(here, dict(here)) == []
    assert differing_fields({"a": (1, 2)}, {"a": [1, 2]}) == []  # as run.json reads back
    assert differing_fields({"a": 1}, {"a": 1, "b": 2}) == [("b", None, 2)]


def test_values_are_shown_with_the_digits_that_tell_them_apart():
    assert shown(297992192.0, 298990000.0) == "2.98e+08"
    assert shown(1.00001e10, 1.00002e10) == "1.00001e+10"
    assert shown(None, 3) == "absent"
    assert shown("ad28", "bd11") == '"ad28"'


def test_the_line_names_the_budget_to_set_and_counts_the_other_differences():
    near = NearRun("a", "bert_mlm-s0-3ee5eb3f5819", "budget_flops", 2.99e8, 297992192.0, 2)
    line = near.describe()
    assert line.startswith("not reused from a/bert_mlm-s0-3ee5eb3f5819: budget_flops is 2.99e+08")
    assert "2.98e+08 there, and 1 more field(s)" in line
    assert "set `budget.flops: 297992192.0`" in line
    other = NearRun("a", "x", "params.mask_rate", 0.15, 0.2, 1).describe()
    assert other.endswith("to share it, make `params.mask_rate` agree")


def test_a_kept_encoder_left_elsewhere_is_reused_only_where_nothing_here_reads_it(tmp_path):
    """A GPU session sends a cut run back with its final kept encoder alone (the others as their
    ``kept.json``, as a pack leaves them): the run is copied when no evaluation still to do
    reads the others, and refused (trained again) when one does, or when one is missing."""
    source = RunLayout(tmp_path / "beside" / "pretrain" / "electra-s0-0123456789ab")
    source.root.mkdir(parents=True)
    source.done.write_text('{"status": "done"}')
    for fraction in (0.5, 1.0):
        source.kept(fraction).mkdir(parents=True)
        (source.kept(fraction) / "kept.json").write_text(json.dumps({"role": "mlm"}))
    (source.kept(1.0) / "kept.safetensors").write_bytes(b"weights")
    write_manifest(source.kept(1.0))
    plan = SimpleNamespace(checkpoints=[(0.5, 11), (1.0, 22)])
    unit = RunUnit(None, None, None, 0, plan, {}, "0123456789ab", RunLayout(Path("here")))
    assert reuse_problem(unit, source, needed={1.0}) is None
    assert "kept.safetensors is missing" in reuse_problem(unit, source, needed={0.5, 1.0})
    assert reuse_problem(unit, source) is not None  # nothing said of what is needed: whole only
    (source.kept(0.5) / "kept.json").unlink()
    assert "missing" in reuse_problem(unit, source, needed={1.0})
