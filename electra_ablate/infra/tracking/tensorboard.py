"""TensorBoard: each unit's event files in its own folder (``<unit>/tensorboard``), so that
``tensorboard --logdir runs/<name>`` shows every unit of a study side by side, named by its
folder. There is no server: resuming a unit adds an event file beside the earlier ones, and
TensorBoard reads them as one run.

Each metric is written twice: as itself with the pre-training step as its step, and under
``by_flops/`` with the pre-training FLOPs (the paper's convention, rounded to an integer: a
TensorBoard step is one) as its step, so that two objectives, whose steps cost differently, line
up at equal compute. ``pretrain_flops`` itself is a scalar against the step."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.tracking.protocol import TrackedUnit, by_flops, event_metrics


class TensorBoard:
    name: ClassVar[str] = "tensorboard"
    package: ClassVar[str | None] = "tensorboard"
    extra: ClassVar[str | None] = "tensorboard"

    def open(self, unit: TrackedUnit) -> TensorBoardRun:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(RunLayout(unit.folder).tensorboard))
        config = json.dumps(dict(unit.config), indent=1, sort_keys=True, default=str)
        writer.add_text("config", f"```\n{config}\n```", 0)
        return TensorBoardRun(writer)


class TensorBoardRun:
    def __init__(self, writer: Any) -> None:  # torch.utils.tensorboard.SummaryWriter
        self.writer = writer

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        series = by_flops(metrics)  # first: FLOPs past its steps write nothing, not half a row
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, step)
        if series is not None:
            named, flops = series
            for tag, value in named.items():
                self.writer.add_scalar(tag, value, flops)
        self.writer.flush()

    def event(self, name: str, step: int, data: Mapping[str, Any]) -> None:
        self.log(event_metrics(name, data), step)

    def close(self) -> None:
        self.writer.close()
