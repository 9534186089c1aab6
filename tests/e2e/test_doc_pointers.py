"""Every pointer resolves (issue 42): the repository files that the README and docs/ name exist,
and every dotted ``electra_ablate.…`` name in them and in the package's docstrings imports, as a
module or a module's attribute, at its current path (an old path that only works through
``electra_ablate.infra.moved``'s deprecation finder counts as rotten)."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# A repository path: one of the top-level folders (or a root file), not preceded by a path
# character, so ``runs/objectives/...`` or ``/shared/runs/...`` are not taken for one.
REPO_PATH = re.compile(
    r"(?<![\w./$~-])((?:electra_ablate|objectives|tests|studies|bench|gpu|reports|examples|docs"
    r"|\.ci)/[\w./-]*|pyproject\.toml|mkdocs\.yml)"
)
DOTTED = re.compile(r"(?<![\w.])electra_ablate(?:\.\w+)+")
# moved.py names the old paths on purpose: they are what its finder maps
EXEMPT_DOCSTRINGS = {ROOT / "electra_ablate" / "infra" / "moved.py"}


# where a path is named: fenced blocks, code spans and link targets; in plain prose only a
# path with a file's extension counts ("411 examples/s" is not a path, "docs/design.md" is)
NAMED = re.compile(r"```.*?```|``?[^`\n]+``?|\]\([^)\s]+\)", re.S)
FILE = re.compile(r"\.(py|md|yaml|yml|sh|toml|txt|csv|json)$")


def repo_paths(text: str) -> set[str]:
    """Repository paths named in ``text``, less those that are patterns (``<id>``, ``*``)."""
    found = set()
    for segment, any_path in [*((s, True) for s in NAMED.findall(text)), (text, False)]:
        for match in REPO_PATH.finditer(segment):
            if segment[match.end() : match.end() + 1] in {"<", "*", "{", "$"}:
                continue  # a placeholder follows: runs/<name>/..., packs/*.tar.gz
            path = match.group(1).rstrip(".,")
            if any_path or FILE.search(path):
                found.add(path)
    return found


def docstrings(path: Path) -> list[str]:
    """Every string statement of a module: module, class, function and attribute docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]


def entry_point_groups() -> set[str]:
    """The entry-point groups pyproject declares (``electra_ablate.tasks`` is a group, not a
    module)."""
    return set(re.findall(r'entry-points\."([^"]+)"', (ROOT / "pyproject.toml").read_text()))


def unresolved(name: str) -> str | None:
    """Why ``name`` does not resolve at its current path, or None if it does."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            with warnings.catch_warnings():  # an old path warns: it is reported below instead
                warnings.simplefilter("ignore", DeprecationWarning)
                module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        if sys.modules[module_name].__name__ != module_name:
            return f"an old path of {sys.modules[module_name].__name__}"
        obj = module
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"{module_name} has no {'.'.join(parts[cut:])}"
            obj = getattr(obj, attr)
        return None
    return "no such module"


def package_sources() -> list[Path]:
    return sorted((ROOT / "electra_ablate").rglob("*.py")) + sorted(
        (ROOT / "objectives").glob("*.py")
    )


def test_every_repository_file_the_docs_and_docstrings_name_exists():
    sources = {doc: [doc.read_text(encoding="utf-8")] for doc in DOCS}
    sources.update({p: docstrings(p) for p in package_sources()})
    missing = {
        f"{where.relative_to(ROOT)}: {path}"
        for where, texts in sources.items()
        for text in texts
        for path in repo_paths(text)
        if not (ROOT / path).exists()
    }
    assert not missing, sorted(missing)


def test_the_docs_name_the_files_they_point_at():
    """The pointer check above has something to check: the README and the docs name files."""
    named = set().union(*(repo_paths(d.read_text(encoding="utf-8")) for d in DOCS))
    assert {"bench/RESULTS.md", "docs/extending.md", "tests/e2e/test_faults.py"} <= named
    assert "runs/objectives" not in named and not any("<" in p for p in named)
    assert repo_paths("411 examples/s, see docs/design.md.") == {"docs/design.md"}


def test_every_dotted_name_in_the_docs_and_docstrings_resolves():
    groups = entry_point_groups()
    sources = {doc: [doc.read_text(encoding="utf-8")] for doc in DOCS}
    sources.update({p: docstrings(p) for p in package_sources() if p not in EXEMPT_DOCSTRINGS})
    problems = set()
    for where, texts in sources.items():
        for text in texts:
            for name in set(DOTTED.findall(text)) - groups:
                why = unresolved(name)
                if why:
                    problems.add(f"{where.relative_to(ROOT)}: {name} ({why})")
    assert not problems, sorted(problems)


def test_an_old_or_missing_name_does_not_resolve():
    """The resolver itself: a moved module's old path and a missing attribute are caught."""
    assert unresolved("electra_ablate.pretraining.objective.Objective") is None
    assert "no Nonexistent" in unresolved("electra_ablate.pretraining.objective.Nonexistent")
    assert "old path of electra_ablate.pretraining.objective" in unresolved(
        "electra_ablate.objective.Objective"
    )
    assert unresolved("electra_ablate.no_such_wing") == "electra_ablate has no no_such_wing"
