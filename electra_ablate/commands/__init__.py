"""CLI command modules; each exposes ``register(app)``. A command is listed here once it works."""

from __future__ import annotations

from types import ModuleType

from electra_ablate.commands import data, export, finetune, flops, report, run

COMMAND_MODULES: list[ModuleType] = [run, report, finetune, export, data, flops]
