"""Old import paths of modules that moved in 0.3, kept working for one minor version.

0.3 gave every module a wing (``electra_ablate.pretraining``, ``electra_ablate.evaluation``,
...). A plugin or script that still imports an old path (``electra_ablate.objective``,
``electra_ablate.components.masking``, ...) gets the module at its new path and a
``DeprecationWarning`` naming it; ``electra_ablate.plugin`` is the path that stays. The finder is
installed by ``electra_ablate/__init__.py``; the old paths go in 0.4.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

REMOVED_IN = "0.4"

# old module (or package: its submodules follow it) -> new module, under ``electra_ablate.``
MOVED: dict[str, str] = {
    "errors": "infra.errors",
    "storage": "infra.storage",
    "locks": "infra.locks",
    "manifest": "infra.manifest",
    "threads": "infra.threads",
    "layout": "infra.layout",
    "tables": "infra.tables",
    "engine.progress": "infra.progress",
    "config": "backbone.config",
    "model": "backbone.model",
    "tokens": "backbone.tokens",
    "kept": "checkpoints.kept",
    "kept_files": "checkpoints.kept_files",
    "export": "checkpoints.export",
    "hf_import": "checkpoints.hf_import",
    "objective": "pretraining.objective",
    "flops": "pretraining.flops",
    "components": "pretraining.components",
    "engine": "pretraining.engine",
    "metrics": "evaluation.metrics",
    "finetune": "evaluation.finetune",
    "evaluation.glue": "evaluation.glue.task",
    "data.glue": "evaluation.glue.data",
    "evaluation.glue_probe": "evaluation.probes.glue_probe",
    "evaluation.frozen_features": "evaluation.probes.frozen_features",
    "evaluation.linear_probe": "evaluation.probes.linear_probe",
    "evaluation.rtd_probe": "evaluation.probes.rtd_probe",
    "evaluation.corruption_sources": "evaluation.probes.corruption_sources",
    "evaluation.reference_detectors": "evaluation.probes.reference_detectors",
    "results": "analysis.results",
    "stats": "analysis.stats",
    "paper": "analysis.paper",
    "table_schemas": "analysis.table_schemas",
    "testing": "conformance",
    "spec": "study.spec",
    "merge": "study.merge",
    "packs": "study.packs",
    "survey": "study.survey",
    "kit": "study.kit",
    "doctor": "study.doctor",
}
PACKAGE = "electra_ablate"


def new_path(old: str) -> str | None:
    """The new dotted path of an old one, or None if ``old`` did not move."""
    if not old.startswith(PACKAGE + "."):
        return None
    rel = old[len(PACKAGE) + 1 :]
    keys = [k for k in MOVED if rel == k or rel.startswith(k + ".")]
    if not keys:
        return None
    key = max(keys, key=len)
    return f"{PACKAGE}.{MOVED[key]}{rel[len(key) :]}"


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old path to the module at its new path (the same module object, so that
    ``isinstance`` and monkeypatching see one module), warning once per old path.

    It sits before the regular finders, because a submodule of a moved package
    (``electra_ablate.components.masking``) would otherwise be found by the path finder through
    its parent's new folder and executed a second time as another module. A name that still
    has a file of its own at its old place (``electra_ablate.evaluation.glue``, now a package)
    is left to the regular finders, so nothing that exists is shadowed.
    """

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname)
        if new is None or _exists_at_old_path(fullname, path):
            return None
        if importlib.util.find_spec(new) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = new_path(spec.name)
        warnings.warn(
            f"{spec.name} moved to {new} in 0.3 and the old path goes in {REMOVED_IN}: import "
            f"from {new} (or, in a plugin, from electra_ablate.plugin)",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__  # the import machinery overwrites it next
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module was executed at its new path already; it keeps its own spec."""
        old = module.__spec__.name if module.__spec__ is not None else None
        if old in self._specs:
            module.__spec__ = self._specs.pop(old)


def _exists_at_old_path(fullname: str, path: object) -> bool:
    """Whether ``fullname`` is a real module where its old path points: its parent is the
    package of that name (not a moved one standing in for it) and holds a file of that name."""
    parent = fullname.rpartition(".")[0]
    module = sys.modules.get(parent)
    if module is None or module.__name__ != parent:
        return False
    return importlib.machinery.PathFinder.find_spec(fullname, path) is not None  # type: ignore[arg-type]


def install() -> None:
    """Put the finder first (see ``MovedModules`` for why that shadows nothing)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
