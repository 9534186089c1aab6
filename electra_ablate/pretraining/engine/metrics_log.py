"""Where logged metrics go: ``metrics.jsonl`` always (the study's tables are built from it), the
trackers of the spec's ``tracking`` when the study hands the run some (``infra.tracking``), so
curves can be compared live; and whether a ``metrics.jsonl`` on disk can be trusted.

A tracker gets each row as ``<split>/<metric>`` at the row's step and FLOPs (every number but
the step and the stage; the FLOPs in the paper's convention, ``TRACKED_FLOPS``), and each kept
checkpoint as a ``kept`` event, through the fail-safe ``Tracking``:
nothing a tracker does reaches the run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.infra.tracking import Tracking
from electra_ablate.infra.tracking.protocol import numeric

NOT_TRACKED = ("step", "stage")
"""Columns of a row that are no curve: its x-axis and its stage number."""

TRACKED_FLOPS = "flops_paper"
"""The column of a row (and of a kept checkpoint's or an evaluation's record) that trackers get
as the FLOPs axis (``FLOPS_KEY``): the paper's convention, the one the study's budget and its
tables compare at."""


def tracked_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """What a tracker plots of a logged row (non-finite numbers were written as null: left out)."""
    return {k: v for k, v in numeric(row).items() if k not in NOT_TRACKED}


def kept_event_item(fraction: float) -> str:
    """The name a kept checkpoint is sent to the trackers under, once (``Tracking.event``)."""
    return f"kept:{fraction:g}"


def logged_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a ``metrics.jsonl``, in order; a line that is not a row (a torn last line)
    is passed over."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            yield row


class MetricsLog:
    def __init__(self, path: Path, tracking: Tracking | None = None) -> None:
        self.path = path
        self.tracking = tracking

    def write(self, row: dict[str, Any]) -> None:
        """Append one row; non-finite numbers are written as null (JSON has no NaN)."""
        clean = {
            k: v if not isinstance(v, float) or math.isfinite(v) else None for k, v in row.items()
        }
        with self.path.open("a") as f:
            f.write(json.dumps(clean) + "\n")
        if self.tracking is not None:
            split = row.get("split", "train")
            self.tracking.curve(
                split, row["step"], tracked_metrics(clean), clean.get(TRACKED_FLOPS)
            )

    def kept(self, fraction: float, step: int, meta: Mapping[str, Any]) -> None:
        """A kept checkpoint, as an event for the trackers (its fraction, step and FLOPs)."""
        if self.tracking is not None:
            data = {"fraction": fraction, **numeric(meta)}
            flops = data.get(TRACKED_FLOPS)
            self.tracking.event(kept_event_item(fraction), "kept", step, data, flops)

    def truncate(self, step: int) -> None:
        """Drop rows logged after ``step`` (by a run killed before its next state was saved)."""
        if not self.path.exists():
            return
        keep = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line)["step"] <= step:
                    keep.append(line)
            except (json.JSONDecodeError, KeyError):
                break  # a torn last line
        atomic_write_text(self.path, "".join(line + "\n" for line in keep))

    def reset(self) -> None:
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        """Nothing to release: the trackers are the study's to close (it opened them)."""


def metrics_problem(path: Path, finished: bool, last_step: int | None = None) -> str | None:
    """Why the log at ``path`` cannot be trusted, or None.

    A log is damaged when a line is not a JSON metrics row, or when steps repeat or go back
    within a split (what two processes writing one run leave behind). A finished run's log must
    also exist, be non-empty and (given ``last_step``) reach its last step; an unfinished run's
    last line may be torn by a kill, which resuming repairs.
    """
    if not path.exists():
        return "it is missing" if finished else None
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if not lines:
        return "it is empty" if finished else None
    last: dict[str, int] = {}
    train_end = None
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
            step, split = row["step"], row["split"]
            if not isinstance(step, int) or not isinstance(split, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            if number == len(lines) and not finished:
                break  # a torn last line: resuming truncates it
            return f"line {number} is not a metrics row"
        if step <= last.get(split, -1):
            return f"steps repeat or go back at line {number} (two writers?)"
        last[split] = step
        train_end = step if split == "train" else train_end
    if finished and last_step is not None and train_end != last_step:
        return f"it ends at step {train_end}, not at the run's last step {last_step}"
    return None
