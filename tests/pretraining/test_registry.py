"""A third-party objective joins through the entry-point group, with no change to this project.

The test writes a real installed distribution (a ``*.dist-info`` folder with ``entry_points.txt``)
onto ``sys.path``: exactly what ``pip install`` of a plugin package leaves behind.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from electra_ablate.cli import run_cli
from electra_ablate.pretraining.registry import available_objectives, get_objective
from electra_ablate.spec import parse_spec

PLUGIN = textwrap.dedent("""
    from electra_ablate.pretraining.objective import KeptModel, ModelPass, ObjectiveParams
    from electra_ablate.objectives.bert_mlm import BertMLM


    class WholeWordParams(ObjectiveParams):
        span: int = 3


    class SpanMLM(BertMLM):
        name = "span_mlm_test"
        description = "test plugin"
        Params = WholeWordParams
""")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "span_plugin_test.py").write_text(PLUGIN)
    dist = tmp_path / "span_plugin_test-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: span-plugin-test\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[electra_ablate.objectives]\nspan_mlm_test = span_plugin_test:SpanMLM\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("span_plugin_test", None)


def test_plugin_is_discovered_listed_and_usable_in_a_spec(plugin, capsys):
    assert "span_mlm_test" in available_objectives()
    assert get_objective("span_mlm_test").Params().span == 3
    assert run_cli(["objectives", "--json"]) == 0
    names = [o["name"] for o in json.loads(capsys.readouterr().out)]
    assert "span_mlm_test" in names and "electra" in names
    spec = parse_spec(
        {
            "name": "p",
            "data": {"corpus": {"paths": ["x"]}, "glue": "hub"},
            "budget": {"steps": 5},
            "objectives": [{"name": "span_mlm_test", "params": {"span": 5}}],
            "finetune": {"tasks": ["rte"]},
        }
    )
    assert spec.objectives[0].params == {"span": 5}


def test_without_the_plugin_it_is_unknown():
    assert "span_mlm_test" not in available_objectives()


def test_a_broken_plugin_is_one_clear_error(tmp_path, monkeypatch, capsys):
    dist = tmp_path / "broken_plugin_test-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-plugin-test\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[electra_ablate.objectives]\nbroken = no_such_module_xyz:Thing\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert run_cli(["objectives"]) == 1
    err = capsys.readouterr().err
    assert "objective entry point 'broken'" in err and "Traceback" not in err
