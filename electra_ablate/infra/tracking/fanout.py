"""One unit's trackers behind one fail-safe face: what the engine and the study call.

``Tracking`` sends each curve row, evaluation and event, with the pre-training FLOPs it was
measured at (``FLOPS_KEY``: the axis objectives compare at), to every tracker the spec names that
has not had it yet (the unit's ``Ledger``), opening a tracker's run only when it first has
something to send: a unit whose trackers are up to date costs no connection at all (a W&B run
takes about a second to open).

Nothing a tracker does can fail or stop a study. Every call goes through ``_guarded``: an
exception (no network, a full disk, a server's error, a folder it cannot write: a
``TrackerProblem``) prints one ``warning:`` line naming the tracker, which also goes to the
unit's ``warnings.log``, and turns that tracker off for the rest of the process; what it did
not take is not marked sent in the ledger, so a later ``ablate run`` catches it up from the
study's own files, which are written as before and remain the source of truth.

That boundary also holds what a library may raise to end the process its own way: a
``SystemExit`` is that tracker's failure, named (``SystemExit(1)``), never the study's end.
Only the user's stop goes through: ``Interrupted`` (``ablate`` turns SIGINT and SIGTERM into
it) and a ``KeyboardInterrupt`` where Ctrl-C raises one (SIGINT's handler is Python's own: a
notebook, a script). Where it is not (under ``ablate``; in a worker, which ignores SIGINT), a
``KeyboardInterrupt`` cannot be a Ctrl-C, so it is the library's, and a failure like any other.
"""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.progress import append_to_log, warn
from electra_ablate.infra.tracking.ledger import Ledger
from electra_ablate.infra.tracking.protocol import (
    FLOPS_KEY,
    TrackedUnit,
    TrackerProblem,
    TrackerRun,
)
from electra_ablate.infra.tracking.registry import open_tracker

T = TypeVar("T")

_OFF: dict[str, str] = {}
"""Trackers that failed in this process, with why: each is tried again only by a later one."""


def turned_off() -> dict[str, str]:
    """The trackers this process has turned off, by name, with the error that did it."""
    return dict(_OFF)


def turn_on_again() -> None:
    """Forget the failures (a test's, or a notebook's after fixing the network)."""
    _OFF.clear()


