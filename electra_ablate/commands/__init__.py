"""CLI command modules; each exposes ``register(app)`` and imports heavy libraries only inside
its commands, so that the CLI answers at once until a command really runs."""

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
