"""Reading a study's JSON records back, setting damaged ones aside, and keeping library warnings
out of the terminal.

Records (``run.json``, ``done.json``, ``failed.json``, ``finetune/<job>.json``) are written
atomically, so a damaged one comes from outside: a disk that filled, a careless copy, an edit. It
is named in one line and, under ``ablate run`` (which holds the study's lock), moved aside to
``<name>.corrupt-<UTC time>`` so that its unit is redone; a reader that only reads (``--collect``,
``ablate status``) names it and leaves it where it is.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from electra_ablate.infra.progress import append_to_log
from electra_ablate.infra.progress import warn as warn  # the study's warnings are infra's line

# What each kind of record must hold to be used; anything less is damage.
RUN_SUMMARY_KEYS = ("status",)
FINETUNE_KEYS = ("status", "job_id", "task", "seed", "fraction")
DONE_FINETUNE_KEYS = ("metrics", "step", "flops_paper", "flops_standard")


def record_problem(path: Path, required: tuple[str, ...]) -> tuple[dict | None, str | None]:
    """``(record, None)`` for a record that reads, ``(None, why)`` for a damaged one, and
    ``(None, None)`` when there is none."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"it cannot be read: {exc.strerror}"
    try:
        record = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, "it is not valid JSON"
    if not isinstance(record, dict):
        return None, "it is not a JSON object"
    missing = [k for k in required if k not in record]
    if record.get("status") == "done" and required == FINETUNE_KEYS:
        missing += [k for k in DONE_FINETUNE_KEYS if k not in record]
    if missing:
        return None, f"it lacks {', '.join(missing)}"
    return record, None


def read_record(
    path: Path, required: tuple[str, ...] = RUN_SUMMARY_KEYS, set_aside: bool = True
) -> dict[str, Any] | None:
    """The record at ``path``, or None if there is none or it is damaged. A damaged one is named
    in one line and, with ``set_aside``, moved aside so its work is redone."""
    record, problem = record_problem(path, required)
    if problem is not None:
        if set_aside:
            quarantine(path, problem)
        else:
            warn(f"{path} is damaged ({problem}); left in place: `ablate run` sets it aside")
    return record


def quarantine(path: Path, problem: str, redo: str = "its work is redone") -> Path:
    """Move a damaged file aside to ``<name>.corrupt-<UTC time>`` and say so in one line."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, target)
    warn(f"{path} is damaged ({problem}); moved aside to {target.name}, and {redo}")
    return target


@contextmanager
def warnings_to(log: Path, context: str) -> Iterator[None]:
    """Library warnings raised inside the block (scipy's constant-input correlation, sklearn's
    ill-defined metrics, torch's UserWarnings) go to ``log``, each distinct one once with its
    count, instead of the terminal where they would bury the study's own lines."""
    counts: dict[str, int] = {}

    def count(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        key = f"{category.__name__}: {message} ({Path(filename).name}:{lineno})"
        counts[key] = counts.get(key, 0) + 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = count
        try:
            yield
        finally:
            if counts:
                lines = [key + (f" [x{n}]" if n > 1 else "") for key, n in counts.items()]
                try:
                    append_to_log(log, context, lines)
                except OSError as exc:  # the unit's own outcome matters more than its log
                    warn(f"cannot write {log}: {exc.strerror}")
