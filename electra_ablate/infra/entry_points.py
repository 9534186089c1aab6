"""Entry points read once per process: objectives and task families are looked up many times
while one study is planned and run (each spec check, each task's record), and every look-up
used to scan the installed distributions again (about 7 ms each, half a second per
``ablate run``).

The scan is kept per ``sys.path``: a distribution made importable in this process by adding
its folder to the path (as a test or a notebook does) is found on the next look-up; one
``pip install``-ed into site-packages while the process runs is not, as with any other import.
``look_up`` is the one way a registered name is asked for (objectives, tasks, task families),
with the one line an unknown name gets.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import TypeVar

from electra_ablate.infra.errors import InputError, did_you_mean

T = TypeVar("T")


@cache
def _scan(group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    return tuple(entry_points(group=group))


def registered(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group`` that the current ``sys.path`` installs."""
    return _scan(group, tuple(sys.path))


def look_up(kind: str, name: str, found: Mapping[str, T]) -> T:
    """``found[name]``; an unknown name is an ``InputError`` naming the closest registered name
    and every registered one (``unknown task 'rtee' (did you mean 'rte'?); registered: ...``)."""
    if name not in found:
        raise InputError(
            f"unknown {kind} {name!r}{did_you_mean(name, found)}; registered: {', '.join(found)}"
        )
    return found[name]