class Tracking:
    """The trackers ``names`` for one unit; a context manager that closes what it opened."""

    def __init__(self, names: Sequence[str], unit: TrackedUnit, ledger: Ledger) -> None:
        self.names = list(dict.fromkeys(names))
        self.unit, self.ledger = unit, ledger
        self._runs: dict[str, TrackerRun] = {}
        self._deferred = False  # inside ``catching_up``: the ledger is saved once, at its end
        self._unsaved = False

    def __enter__(self) -> Tracking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def active(self) -> list[str]:
        """The trackers still on in this process."""
        return [name for name in self.names if name not in _OFF]

    # ------------------------------------------------------------------ what is sent
    def curve(
        self, curve: str, step: int, metrics: Mapping[str, float], flops: float | None = None
    ) -> None:
        """A row of curve ``curve`` (a ``metrics.jsonl`` split), each metric as
        ``<curve>/<name>``, with the step's pre-training ``flops`` as ``FLOPS_KEY``, to each
        tracker whose last row of it is older."""
        named = with_flops({f"{curve}/{key}": value for key, value in metrics.items()}, flops)
        self._send(
            [name for name in self.active if self.ledger.sent_step(name, curve) < step],
            lambda run: run.log(named, step),
            lambda name: self.ledger.note_step(name, curve, step),
        )

    def record(
        self, item: str, step: int, metrics: Mapping[str, float], flops: float | None = None
    ) -> None:
        """Metrics sent once per tracker under ``item`` (an evaluation: its job id), at the
        step and pre-training ``flops`` of what they measured (its checkpoint's)."""
        named = with_flops(metrics, flops)
        self._send(
            [name for name in self.active if not self.ledger.has(name, item)],
            lambda run: run.log(named, step),
            lambda name: self.ledger.note_item(name, item),
        )

    def event(
        self, item: str, name: str, step: int, data: Mapping[str, Any], flops: float | None = None
    ) -> None:
        """Event ``name`` at ``step`` (and ``flops``), sent once per tracker under ``item``."""
        named = with_flops(data, flops)
        self._send(
            [tracker for tracker in self.active if not self.ledger.has(tracker, item)],
            lambda run: run.event(name, step, named),
            lambda tracker: self.ledger.note_item(tracker, item),
        )

    @contextlib.contextmanager
    def catching_up(self) -> Iterator[Tracking]:
        """A block that sends much at once (a unit's records read back): the ledger is written
        once at its end instead of after every send."""
        self._deferred = True
        try:
            yield self
        finally:
            self._deferred = False
            if self._unsaved:
                self._save()

    def close(self) -> None:
        for name, run in list(self._runs.items()):
            self._guarded(name, "closing its run", run.close)
        self._runs.clear()

    # -------------------------------------------------------------------- machinery
    def _send(
        self,
        targets: list[str],
        call: Callable[[TrackerRun], None],
        note: Callable[[str], None],
    ) -> None:
        for name in targets:  # each tracker's send recorded as soon as it is made: a kill
            run = self._open(name)  # while the next opens must not make this one's a repeat
            if run is None:
                continue
            try:
                sent = self._guarded(name, "logging", lambda r=run: call(r))
            except BaseException:  # the user's Ctrl-C inside the library: what it was given
                note(name)  # goes out when the run is closed, so it counts as sent (at worst
                with contextlib.suppress(Exception):  # a point is missing, never doubled)
                    self.ledger.save()
                raise
            if sent:
                note(name)
                self._unsaved = True
                if not self._deferred:
                    self._save()

    def _save(self) -> None:
        self._unsaved = False
        try:
            self.ledger.save()
        except Exception as exc:  # noqa: BLE001 - the ledger must not stop a study either
            for name in self.active:
                self._fail(name, f"recording what it was sent in {self.ledger.path.name}", exc)

    def _open(self, name: str) -> TrackerRun | None:
        if name not in self._runs and name not in _OFF:
            run = self._guarded(name, "opening its run", lambda: open_tracker(name).open(self.unit))
            if run is not None:
                self._runs[name] = run
        return self._runs.get(name)

    def _guarded(self, name: str, doing: str, call: Callable[[], T]) -> T | None:
        """``call()``, or None after turning tracker ``name`` off if it raised. A call that
        returns nothing returns True here, so that success reads as truth."""
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - a tracker's library may raise anything
            self._fail(name, doing, exc)
            return None
        except SystemExit as exc:  # a library ending the process: its failure, not the study's
            self._fail(name, doing, exc)
            return None
        except KeyboardInterrupt as exc:
            if ctrl_c_raises_keyboard_interrupt():  # it may be the user's stop: it goes through
                raise
            self._fail(name, doing, exc)  # SIGINT raises something else here: the library's
            return None
        return True if result is None else result  # type: ignore[return-value]

    def _fail(self, name: str, doing: str, exc: BaseException) -> None:
        reason = described(exc)
        _OFF[name] = reason
        run = self._runs.pop(name, None)
        if run is not None and doing != "closing its run":
            with contextlib.suppress(Exception):  # it already failed once: said once
                run.close()
        line = (
            f"tracker {name} failed {doing} for {self.unit.label} ({reason}); it is off for the "
            "rest of this process (the study's own files are complete; what it missed is not "
            "marked sent, and a later `ablate run` catches it up)"
        )
        warn(line)
        with contextlib.suppress(OSError):  # the line is on stderr; the unit's log is a copy
            append_to_log(RunLayout(self.unit.folder).warnings_log, "tracking", [line])


def with_flops(metrics: Mapping[str, Any], flops: float | None) -> dict[str, Any]:
    """``metrics`` with the pre-training FLOPs they were measured at as ``FLOPS_KEY`` (the
    x-axis at which objectives compare), when known and finite."""
    known = isinstance(flops, (int, float)) and not isinstance(flops, bool)
    if not known or not math.isfinite(flops):  # type: ignore[arg-type]
        return dict(metrics)
    return {**metrics, FLOPS_KEY: float(flops)}  # type: ignore[arg-type]


def ctrl_c_raises_keyboard_interrupt() -> bool:
    """Whether SIGINT's handler is Python's own, so that a ``KeyboardInterrupt`` may be the
    user's Ctrl-C (``ablate`` has it raise ``Interrupted``; a worker ignores it)."""
    return signal.getsignal(signal.SIGINT) is signal.default_int_handler


def described(exc: BaseException) -> str:
    """Why a tracker failed, in one phrase: a ``TrackerProblem`` as it says, an error as
    ``Type: its first line``, and what would have ended the process as raised
    (``SystemExit(1)``), saying so."""
    first = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, TrackerProblem):  # the project's own words, paths whole
        return first or type(exc).__name__
    first = first[:200]  # a library's may be anything
    if isinstance(exc, Exception):
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    args = ", ".join(repr(arg)[:200] for arg in exc.args)
    raised = f"{type(exc).__name__}({args})" if args else type(exc).__name__
    return f"it raised {raised}, which would have ended the study"
