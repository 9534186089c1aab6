"""Every pointer resolves (issue 42): the repository files that the README and docs/ name exist,
every dotted ``electra_ablate.…`` name in them and in the package's docstrings imports, as a
module or a module's attribute, and every ``from electra_ablate… import X`` in them (an example)
imports each ``X`` from that module. The checks are tried on planted bad names first, so a clean
result on the real sources means something."""

from __future__ import annotations

import ast
import importlib
import re
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
# ``from electra_ablate[.pkg] import a, b as c`` on one line, or with the names in parentheses
# over several (an example in a docstring or a page, indented or not)
FROM_IMPORT = re.compile(
    r"(?<![\w.])from[ \t]+(electra_ablate(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#`]*)"
)
IMPORTED = re.compile(r"(\w+)(?:\s+as\s+\w+)?")


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
    """Why ``name`` does not resolve, or None if it does: the longest prefix that imports as a
    module, then the rest as its attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        obj = module
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"{module_name} has no {'.'.join(parts[cut:])}"
            obj = getattr(obj, attr)
        return None
    return "no such module"


def imported_names(text: str) -> set[str]:
    """The dotted ``module.name`` of every name a ``from electra_ablate… import`` in ``text``
    imports, or ``module.<what>`` where what follows ``import`` is not a list of names."""
    found = set()
    for module, what in FROM_IMPORT.findall(text):
        what = re.sub(r"#[^\n]*", "", what).strip().strip("()")  # comments between names
        items = [item.strip() for item in what.split(",")]
        for item in filter(None, items):
            name = IMPORTED.fullmatch(item)
            found.add(f"{module}.{name[1] if name else f'<{item}>'}")
    return found


def package_sources() -> list[Path]:
    return sorted((ROOT / "electra_ablate").rglob("*.py")) + sorted(
        (ROOT / "objectives").glob("*.py")
    )


def checked_texts() -> dict[Path, list[str]]:
    """What the pointer checks read: each doc whole, and each source file's docstrings."""
    sources = {doc: [doc.read_text(encoding="utf-8")] for doc in DOCS}
    sources.update({p: docstrings(p) for p in package_sources()})
    return sources


def test_every_repository_file_the_docs_and_docstrings_name_exists():
    missing = {
        f"{where.relative_to(ROOT)}: {path}"
        for where, texts in checked_texts().items()
        for text in texts
        for path in repo_paths(text)
        if not (ROOT / path).exists()
    }
    assert not missing, sorted(missing)


def test_the_docs_name_the_files_they_point_at():
    """The pointer check above has something to check: the README and the docs name files."""
    named = set().union(*(repo_paths(d.read_text(encoding="utf-8")) for d in DOCS))
    assert {"bench/README.md", "docs/extending.md", "tests/e2e/test_faults.py"} <= named
    assert "runs/objectives" not in named and not any("<" in p for p in named)
    assert repo_paths("411 examples/s, see docs/design.md.") == {"docs/design.md"}


def pointer_problems(texts: list[str]) -> set[str]:
    """Every dotted name and every name imported ``from electra_ablate…`` in ``texts`` that does
    not resolve, with why."""
    groups = entry_point_groups()
    problems = set()
    for text in texts:
        for name in (set(DOTTED.findall(text)) - groups) | imported_names(text):
            why = "not a name" if name.endswith(">") else unresolved(name)
            if why:
                problems.add(f"{name} ({why})")
    return problems


def test_every_dotted_and_imported_name_in_the_docs_and_docstrings_resolves():
    problems = {
        f"{where.relative_to(ROOT)}: {problem}"
        for where, texts in checked_texts().items()
        for problem in pointer_problems(texts)
    }
    assert not problems, sorted(problems)


def test_the_docs_hold_imports_to_check():
    """The import check above has something to check: the pages and docstrings show imports."""
    texts = [d.read_text(encoding="utf-8") for d in DOCS]
    texts += [text for p in package_sources() for text in docstrings(p)]
    named = set().union(*(imported_names(text) for text in texts))
    assert {"electra_ablate.api", "electra_ablate.plugin.check_objective"} <= named
    assert "electra_ablate.analysis.results.read_results" in named  # a docstring's example


def test_an_old_or_missing_name_does_not_resolve():
    """The resolver itself: an old (0.2) path and a missing attribute are caught."""
    assert unresolved("electra_ablate.pretraining.objective.Objective") is None
    assert unresolved("electra_ablate.evaluation.glue") is None  # a module, not an attribute
    assert "no Nonexistent" in unresolved("electra_ablate.pretraining.objective.Nonexistent")
    assert unresolved("electra_ablate.objective.Objective") == (
        "electra_ablate has no objective.Objective"
    )
    assert unresolved("electra_ablate.no_such_wing") == "electra_ablate has no no_such_wing"


PLANTED = """
A page's prose: ``from electra_ablate.plugin import Objective, NoSuchName`` imports one good
and one bad name; so does this example::

    from electra_ablate import api, objective
    from electra_ablate.evaluation.finetune import FinetuneRecipe  # a package that re-exports none
    from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe as Recipe
    from electra_ablate.pretraining.objective import (
        Objective,
        Stale,  # gone
    )
    from electra_ablate.study import spec
"""


def test_the_import_check_finds_planted_bad_imports():
    """Every form an example imports in: one line, ``as``, parentheses over several lines, a
    module from its package; and the bad names among them are the ones reported."""
    assert imported_names(PLANTED) == {
        "electra_ablate.plugin.Objective",
        "electra_ablate.plugin.NoSuchName",
        "electra_ablate.api",
        "electra_ablate.objective",
        "electra_ablate.evaluation.finetune.FinetuneRecipe",
        "electra_ablate.evaluation.finetune.recipe.FinetuneRecipe",
        "electra_ablate.pretraining.objective.Objective",
        "electra_ablate.pretraining.objective.Stale",
        "electra_ablate.study.spec",
    }
    assert pointer_problems([PLANTED]) == {
        "electra_ablate.plugin.NoSuchName (electra_ablate.plugin has no NoSuchName)",
        "electra_ablate.objective (electra_ablate has no objective)",
        "electra_ablate.evaluation.finetune.FinetuneRecipe "
        "(electra_ablate.evaluation.finetune has no FinetuneRecipe)",
        "electra_ablate.pretraining.objective.Stale "
        "(electra_ablate.pretraining.objective has no Stale)",
        "electra_ablate.study.spec (electra_ablate.study has no spec)",
    }
    assert imported_names("from electra_ablate.plugin import *") == {"electra_ablate.plugin.<*>"}
