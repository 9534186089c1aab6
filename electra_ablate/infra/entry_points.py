"""Entry points read once per process: objectives and task families are looked up many times
while one study is planned and run (each spec check, each task's record), and every look-up
used to scan the installed distributions again (about 7 ms each, half a second per
``ablate run``).

The scan is kept per ``sys.path``: a distribution made importable in this process by adding
its folder to the path (as a test or a notebook does) is found on the next look-up; one
``pip install``-ed into site-packages while the process runs is not, as with any other import.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib.metadata import EntryPoint, entry_points


@cache
def _scan(group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    return tuple(entry_points(group=group))


def registered(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group`` that the current ``sys.path`` installs."""
    return _scan(group, tuple(sys.path))
