"""What ``pip install .`` puts in site-packages (issue 42): every package of ``electra_ablate``,
the built-in objectives inside the project's namespace (``electra_ablate/objectives/``) and no
top-level ``objectives`` package that could collide with another distribution's, with the entry
points naming ``electra_ablate.objectives.*``."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    tomllib = pytest.importorskip("tomli", reason="Python 3.10 reads TOML with tomli")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
BUILT_IN_FILES = sorted(p.name for p in (ROOT / "objectives").glob("*.py"))


def packages_on_disk() -> set[str]:
    """Every folder of ``electra_ablate/`` that holds Python files, as a dotted name, and the
    repository's ``objectives/`` under the name it installs as."""
    found = {"electra_ablate.objectives"}
    for path in (ROOT / "electra_ablate").rglob("*.py"):
        relative = path.parent.relative_to(ROOT)
        if "__pycache__" not in relative.parts:
            found.add(".".join(relative.parts))
    return found


def test_every_package_is_listed_and_every_listed_package_exists():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert packages_on_disk() - listed == set(), "add them to [tool.setuptools] packages"
    assert listed - packages_on_disk() == set(), "listed in pyproject but not on disk"
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {
        "electra_ablate.objectives": "objectives"
    }
    folders = {p.parent for p in (ROOT / "electra_ablate").rglob("*.py")}
    assert [f for f in folders if not (f / "__init__.py").is_file()] == []


def test_entry_points_name_the_objectives_inside_the_namespace():
    entry_points = PYPROJECT["project"]["entry-points"]["electra_ablate.objectives"]
    modules = {value.partition(":")[0] for value in entry_points.values()}
    assert all(m.startswith("electra_ablate.objectives.") for m in modules), modules
    in_files = {f"electra_ablate.objectives.{name[:-3]}" for name in BUILT_IN_FILES}
    assert modules <= in_files  # every entry point names a file of objectives/


@pytest.mark.slow
def test_the_wheel_installs_objectives_inside_electra_ablate(tmp_path):
    """Built from a copy (setuptools writes build/ and egg-info next to the sources)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("electra_ablate", "objectives"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    done = subprocess.run(
        [*build, "-w", str(wheels), str(source)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = wheels.glob("electra_ablate-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (entry_points_file,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = configparser.ConfigParser(delimiters=("=",))
        entry_points.read_string(archive.read(entry_points_file).decode())
    top_level = {name.split("/")[0] for name in names}
    assert "objectives" not in top_level
    assert {n for n in top_level if not n.endswith(".dist-info")} == {"electra_ablate"}
    assert {f"electra_ablate/objectives/{f}" for f in BUILT_IN_FILES} <= set(names)
    packaged = {"/".join(n.split("/")[:-1]) for n in names if n.endswith("/__init__.py")}
    expected = {p.replace(".", "/") for p in PYPROJECT["tool"]["setuptools"]["packages"]}
    assert packaged == expected
    objectives = dict(entry_points["electra_ablate.objectives"])
    assert objectives == PYPROJECT["project"]["entry-points"]["electra_ablate.objectives"]
    assert all(v.strip().startswith("electra_ablate.objectives.") for v in objectives.values())
