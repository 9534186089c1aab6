"""The built-in objectives, for every test that checks all of them: read from the installed
entry points, never listed by hand, so a new built-in is tested the moment it is registered.

A built-in is an entry point of the objectives group (``[project.entry-points]`` in
``pyproject.toml``) whose class lives in this package's ``electra_ablate.objectives``; a plugin
installed beside it (``examples/random_rtd_plugin``) is not one. Installed metadata keeps no
order (setuptools writes the group sorted), so ``BUILT_IN`` is sorted by name: the order
``available_objectives()`` and ``ablate objectives`` list them in, and each parametrized test's
id is the objective's name (``test_contract[electra_15]``).
"""

from __future__ import annotations

from importlib.metadata import entry_points

from electra_ablate.pretraining.registry import ENTRY_POINT_GROUP as GROUP

MODULE_PREFIX = "electra_ablate.objectives."


def built_in_objectives() -> tuple[str, ...]:
    """The names of the installed built-in objectives, sorted."""
    found = {ep.name for ep in entry_points(group=GROUP) if ep.module.startswith(MODULE_PREFIX)}
    if not found:
        raise RuntimeError(
            f"no {GROUP!r} entry point names a module of {MODULE_PREFIX}*: "
            "is electra-ablate installed (pip install -e .)?"
        )
    return tuple(sorted(found))


BUILT_IN = built_in_objectives()
