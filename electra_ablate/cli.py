"""The ``ablate`` command line. Each command lives in ``electra_ablate/commands``; this module
wires them up and holds the one error policy:

- a usage or input error (bad option, bad spec, missing file, not a checkpoint, unknown task or
  objective) prints one line naming the problem and exits 2;
- a failure while running prints one line and exits 1 (a file that cannot be read or written
  is named);
- SIGINT (Ctrl-C) and SIGTERM print one line saying that the same command resumes and exit 130
  and 143, so ``ablate run … && ablate report …`` stops there; so does an output whose reader
  has gone (``ablate run … | head -3``), as SIGPIPE would, with 141;
- no traceback unless ``--debug`` (or ``ABLATE_DEBUG=1``) asks for one.

Heavy libraries (torch, datasets, scipy) are imported inside the commands that use them,
so ``ablate --help``, a typo or a missing option answers at once.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO

import typer

from electra_ablate import __version__
from electra_ablate.infra.errors import AblateError, Interrupted

CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="ablate",
    help="Controlled ablations of text-encoder pre-training objectives at equal FLOPs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    context_settings=CONTEXT,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"ablate (electra-ablate) {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="print the version"
    ),
    debug: bool = typer.Option(
        False, "--debug", help="show tracebacks (also: ABLATE_DEBUG=1)", envvar="ABLATE_DEBUG"
    ),
) -> None:
    """Controlled ablations of text-encoder pre-training objectives at equal FLOPs."""
    if debug:
        os.environ["ABLATE_DEBUG"] = "1"


def _register_commands() -> None:
    from electra_ablate.commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        module.register(app)


_register_commands()


def _usage_error_types() -> tuple[type[BaseException], ...]:
    """Click's usage-error base class, wherever this typer keeps it: typer 0.29 vendors click
    (``typer._click``), older typers use the ``click`` package; ``typer.BadParameter`` derives
    from it either way."""
    return tuple(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def _debugging() -> bool:
    return os.environ.get("ABLATE_DEBUG", "").lower() not in ("", "0", "false", "no")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``Interrupted`` in the main thread for the command's duration,
    so that a terminated study unwinds (workers stopped, locks released) and says so."""

    def raise_interrupted(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    handled = (signal.SIGINT, signal.SIGTERM)
    try:
        previous = {s: signal.signal(s, raise_interrupted) for s in handled}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class ClosedPipeGuard:
    """``sys.stdout`` or ``sys.stderr`` while a command runs. Python ignores SIGPIPE, so a write
    to a pipe whose reader has gone (``ablate run … | head -3``) raises ``BrokenPipeError``,
    which the CLI framework (and rich's console) would turn into a silent exit 1. Here it stops
    the command as SIGPIPE would and as Ctrl-C does: the stream is pointed at /dev/null (nothing
    more can be read from it, and the interpreter's last flush must not complain) and
    ``Interrupted(SIGPIPE)`` unwinds, releasing locks and stopping workers, finished work kept.
    Everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed()

    def writelines(self, lines: Iterable[str]) -> None:
        try:
            self._stream.writelines(lines)
        except BrokenPipeError:
            self._closed()

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _closed(self) -> NoReturn:
        to_devnull(self._stream)
        raise Interrupted(signal.SIGPIPE) from None


def to_devnull(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null (a stream with none is left alone)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: a captured stream
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


@contextmanager
def closed_pipes_unwind() -> Iterator[None]:
    """stdout and stderr guarded (``ClosedPipeGuard``) for the command's duration; stdout on a
    pipe is line-buffered, so that ``ablate run … | tee log`` (or ``| head``) gets each line as
    it is printed rather than blocks of them, hours later."""
    try:
        if not sys.stdout.isatty():
            sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, OSError, ValueError):  # not a TextIOWrapper (replaced, closed)
        pass
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ClosedPipeGuard(sys.stdout), ClosedPipeGuard(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def interrupted_line(signum: int) -> str:
    name = signal.Signals(signum).name
    why = " (its output was closed, as `| head` does)" if signum == signal.SIGPIPE else ""
    return f"stopped by {name}{why}: finished work is kept, and the same command resumes"


def say_stopped(signum: int) -> None:
    """``interrupted_line`` on stderr, unless stderr is the closed pipe too (``2>&1 | head``)."""
    try:
        print(interrupted_line(signum), file=sys.stderr, flush=True)
    except BrokenPipeError:
        to_devnull(sys.stderr)


def run_cli(args: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; every error becomes one line on stderr."""
    args = sys.argv[1:] if args is None else list(args)
    if not args:
        print(
            "error: no command given; run `ablate --help` for the list of commands",
            file=sys.stderr,
        )
        return 2
    try:
        with signals_unwind(), closed_pipes_unwind():
            # standalone_mode=False: typer returns an exit code (typer.Exit, or 130 for a
            # KeyboardInterrupt it caught) instead of calling sys.exit; it must not be dropped
            code = app(args=args, standalone_mode=False, prog_name="ablate")
    except Interrupted as exc:
        say_stopped(exc.signum)
        return 128 + exc.signum
    except AblateError as exc:
        if _debugging():
            raise
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(interrupted_line(signal.SIGINT), file=sys.stderr)
        return 130
    except _usage_error_types() as exc:
        message = exc.format_message()
        if type(exc).__name__ == "NoArgsIsHelpError" or message == "Missing command.":
            group = " ".join(a for a in args if not a.startswith("-"))  # e.g. `ablate data`
            message = f"`ablate {group}` needs a command; see `ablate {group} --help`"
        print(f"error: {_one_line(message)}", file=sys.stderr)
        return getattr(exc, "exit_code", 2) or 2
    except OSError as exc:
        if _debugging():
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or _one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if _debugging():
            raise
        print(
            f"error: {type(exc).__name__}: {_one_line(exc)} "
            "(a bug or an environment problem; rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
    if code == 130:  # typer turned a KeyboardInterrupt into this code
        print(interrupted_line(signal.SIGINT), file=sys.stderr)
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run_cli())
