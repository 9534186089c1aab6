"""Which of a study's waiting jobs start next on its worker processes: the one rule that both the
live worker pool (``electra_ablate.scaleout.workers``) and the time model that replays a GPU
session (``electra_ablate.scaleout.replay``) follow, so that what the replay predicts is what
the pool does.

Two shapes:

- ``pool`` (CPU studies, several GPUs): first come, first started. Every pre-training run is
  queued first (most expensive first), then each evaluation as soon as its kept encoder exists;
  a free worker takes the oldest. Processes on their own cores or cards do not slow each other
  much, so nothing waits that could run.
- ``one_card`` (one CUDA card shared by every worker): the card is one device however many
  processes share it. Two pre-trainings replayed as CUDA graphs side by side each run at about
  half their rate, and an eager fine-tune beside a pre-training costs it about a fifth of its
  rate (``docs/performance.md#the-replay-the-sessions-time-model-fitted-to-the-stretches``),
  so running them together only moves the end of the pre-training later. So at most one
  pre-training trains at a time; evaluations wait until no
  pre-training is left (at most ``beside`` of them run beside one); and ready evaluations start
  longest first, across units, so that the longest (SST-2's fine-tune on the card) is not the
  last to start when a deadline comes. A pre-training's first step compiles on the host for
  tens of seconds, so the next may start meanwhile (``compile_ahead`` of them): it compiles
  while one trains, then waits at the device gate (``electra_ablate.infra.device_gate``) for
  the card. The live pool on one card does (``ONE_CARD_COMPILE_AHEAD``), with the gate.

This module needs nothing but the standard library: a GPU session's controller, which must
always be able to write its record, imports it without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal["pretrain", "evaluate"]
Shape = Literal["pool", "one_card"]
SHAPES: tuple[str, ...] = get_args(Shape)


@dataclass(frozen=True)
class Job:
    """One item of a study's work as the scheduler sees it.

    ``key`` names it (a run id, or a run id and an evaluation's job id); ``cost`` is its
    expected seconds alone on the device, or any measure proportional to them (only the order
    of costs matters to the pool); ``needs`` is the key of the pre-training run whose kept
    encoder it evaluates (None for a baseline's or a reference's evaluations, which need none).
    """

    key: str
    kind: Kind
    cost: float = 0.0
    needs: str | None = None


@dataclass(frozen=True)
class Schedule:
    """How a study's workers share what they run on (see the module's docstring)."""

    shape: Shape = "pool"
    beside: int = 0
    """``one_card``: evaluations that may run while a pre-training trains or waits."""
    compile_ahead: int = 0
    """``one_card``: pre-trainings that may hold a worker besides the one that trains (each
    compiles, then waits for the card at the device gate, which whoever runs them must set:
    without it they would train side by side)."""

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown schedule shape {self.shape!r}: one of {', '.join(SHAPES)}")
        if self.beside < 0:
            raise ValueError(f"schedule beside must be 0 or more, not {self.beside}")
        if self.compile_ahead < 0:
            raise ValueError(f"schedule compile_ahead must be 0 or more, not {self.compile_ahead}")

    def describe(self) -> str:
        """The rule in a few words, for the line ``ablate run --workers N`` starts with."""
        if self.shape == "pool":
            return "pool: pre-training runs first, most expensive first, then evaluations as ready"
        beside = f"{self.beside} beside it" if self.beside else "none beside it"
        if self.compile_ahead:
            ahead = "the next" if self.compile_ahead == 1 else f"the next {self.compile_ahead}"
            beside += f"; {ahead} compiling meanwhile"
        return f"one_card: one pre-training at a time ({beside}), then evaluations, longest first"

    def pick(self, waiting: Sequence[Job], running: Sequence[Job], free: int) -> list[Job]:
        """The jobs to start now, in the order to start them, on ``free`` idle workers.

        ``waiting`` holds the jobs that could start (an evaluation's run has finished), in the
        order they became ready; ``running`` the jobs that hold a worker now.
        """
        if free <= 0 or not waiting:
            return []
        if self.shape == "pool":
            return list(waiting[:free])
        chosen: list[Job] = []
        pretraining = [j for j in running if j.kind == "pretrain"]
        runs = [j for j in waiting if j.kind == "pretrain"]
        chosen.extend(runs[: max(0, 1 + self.compile_ahead - len(pretraining))])
        evaluations = sorted(
            (j for j in waiting if j.kind == "evaluate"), key=lambda j: -j.cost
        )  # stable: equal costs keep the order they became ready in
        if pretraining or runs:  # a pre-training trains or is still to come
            beside = self.beside - sum(j.kind == "evaluate" for j in running)
            evaluations = evaluations[: max(0, beside)]
        return (chosen + evaluations)[:free]


ONE_CARD_COMPILE_AHEAD = 1
"""The pre-trainings the worker pool on one card starts ahead, to compile while one trains
(``Schedule.compile_ahead``): one is enough to hide the next compile behind the current
training, and each more would hold a worker (and the card's memory) idle at the gate."""


def one_card_by_default(device: str, visible_gpus: int, workers: int) -> bool:
    """Whether a study's workers share one card unless the spec says otherwise: more than one
    worker (one worker shares nothing) on ``cuda`` with exactly one visible GPU, or on one GPU
    named by its index (``cuda:0``: every worker takes that one)."""
    if workers <= 1 or not device.startswith("cuda"):
        return False
    return device != "cuda" or visible_gpus == 1


def resolved_schedule(
    shape: str, beside: int, device: str, visible_gpus: int, workers: int
) -> Schedule:
    """The schedule a study's workers follow, from its spec's ``schedule`` block: ``auto`` is
    ``one_card`` where ``one_card_by_default`` says the workers share one card, else ``pool``;
    ``one_card`` and ``pool`` are taken as given (``one_card`` on a CPU rehearses the GPU's
    order). ``beside`` means nothing to the pool, which is given 0. One card compiles
    ``ONE_CARD_COMPILE_AHEAD`` pre-trainings ahead (the worker pool sets the device gate)."""
    if shape == "auto":
        shape = "one_card" if one_card_by_default(device, visible_gpus, workers) else "pool"
    if shape != "one_card":
        return Schedule(shape)  # type: ignore[arg-type]
    return Schedule("one_card", beside, ONE_CARD_COMPILE_AHEAD)
