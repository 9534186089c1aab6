"""The code fingerprint recorded beside a run's id (issue 68, group 1): editing a plugin's file,
or upgrading the project, changes it and the difference names what changed; a built-in's covers
its own module, a plugin's its whole top-level package."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from electra_ablate import __version__
from electra_ablate.infra import code_identity
from electra_ablate.infra.code_identity import code_difference, code_fingerprint, source_files
from electra_ablate.infra.entry_points import registered
from electra_ablate.pretraining.registry import ENTRY_POINT_GROUP, available_objectives


@pytest.fixture
def plugin(tmp_path, monkeypatch) -> Path:
    """A plugin package on ``sys.path``: its objective's module imports a helper beside it."""
    package = tmp_path / "codeplug_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("SPLIT = (0.8, 0.1)\n")
    (package / "objective.py").write_text(
        "from codeplug_test.helpers import SPLIT\n\nclass Span:\n    split = SPLIT\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [n for n in sys.modules if n.startswith("codeplug_test")]:
        del sys.modules[name]


def test_editing_any_file_of_a_plugin_package_changes_its_fingerprint(plugin):
    cls = importlib.import_module("codeplug_test.objective").Span
    before = code_fingerprint(cls)
    assert set(before["files"]) == {
        "codeplug_test/__init__.py",
        "codeplug_test/helpers.py",
        "codeplug_test/objective.py",
    }
    assert code_fingerprint(cls) == before  # the same code: the same fingerprint
    (plugin / "helpers.py").write_text("SPLIT = (0.5, 0.1)\n")  # the objective's file unedited
    after = code_fingerprint(cls)
    assert code_difference(before, after) == "codeplug_test/helpers.py changed"
    (plugin / "extra.py").write_text("")
    assert code_difference(after, code_fingerprint(cls)) == "codeplug_test/extra.py added"


def test_a_module_outside_any_package_is_its_own_file(tmp_path, monkeypatch):
    (tmp_path / "lone_objective_test.py").write_text("class Lone:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        cls = importlib.import_module("lone_objective_test").Lone
        assert list(source_files(cls)) == ["lone_objective_test.py"]
    finally:
        sys.modules.pop("lone_objective_test", None)


def test_a_builtin_covers_its_module_and_the_project_version(monkeypatch):
    for ep in registered(ENTRY_POINT_GROUP):
        if not ep.value.startswith("electra_ablate."):
            continue  # a plugin installed here (the example's): its package, tested above
        cls = available_objectives()[ep.name]
        module = ep.value.split(":")[0]
        code = code_fingerprint(cls)
        assert code["electra_ablate"] == __version__
        assert list(code["files"]) == [module.replace(".", "/") + ".py"]
    monkeypatch.setattr(code_identity, "__version__", "9.9.9")
    assert code_difference(code, code_fingerprint(cls)) == f"electra-ablate {__version__} → 9.9.9"


def test_a_class_with_no_file_records_the_version_alone():
    cls = type("Made", (), {"__module__": "made_at_run_time_test"})
    assert code_fingerprint(cls) == {"electra_ablate": __version__, "files": {}}
    assert code_difference(code_fingerprint(cls), code_fingerprint(cls)) is None
