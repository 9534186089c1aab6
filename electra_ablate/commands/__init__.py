"""CLI command modules; each exposes ``register(app)``. A command is listed here once it works."""

from __future__ import annotations

from types import ModuleType

COMMAND_MODULES: list[ModuleType] = []
