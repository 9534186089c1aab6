"""The wings of ``electra_ablate`` in layer order, lowest first: the one statement of it.

A module imports its own wing and the wings below it, never a wing above, and no import circles
back; ``tests/test_layout.py`` reads every import of the package and holds it to this order.
Subpackages are a wing's own (``evaluation.glue`` is ``evaluation``); ``api``, ``plugin`` and
``cli`` are the modules ``api.py``, ``plugin.py`` and ``cli.py`` (with ``__main__.py``);
``objectives`` is the repository's ``objectives/`` folder, installed as
``electra_ablate.objectives``.
"""

from __future__ import annotations

LAYERS: tuple[str, ...] = (
    "infra",
    "backbone",
    "data",
    "checkpoints",
    "pretraining",
    "evaluation",
    "conformance",
    "analysis",
    "spec",
    "study",
    "scaleout",
    "report",
    "api",
    "plugin",
    "objectives",
    "commands",
    "cli",
)

LAZY_IMPORTS_ALLOWED: tuple[str, ...] = ("commands", "cli")
"""Wings whose modules may import project modules inside functions: the CLI imports a command's
wing only when that command runs, so ``ablate --help`` answers at once. Everywhere else project
imports sit at the top of the file (heavy third-party libraries may still be imported late)."""
