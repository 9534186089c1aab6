"""Where logged metrics go: ``metrics.jsonl`` always (the study's tables are built from it),
TensorBoard when asked for (``pretrain.tensorboard``), so curves can be compared live; and
whether a ``metrics.jsonl`` on disk can be trusted."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from electra_ablate.infra.errors import InputError
from electra_ablate.infra.storage import atomic_write_text


def tensorboard_writer(directory: Path):  # -> torch.utils.tensorboard.SummaryWriter
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise InputError(
            "TensorBoard logging needs the tensorboard package: "
            "pip install 'electra-ablate[tensorboard]'"
        ) from None
    return SummaryWriter(str(directory))


def log_scalars(directory: Path, scalars: Mapping[str, float], step: int) -> None:
    """Scalars from outside training (a finished evaluation's metrics, tagged by the study) in a
    run's TensorBoard folder at a pre-training ``step``, so they sit beside its curves."""
    board = tensorboard_writer(directory)
    for tag, value in scalars.items():
        board.add_scalar(tag, value, step)
    board.close()


class MetricsLog:
    def __init__(self, path: Path, tensorboard_dir: Path | None = None) -> None:
        self.path = path
        self._board = tensorboard_writer(tensorboard_dir) if tensorboard_dir is not None else None

    def write(self, row: dict[str, Any]) -> None:
        """Append one row; non-finite numbers are written as null (JSON has no NaN)."""
        clean = {
            k: v if not isinstance(v, float) or math.isfinite(v) else None for k, v in row.items()
        }
        with self.path.open("a") as f:
            f.write(json.dumps(clean) + "\n")
        if self._board is not None:
            split = row.get("split", "train")
            for key, value in clean.items():
                if isinstance(value, (int, float)) and key not in ("step", "stage"):
                    self._board.add_scalar(f"{split}/{key}", value, row["step"])
            self._board.flush()

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
        if self._board is not None:
            self._board.close()


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
