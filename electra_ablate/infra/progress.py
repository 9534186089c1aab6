"""Progress on stderr: a live rich line on a terminal, plain lines when stderr is a pipe (CI logs,
``nohup``), nothing at all when turned off (a worker process, whose parent reports for it); and
the one-line ``warning:`` every wing prints there (here, at the bottom, so that the trackers in
``infra.tracking`` warn as the study does)."""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

ProgressMode = Literal["live", "plain", "off"]


def progress_mode(enabled: bool | None = None) -> ProgressMode:
    """``live`` on a terminal, ``plain`` on a pipe; ``enabled=False`` turns it off."""
    if enabled is False:
        return "off"
    return "live" if sys.stderr.isatty() else "plain"


def warn(message: str) -> None:
    """One line on stderr, above any progress line."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


def append_to_log(log: Path, context: str, lines: Iterable[str]) -> None:
    """``lines`` appended to a unit's ``warnings.log`` (``log``), each stamped with the UTC time
    and ``context``: appends of a few lines, safe between workers. Raises ``OSError``; the
    caller decides what a log it cannot write is worth."""
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    text = "".join(f"{stamp} {context}: {line}\n" for line in lines)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(text)


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


class ProgressLine:
    """One task's progress: ``update(done, info)`` as it goes. Plain mode prints a line each
    tenth of the way, so a long run leaves ten lines in a log rather than thousands."""

    def __init__(self, title: str, total: int, start: int = 0, mode: ProgressMode = "plain"):
        self.title, self.total, self.start, self.mode = title, max(1, total), start, mode
        self._progress = None
        self._next_tenth = (start * 10) // self.total + 1
        self._started = time.perf_counter()

    def __enter__(self) -> ProgressLine:
        if self.mode == "live":
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn(self.title),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "", total=self.total, completed=self.start, info=""
            )
        return self

    def update(self, done: int, info: str = "") -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done, info=info)
        elif self.mode == "plain" and done * 10 >= self._next_tenth * self.total:
            self._next_tenth = (done * 10) // self.total + 1
            rate = (done - self.start) / max(time.perf_counter() - self._started, 1e-9)
            eta = (self.total - done) / rate if rate > 0 else 0.0
            print(
                f"{self.title}: {done}/{self.total} ({100 * done / self.total:.0f}%), "
                f"ETA {format_duration(eta)}  {info}".rstrip(),
                file=sys.stderr,
                flush=True,
            )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


STATUS_DELAY_S = 2.0
"""A plain status line waits this long: a command that finishes (or fails on bad input, with its
one line of error) sooner prints nothing more."""


@contextmanager
def status_line(first: str, mode: ProgressMode = "plain") -> Iterator[Callable[[str], None]]:
    """What a slow command is doing, for as long as the block runs: a live rich status line
    on a terminal (replaced by each ``say(text)``); on a pipe, plain lines on stderr, the first
    after ``STATUS_DELAY_S`` (the latest text by then), then one per ``say``; nothing when off.
    Yields ``say``."""
    if mode == "off":
        yield lambda _: None
        return
    if mode == "live":
        from rich.console import Console

        with Console(stderr=True).status(first) as live:
            yield lambda text: live.update(text)
        return
    import threading

    lock = threading.Lock()
    state = {"text": first, "started": False}

    def show(text: str) -> None:
        print(f"{text} ...", file=sys.stderr, flush=True)

    def start() -> None:
        with lock:
            state["started"] = True
            show(str(state["text"]))

    def say(text: str) -> None:
        with lock:
            state["text"] = text
            if state["started"]:
                show(text)

    timer = threading.Timer(STATUS_DELAY_S, start)
    timer.daemon = True
    timer.start()
    try:
        yield say
    finally:
        timer.cancel()
