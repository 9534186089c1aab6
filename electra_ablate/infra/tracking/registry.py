"""Which trackers a spec may name: those of the ``electra_ablate.trackers`` entry-point group,
through which the built-in ones (``tensorboard``, ``wandb``, ``mlflow``) are registered as a
third party's would be.

A name is checked when the spec is validated, never mid-run: an unknown one gets a "did you
mean", and one whose package is missing names the ``pip install`` that brings it. The check only
looks for the package (``importlib.util.find_spec``); it is imported when a unit is tracked.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import EntryPoint

from electra_ablate.infra.entry_points import registered
from electra_ablate.infra.errors import did_you_mean
from electra_ablate.infra.tracking.protocol import Tracker

GROUP = "electra_ablate.trackers"


def available_trackers() -> dict[str, EntryPoint]:
    """The registered trackers by name, in name order."""
    return {ep.name: ep for ep in sorted(registered(GROUP), key=lambda ep: ep.name)}


def tracker_class(name: str) -> type[Tracker]:
    """The class registered as ``name`` (``KeyError`` if none; its import's error if it fails)."""
    return available_trackers()[name].load()


def tracker_problem(name: str) -> str | None:
    """Why the spec cannot name tracker ``name`` on this machine, in one phrase, or None."""
    trackers = available_trackers()
    if name not in trackers:
        hint = did_you_mean(name, trackers) or f"; choose from {', '.join(trackers) or 'none'}"
        return f"unknown tracker {name!r}{hint}"
    entry = trackers[name]
    try:
        found = entry.load()
    except Exception as exc:  # noqa: BLE001 - a third party's import may fail in any way
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        dist = getattr(entry.dist, "name", None)
        fix = f"; reinstall {dist}, which registers it" if dist else ""
        return f"tracker {name!r} cannot be loaded ({reason}){fix}"
    package = getattr(found, "package", None)
    if package and not installed(package):
        extra = getattr(found, "extra", None)
        fix = f"pip install 'electra-ablate[{extra}]'" if extra else f"install {package}"
        return f"tracker {name!r} needs the {package} package, which is not installed: {fix}"
    return None


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (a module set to None in
    ``sys.modules``, as a test hides one, counts as missing)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import; a spec-less module
        return sys.modules.get(module) is not None


def open_tracker(name: str) -> Tracker:
    """A tracker instance, ready to ``open`` units."""
    return tracker_class(name)()
