"""The 0.2 import paths are gone (0.4): importing one fails with ``ModuleNotFoundError``, as any
missing module does, before and after the new paths are imported; importing the package runs
nothing of its own (it imports no other module of the package and leaves ``sys.meta_path`` as
it found it), and no finder of the package's is in ``sys.meta_path`` once the new paths and the
plugin face are imported. Run in a fresh interpreter, so that every import is the probe's own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

GONE = [
    "electra_ablate.objective",  # 0.2; now electra_ablate.pretraining.objective
    "electra_ablate.components.masking",  # electra_ablate.pretraining.components.masking
    "electra_ablate.testing",  # electra_ablate.conformance
    "electra_ablate.kept",  # electra_ablate.checkpoints.kept
    "electra_ablate.study.spec",  # 0.3; now electra_ablate.spec
    "electra_ablate.study.runner",  # electra_ablate.scaleout.runner
    "electra_ablate.study.doctor",  # electra_ablate.pretraining.doctor
    "electra_ablate.study.finetune",  # electra_ablate.study.evaluate_kept
]
NEW = [
    "electra_ablate.pretraining.objective",
    "electra_ablate.pretraining.components.masking",
    "electra_ablate.conformance",
    "electra_ablate.checkpoints.kept",
    "electra_ablate.spec",
    "electra_ablate.scaleout.runner",
    "electra_ablate.pretraining.doctor",
    "electra_ablate.study.evaluate_kept",
    "electra_ablate.plugin",
]

PROBE = textwrap.dedent("""
    import importlib, json, sys

    gone, new = json.loads(sys.argv[1]), json.loads(sys.argv[2])

    def failures():
        found = {}
        for name in gone:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                found[name] = exc.name
            else:
                found[name] = None
        return found

    before = list(sys.meta_path)
    import electra_ablate

    out = {
        "finders_added": [repr(f) for f in sys.meta_path if f not in before],
        "modules": sorted(m for m in sys.modules if m.split(".")[0] == "electra_ablate"),
        "before_new": failures(),
    }
    for name in new:
        importlib.import_module(name)  # raises if a new path is missing
    out["after_new"] = failures()
    def defined_in(finder):  # a finder is an instance, or a class with class methods
        owner = finder if isinstance(finder, type) else type(finder)
        return owner.__module__.split(".")[0]

    out["our_finders"] = [repr(f) for f in sys.meta_path if defined_in(f) == "electra_ablate"]
    print(json.dumps(out))
""")


def probe() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(GONE), json.dumps(NEW)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow  # process: a fresh interpreter's imports
def test_old_paths_fail_like_any_missing_module_and_the_package_installs_no_finder():
    seen = probe()
    assert seen["finders_added"] == [], "import electra_ablate changed sys.meta_path"
    assert seen["modules"] == ["electra_ablate"], "import electra_ablate imported more"
    for when in ("before_new", "after_new"):
        for name in GONE:
            missing = seen[when][name]
            assert missing is not None, f"{name} imports ({when})"
            # the error names the first missing part of the path, as for any missing module
            assert name == missing or name.startswith(missing + "."), (name, missing, when)
    assert seen["our_finders"] == []
