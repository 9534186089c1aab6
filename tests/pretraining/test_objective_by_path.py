"""An objective named ``package.module:Class`` (issue 42, item 3): usable in ``ablate check`` and
in a spec with no entry point and no (re-)install, checked by the same contract and registry
rules; registered names resolve exactly as before."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest
from ablate_cli import ablate, needs_ablate, one_line_error
from electra_ablate.objectives.bert_mlm import BertMLM

from electra_ablate.conformance import RULES
from electra_ablate.infra.errors import AblateError, InputError, SpecError
from electra_ablate.pretraining.departures import params_departures
from electra_ablate.pretraining.registry import (
    declared_metric_kinds,
    get_objective,
    import_objective,
    is_import_path,
)
from electra_ablate.spec import parse_spec

MODULE = textwrap.dedent("""
    from pydantic import Field

    from electra_ablate.objectives.bert_mlm import BertMLM, BertMLMParams


    class WiderParams(BertMLMParams):
        note: str = Field("x", description="a knob of this objective only")


    class MyObjective(BertMLM):
        name = "my_objective"
        description = "BERT's MLM under another name, never registered"
        Params = WiderParams
        metric_kinds = {"my_signal": "loss"}


    class NotAnObjective:
        pass
""")


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """``mypkg_p2/mymod.py`` on ``sys.path`` (and on ``PYTHONPATH`` for subprocesses)."""
    package = tmp_path / "mypkg_p2"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mymod.py").write_text(MODULE)
    (package / "broken.py").write_text("raise RuntimeError('the plugin is broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("mypkg_p2")]:
        sys.modules.pop(name)


def test_a_module_path_resolves_to_the_class_and_registered_names_are_unchanged(on_path):
    assert is_import_path("mypkg_p2.mymod:MyObjective") and not is_import_path("bert_mlm")
    found = get_objective("mypkg_p2.mymod:MyObjective")
    assert found.__name__ == "MyObjective" and issubclass(found, BertMLM)
    assert get_objective("electra_ablate.objectives.bert_mlm:BertMLM") is BertMLM
    assert get_objective("bert_mlm") is BertMLM  # the registered name, as before


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("mypkg_p2.mymod:MyObjectiv", "did you mean 'MyObjective'"),
        ("mypkg_p2.mymd:MyObjective", "no module named 'mypkg_p2.mymd'"),
        ("mypkg_p2.mymod:NotAnObjective", "is not an Objective subclass"),
        ("mypkg_p2.mymod:", "package.module:Class"),
    ],
)
def test_a_wrong_path_is_the_users_input_error(on_path, path, needle):
    with pytest.raises(InputError, match=needle):
        import_objective(path)


def test_a_module_that_fails_to_import_is_a_failure_not_an_input_error(on_path):
    with pytest.raises(AblateError, match="the plugin is broken") as caught:
        get_objective("mypkg_p2.broken:Anything")
    assert not isinstance(caught.value, InputError)


def spec_with(objectives: list[dict]) -> dict:
    return {
        "name": "p",
        "data": {"corpus": {"paths": ["x"]}, "glue": "hub"},
        "budget": {"steps": 5},
        "objectives": objectives,
        "finetune": {"tasks": ["rte"]},
    }


def test_a_spec_names_an_objective_by_path_and_its_params_are_validated(on_path):
    name = "mypkg_p2.mymod:MyObjective"
    spec = parse_spec(spec_with([{"name": name, "params": {"note": "y"}}]))
    assert spec.objectives[0].name == name  # recorded as given: run ids hash this string
    with pytest.raises(SpecError, match=r"objectives\[0\]\.params.*nte"):
        parse_spec(spec_with([{"name": name, "params": {"nte": "y"}}]))
    with pytest.raises(SpecError, match=r"objectives\[1\]\.name.*did you mean 'MyObjective'"):
        parse_spec(spec_with([{"name": "bert_mlm"}, {"name": "mypkg_p2.mymod:MyObjectiv"}]))


def test_reports_read_a_path_named_objectives_declarations(on_path):
    name = "mypkg_p2.mymod:MyObjective"
    assert declared_metric_kinds([name])["my_signal"] == "loss"
    assert params_departures(name, {"mask_rate": 0.3}) == params_departures(
        "bert_mlm", {"mask_rate": 0.3}
    )
    assert declared_metric_kinds(["mypkg_p2.gone:X"]) == {}  # not installed here: nothing


@pytest.mark.slow
@needs_ablate
def test_ablate_check_takes_a_module_path(on_path):
    env = {**os.environ, "PYTHONPATH": str(on_path)}
    done = ablate("check", "mypkg_p2.mymod:MyObjective", env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert [line.split()[-1] for line in done.stdout.splitlines()] == list(RULES)
    typo = ablate("check", "mypkg_p2.mymod:MyObjectiv", env=env, timeout=600)
    one_line_error(typo, 2, "MyObjectiv", "did you mean 'MyObjective'")
    missing = ablate("check", "mypkg_p2.nomod:MyObjective", env=env, timeout=600)
    one_line_error(missing, 2, "no module named 'mypkg_p2.nomod'")
    broken = ablate("check", "mypkg_p2.broken:X", env=env, timeout=600)
    one_line_error(broken, 1, "the plugin is broken")
