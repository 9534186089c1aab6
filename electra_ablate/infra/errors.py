"""One error type for everything a user can get wrong.

The CLI turns an ``AblateError`` into a single line on stderr and a non-zero exit code, so bad
input (a malformed spec, a missing data file, a corrupt checkpoint) never shows a traceback:
``InputError`` and its kinds exit 2 (the user's input needs fixing), anything else 1 (a failure
while running).
"""

from __future__ import annotations


class AblateError(Exception):
    """A problem with the user's input or environment, reported as one line."""

    exit_code: int = 1

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(AblateError):
    """Bad input: an option, a file or folder, a checkpoint; exit code 2 like a usage error."""

    exit_code = 2


class SpecError(InputError):
    """The study spec (or a file it names) is invalid."""


class DataError(InputError):
    """A data file, folder, task or hub dataset is missing or malformed."""


class WriteFailed(AblateError):
    """The disk refused a write (full, over quota, read-only): exit 1, naming the path."""


class MixedData(InputError):
    """Results made with two different data would end up in one study folder."""


class TrainingDiverged(AblateError):
    """A loss became NaN/inf; the run stops and keeps its last good checkpoint (exit 1, a
    failure while running)."""


class Interrupted(BaseException):  # noqa: N818 - a signal, not an error
    """SIGINT or SIGTERM arrived, or the output's reader went away (SIGPIPE's case, which
    Python turns into ``BrokenPipeError``: ``cli.ClosedPipeGuard``): unwinds like
    KeyboardInterrupt (so ``finally`` blocks release locks and remove temporaries) but is not
    caught by ``except Exception``, nor turned into a silent exit code by the CLI framework.
    The CLI exits 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def did_you_mean(name: str, choices: object) -> str:
    """`` (did you mean 'x'?)`` when a choice is close to ``name``, else an empty string."""
    import difflib

    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
