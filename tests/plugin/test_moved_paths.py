"""The 0.2 import paths a plugin may still use keep working for one minor version (issue 42,
item 2): each gives the very module object of its new path and a ``DeprecationWarning`` naming
that path, and a plugin's test suite run with ``-W error::DeprecationWarning`` fails on an old
path while the new ones import cleanly. Run in fresh interpreters: an import cached by another
test would hide the warning."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

OLD_TO_NEW = {
    "electra_ablate.objective": "electra_ablate.pretraining.objective",
    "electra_ablate.components.masking": "electra_ablate.pretraining.components.masking",
    "electra_ablate.testing": "electra_ablate.conformance",
    "electra_ablate.kept": "electra_ablate.checkpoints.kept",
    "electra_ablate.tokens": "electra_ablate.backbone.tokens",
    "electra_ablate.config": "electra_ablate.backbone.config",
}
UNMOVED = ["electra_ablate.evaluation.task", "electra_ablate.plugin"]

PROBE = textwrap.dedent("""
    import importlib, json, sys, warnings

    pairs, unmoved = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    out = {}
    for old, new in pairs.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        out[old] = {
            "same": module is importlib.import_module(new),
            "warnings": [
                str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)
            ],
        }
    for name in unmoved:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            importlib.import_module(name)
        out[name] = {"warnings": [
            str(w.message) for w in caught
            if issubclass(w.category, DeprecationWarning) and "electra_ablate" in str(w.message)
        ]}
    import electra_ablate.conformance as face
    import electra_ablate.testing as old_testing
    out["attribute"] = old_testing.check_objective is face.check_objective
    print(json.dumps(out))
""")

STRICT = textwrap.dedent("""
    import importlib, json, sys

    pairs = json.loads(sys.argv[1])
    for new in [*pairs.values(), *json.loads(sys.argv[2])]:
        importlib.import_module(new)  # must not raise under -W error::DeprecationWarning
    failed = {}
    for old, new in pairs.items():
        try:
            importlib.import_module(old)
        except DeprecationWarning as exc:
            failed[old] = str(exc)
    print(json.dumps(failed))
""")


def python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args, json.dumps(OLD_TO_NEW), json.dumps(UNMOVED)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_old_paths_give_the_same_module_and_warn_naming_the_new_path():
    done = python("-c", PROBE)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    for old, new in OLD_TO_NEW.items():
        assert seen[old]["same"], old
        # a submodule of a moved package warns for the package first, then for itself
        *parents, message = seen[old]["warnings"]
        assert message.startswith(f"{old} moved to {new} in 0.3"), message
        assert "electra_ablate.plugin" in message
        assert all(old.startswith(m.split()[0] + ".") for m in parents), parents
    for name in UNMOVED:
        assert seen[name]["warnings"] == [], name
    assert seen["attribute"] is True  # electra_ablate.testing.check_objective still resolves


def test_warnings_as_errors_fail_the_old_paths_and_pass_the_new_ones():
    done = python("-W", "error::DeprecationWarning", "-c", STRICT)
    assert done.returncode == 0, done.stderr
    failed = json.loads(done.stdout.splitlines()[-1])
    assert sorted(failed) == sorted(OLD_TO_NEW)
    for old, new in OLD_TO_NEW.items():  # the error names where the moved path went
        moved_to = re.search(r" moved to (\S+) in 0\.3", failed[old])
        assert moved_to, failed[old]
        assert new == moved_to[1] or new.startswith(moved_to[1] + "."), failed[old]
