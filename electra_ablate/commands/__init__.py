"""CLI command modules; each exposes ``register(app)`` and imports heavy libraries only inside
its commands, so that the CLI answers at once until a command really runs.

- ``run``: ``ablate run``, the main job; ``report`` and ``compare``: ``ablate report`` and
  ``ablate compare``;
- ``status``, ``clean``, ``pack`` and ``merge``: a study folder surveyed, its disk freed, its
  results packed and merged;
- ``finetune`` and ``export``: one kept model scored outside a study, or exported to Hugging
  Face;
- ``data``, ``flops``, ``objectives``, ``tasks``, ``spec`` (``ablate validate`` and ``schema``)
  and ``check``: what a study will use, checked before it runs;
- ``doctor`` and ``kit``: a machine described, and a kit for an offline GPU node.

They are imported eagerly here and registered in the order of ``COMMAND_MODULES``: each is a
thin adapter whose own imports are light.
"""

from __future__ import annotations

from types import ModuleType

from electra_ablate.commands import (
    check,
    clean,
    compare,
    data,
    doctor,
    export,
    finetune,
    flops,
    kit,
    merge,
    objectives,
    pack,
    report,
    run,
    spec,
    status,
    tasks,
)

COMMAND_MODULES: list[ModuleType] = [
    run,
    report,
    compare,
    status,
    clean,
    pack,
    merge,
    finetune,
    export,
    data,
    flops,
    objectives,
    tasks,
    spec,
    check,
    doctor,
    kit,
]
