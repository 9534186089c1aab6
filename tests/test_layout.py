"""The package's import graph, read from the source with ``ast``: no circles, nothing imported
from a higher wing (``electra_ablate.infra.layers.LAYERS``), project imports at the top of the
file outside the CLI, and every package listed in ``pyproject.toml``.

What counts as an import of a project module: every ``import`` and ``from ... import`` that names
one, at the top of a module, inside a module-level ``try`` or ``if`` (``if TYPE_CHECKING:``
included: an annotation is a dependency too, and counting it keeps the graph one a reader can
trust), in a class body, or inside a function. ``from pkg import name`` is an edge to
``pkg.name`` where that is a module, else to ``pkg``. The checker is tried on a planted package
first (``test_the_checker_finds_a_planted_cycle_upward_import_and_lazy_import``), so a clean
result on the real one means something.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from electra_ablate.infra.layers import LAYERS, LAZY_IMPORTS_ALLOWED

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "electra_ablate"
SOURCES = {PACKAGE: ROOT / "electra_ablate", f"{PACKAGE}.objectives": ROOT / "objectives"}
"""Where each package's files are: the built-in objectives install as ``electra_ablate.objectives``
from the repository's ``objectives/``."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    where: str  # "top", "type_checking" or "function"

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target} ({self.where})"


def modules(sources: Mapping[str, Path]) -> dict[str, Path]:
    """Every module under each package's folder, by dotted name (a package by its own name)."""
    found = {}
    for package, folder in sources.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str, path: Path, known: Iterable[str], package: str) -> list[Edge]:
    """The project imports of one module, each with where in the file it sits."""
    known = set(known)
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            parents = here.split(".")[: len(here.split(".")) - node.level + 1]
            base = ".".join([*parents, *([base] if base else [])])
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]

    edges: list[Edge] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in targets(child):
                    if target == package or target.startswith(package + "."):
                        edges.append(Edge(module, target, child.lineno, where))
            elif isinstance(child, ast.If) and where == "top" and _type_checking(child.test):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), "type_checking")
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), where)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, "function")
            else:
                visit(child, where)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), "top")
    return edges


def import_graph(sources: Mapping[str, Path], package: str) -> list[Edge]:
    found = modules(sources)
    return [edge for name, path in found.items() for edge in imports_of(name, path, found, package)]


def wing(module: str, package: str) -> str:
    """The wing a module belongs to: ``electra_ablate.evaluation.glue.task`` -> ``evaluation``;
    ``__main__`` is the CLI's; the package's own ``__init__`` (``""``) stands with the lowest
    wing: it imports nothing."""
    parts = module.split(".")
    if len(parts) == 1:
        return ""
    return "cli" if parts[1] == "__main__" else parts[1]


def rank(module: str, package: str, layers: Sequence[str]) -> int:
    name = wing(module, package)
    if name == "":
        return 0
    assert name in layers, f"{module}: wing {name!r} is not in the layer order {layers}"
    return layers.index(name)


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """The import circles: every strongly connected set of two or more modules, or a module that
    imports itself (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return found


def upward(edges: Iterable[Edge], package: str, layers: Sequence[str]) -> list[Edge]:
    return [e for e in edges if rank(e.target, package, layers) > rank(e.source, package, layers)]


def lazy(edges: Iterable[Edge], package: str, allowed: Iterable[str]) -> list[Edge]:
    """Project imports inside functions, outside the wings allowed them."""
    return [e for e in edges if e.where == "function" and wing(e.source, package) not in allowed]


# ------------------------------------------------------------------------------ the checker


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_planted_cycle_upward_import_and_lazy_import(tmp_path):
    """A toy package in two wings, ``low`` < ``high``, with one of each fault planted (and a
    clean import of each kind beside it): the checker names exactly the planted ones."""
    _write(
        tmp_path / "toy",
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/base.py": "X = 1\n",
            "low/climbs.py": "from toy.high import top\n",  # planted: upward
            "low/late.py": "def f():\n    from toy.low import base\n    return base\n",  # lazy
            "low/typed.py": "import typing\nif typing.TYPE_CHECKING:\n    from toy.low import X\n",
            "high/__init__.py": "",
            "high/top.py": "from toy.low.base import X\nfrom . import ring_a\n",
            "high/ring_a.py": "from toy.high import ring_b\n",  # planted: a circle a -> b -> a
            "high/ring_b.py": "try:\n    from .ring_a import Y\nexcept ImportError:\n    pass\n",
        },
    )
    edges = import_graph({"toy": tmp_path / "toy"}, "toy")
    layers = ("low", "high")
    assert cycles(edges) == [["toy.high.ring_a", "toy.high.ring_b"]]
    assert [(e.source, e.target) for e in upward(edges, "toy", layers)] == [
        ("toy.low.climbs", "toy.high.top")
    ]
    assert [(e.source, e.target) for e in lazy(edges, "toy", ())] == [
        ("toy.low.late", "toy.low.base")
    ]
    assert lazy(edges, "toy", ("low",)) == []
    assert Edge("toy.low.typed", "toy.low", 3, "type_checking") in edges

    # and the fix is seen: break the circle and the climb, and both lists are empty
    _write(tmp_path / "toy", {"high/ring_b.py": "Y = 2\n", "low/climbs.py": "import toy.low\n"})
    edges = import_graph({"toy": tmp_path / "toy"}, "toy")
    assert cycles(edges) == [] and upward(edges, "toy", layers) == []


# ------------------------------------------------------------------------------ the package


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    """The package's graph, read when a test asks for it (not at collection, where every
    worker would read it)."""
    return import_graph(SOURCES, PACKAGE)


def test_the_package_has_no_import_circles(edges):
    found = cycles(edges)
    assert found == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_module_imports_from_a_higher_wing(edges):
    found = upward(edges, PACKAGE, LAYERS)
    assert found == [], f"imports from a higher wing ({' < '.join(LAYERS)}):\n" + "\n".join(
        map(str, found)
    )


def test_project_imports_sit_at_the_top_of_the_file_outside_the_cli(edges):
    found = [e for e in lazy(edges, PACKAGE, LAZY_IMPORTS_ALLOWED)]
    assert found == [], "project imports inside functions:\n" + "\n".join(map(str, found))


def test_every_module_is_in_a_wing_of_the_layer_order():
    for module in modules(SOURCES):
        rank(module, PACKAGE, LAYERS)  # asserts the wing is known


def test_every_package_is_listed_in_pyproject():
    """``[tool.setuptools] packages`` names each package explicitly (the objectives install from
    another folder), so a new subpackage missing from it would be left out of a wheel."""
    tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else None
    if tomllib is None:
        pytest.skip("tomllib is in the standard library from Python 3.11")
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    packages = {name for name, path in modules(SOURCES).items() if path.name == "__init__.py"}
    assert sorted(packages) == sorted(listed)
