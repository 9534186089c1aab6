"""No file this project reads back is unpickled: every ``torch.load`` passes
``weights_only=True``, nothing imports a pickle library (or asks numpy to unpickle), and the
text ``weights_only=False`` appears nowhere. Packs, bundles, kits and states come from
elsewhere and their checksums are their maker's own, so a pickle in one would run as code.

Read with ``ast`` over the package and every folder of Python the project runs (objectives,
the GPU node's scripts, the benchmarks), so a docstring that says "pickle" is not a hit and a
call written any way is. What remains allowed, each with its reason, is ``ALLOWED``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("electra_ablate", "objectives", "bench", ".ci")
PICKLERS = frozenset({"pickle", "_pickle", "cPickle", "cloudpickle", "dill", "joblib", "shelve"})

ALLOWED = {
    ("electra_ablate/checkpoints/hf_import.py", "import pickle"): (
        "only to catch pickle.UnpicklingError, which torch.load(weights_only=True) raises on a "
        "checkpoint that is more than tensors; nothing is unpickled"
    ),
}
"""(file, finding) -> why it is no unpickling of a file read back. Not here, and never: the
compile cache (``electra_ablate.infra.compile_cache``), which is code by nature: inductor, not
this project, loads its pickles, and it is only ever the archive the user's own session made
(its docstring says how it is trusted); nor submitit's pickled calls under a study's ``jobs/``,
which submitit writes and reads for the process that submitted them."""


def findings(source: str) -> list[str]:
    """Every unpickling a module's source may do, as a short description."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in PICKLERS]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PICKLERS:
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            keywords = {k.arg: k.value for k in node.keywords}
            if name.endswith("torch.load") or name == "load" and "weights_only" in keywords:
                value = keywords.get("weights_only")
                if not (isinstance(value, ast.Constant) and value.value is True):
                    found.append(f"{name}(...) without weights_only=True")
            value = keywords.get("allow_pickle")
            if value is not None and not (isinstance(value, ast.Constant) and not value.value):
                found.append(f"{name}(..., allow_pickle=...)")
    return found


def project_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_the_checker_catches_each_way_to_unpickle():
    planted = (
        "import pickle\nimport dill as d\nfrom joblib import load\nimport torch\n"
        "torch.load(f)\ntorch.load(f, weights_only=False)\ntorch.load(f, weights_only=flag)\n"
        "np.load(f, allow_pickle=True)\ntorch.load(f, weights_only=True)\n"
    )
    assert findings(planted) == [
        "import pickle",
        "import dill",
        "from joblib import",
        "torch.load(...) without weights_only=True",
        "torch.load(...) without weights_only=True",
        "torch.load(...) without weights_only=True",
        "np.load(..., allow_pickle=...)",
    ]


def test_nothing_read_back_is_unpickled():
    files = project_files()
    assert len(files) > 100 and any(p.name == "state.py" for p in files), "the tree was found"
    hits = [
        (path.relative_to(ROOT).as_posix(), finding)
        for path in files
        for finding in findings(path.read_text(encoding="utf-8"))
    ]
    assert [hit for hit in hits if hit not in ALLOWED] == []
    assert sorted(set(hits) & set(ALLOWED)) == sorted(ALLOWED), "an allowance no longer needed"


@pytest.mark.parametrize("text", ["weights_only=False", "weights_only = False"])
def test_weights_only_false_appears_nowhere(text):
    offenders = [
        p.relative_to(ROOT).as_posix()
        for p in project_files()
        if text in p.read_text(encoding="utf-8")
    ]
    assert offenders == []
