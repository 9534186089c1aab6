"""``electra_ablate.infra.progress``: a slow command says what it is doing (issue 43); a quick
one, or one that fails on bad input with its one line of error, prints nothing more; a long task
leaves ten plain lines in a log, not thousands.

No test waits a fixed time: the status line's timer is either stood in for (fired by the test,
when the test says the delay is over) or, for the real one, waited for with a bounded wait on
what it writes."""

from __future__ import annotations

import io
import threading
from contextlib import redirect_stderr

import pytest

from electra_ablate.infra import progress

WAIT_S = 30.0
"""The longest a test waits for the real timer's thread: a bound, not a delay."""


class Stderr(io.StringIO):
    """A stand-in for ``sys.stderr`` that can be waited on until a whole line is written."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            written = super().write(text)
            self.changed.notify_all()
        return written

    def lines_when(self, count: int) -> list[str]:
        """The lines written, once ``count`` whole ones are (failing after ``WAIT_S``)."""
        with self.changed:
            done = self.changed.wait_for(lambda: self.getvalue().count("\n") >= count, WAIT_S)
        assert done, f"waited {WAIT_S} s for {count} lines, got {self.getvalue()!r}"
        return self.getvalue().splitlines()


class ManualTimer:
    """``threading.Timer`` with the test as its clock: ``fire()`` is the delay running out."""

    made: list[ManualTimer] = []

    def __init__(self, interval: float, function) -> None:
        self.interval, self.function = interval, function
        self.started = self.cancelled = False
        self.daemon = False
        ManualTimer.made.append(self)

    def start(self) -> None:
        self.started = True

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        assert self.started and not self.cancelled, "a timer fires only while it runs"
        self.function()


@pytest.fixture
def stderr() -> Stderr:
    """What the test body writes to stderr (redirected in the body: pytest's own capture takes
    ``sys.stderr`` back between a test's setup and its call)."""
    return Stderr()


@pytest.fixture
def timer(monkeypatch) -> type[ManualTimer]:
    ManualTimer.made = []
    monkeypatch.setattr(threading, "Timer", ManualTimer)
    return ManualTimer


def test_a_plain_status_line_appears_after_the_delay_with_the_latest_text(stderr, timer):
    with redirect_stderr(stderr), progress.status_line("preparing the data", "plain") as say:
        (clock,) = timer.made
        assert clock.interval == progress.STATUS_DELAY_S and clock.started
        say("timing electra")
        assert stderr.getvalue() == ""  # the delay has not run out: nothing yet
        clock.fire()
        say("timing rte")
    assert stderr.getvalue().splitlines() == ["timing electra ...", "timing rte ..."]
    assert clock.cancelled


def test_a_quick_block_prints_nothing_and_stops_its_timer(stderr, timer):
    with redirect_stderr(stderr), progress.status_line("preparing the data", "plain") as say:
        say("timing electra")
    (clock,) = timer.made
    assert clock.cancelled and stderr.getvalue() == ""


def test_a_block_that_fails_stops_its_timer_and_leaves_only_its_error(stderr, timer):
    with (
        pytest.raises(ValueError, match="bad input"),
        redirect_stderr(stderr),
        progress.status_line("preparing the data", "plain"),
    ):
        raise ValueError("bad input")
    (clock,) = timer.made
    assert clock.cancelled and stderr.getvalue() == ""


def test_off_starts_no_timer_and_prints_nothing(stderr, timer):
    with redirect_stderr(stderr), progress.status_line("preparing the data", "off") as say:
        say("timing electra")
    assert timer.made == [] and stderr.getvalue() == ""


def test_the_real_timer_prints_the_first_text_then_each_new_one(stderr, monkeypatch):
    monkeypatch.setattr(progress, "STATUS_DELAY_S", 0.0)
    with redirect_stderr(stderr), progress.status_line("preparing the data", "plain") as say:
        assert stderr.lines_when(1) == ["preparing the data ..."]
        say("timing rte")
    assert stderr.getvalue().splitlines() == ["preparing the data ...", "timing rte ..."]


def test_a_plain_progress_line_is_printed_each_tenth_of_the_way(stderr):
    with (
        redirect_stderr(stderr),
        progress.ProgressLine("pre-training", total=200, mode="plain") as line,
    ):
        for done in range(1, 201):
            line.update(done, info=f"loss {1 / done:.2f}")
    lines = stderr.getvalue().splitlines()
    assert [text.split(" (")[0] for text in lines] == [
        f"pre-training: {done}/200" for done in range(20, 201, 20)
    ]
    assert lines[-1].startswith("pre-training: 200/200 (100%), ETA 0 s")
    assert lines[-1].endswith("loss 0.01")


def test_a_resumed_progress_line_counts_from_where_it_resumed(stderr):
    with (
        redirect_stderr(stderr),
        progress.ProgressLine("pre-training", total=100, start=55, mode="plain") as line,
    ):
        for done in range(56, 101):
            line.update(done)
    starts = [text.split(" (")[0] for text in stderr.getvalue().splitlines()]
    assert starts == [f"pre-training: {done}/100" for done in (60, 70, 80, 90, 100)]


@pytest.mark.parametrize(
    "seconds, shown",
    [(0.4, "0 s"), (59.6, "1 min 00 s"), (61, "1 min 01 s"), (3725, "1 h 02 min"), (-3, "0 s")],
)
def test_durations_read_as_a_person_says_them(seconds, shown):
    assert progress.format_duration(seconds) == shown
