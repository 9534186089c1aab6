"""The time model of a GPU session, measured rather than assumed: a replay of one study command
on one card, its parameters fitted to the committed stretches of GPU time
(``reports/gpu_sessions/``).

A GPU session gets one command of a few minutes and loses whatever has not finished at its
deadline; every committed study command lost its slowest evaluations that way. The session's
old model (two processes share the card at full speed, 45 s of start-up) was assumed and never
checked, and its dry run predicted fine-tunes 30x too long. This module instead replays the
command event by event:

- **Jobs.** Pre-training runs (steps at a solo steps/s per objective and compile mode, after a
  first, compiling step whose seconds depend on the objective, the mode and whether the compile
  cache is warm), fine-tunes (training examples seen at a solo examples/s per task, after a
  fixed start) and probes (solo seconds). Every evaluation also pays ``eval_start_s`` outside
  its record (loading the kept encoder and the task), every process ``start_s`` once (the
  command's imports and plan, its workers' start and CUDA context).
- **Sharing the card.** Each process in its card phase keeps a share of the card busy when it
  runs alone (its *load*: about 1 for a pre-training replayed as CUDA graphs, whose kernels keep
  the card 81% busy, less for host-bound eager fine-tunes). While the loads of the processes on
  the card sum to more than 1, every one of them runs slower by that sum; below 1 nobody slows.
  Compiling and starting use the host, not the card.
- **Order.** ``workers`` processes take jobs as ``electra_ablate.study.schedule.Schedule.pick``
  says, the very rule the live worker pool follows, so the replay predicts what the pool does.
  On one card the next pre-training compiles while one trains, then waits for the card until
  that one ends (``Schedule.compile_ahead`` and the device gate, as the pool runs them).
- **Deadline.** A job that has not ended when the command's time is up is cut, running or not
  started.

``fit`` reads the committed sessions (``session.json``, ``session.log`` and the packs, which
are untrusted: read member by member from the archive, only the JSON records needed, sizes
bounded, nothing extracted or unpickled) and fits the parameters to what they recorded: each
run's logged progress (a row per 100 steps with its token rate, hence its rate over time, hence
the contention), each evaluation's recorded seconds, the time of the one command that finished,
and the side of its command's deadline each job ended on (a lost job ran at least until then).
No record says when a job started: the replay of each command, as it ran, places them.
``FITTED`` holds the result, committed; a test fits again and compares. ``plan`` replays a
command of a future stretch (a rung, fine-tuning seeds, workers, the shape, a warm or cold
compile cache) and ``choose`` picks the largest rung, then the most seeds, that end inside a
deadline with ``MARGIN``. A warm CUDA-graph compile has never been measured: the replay takes
the warm first step the committed stretches measured in torch.compile's default mode.

Standard library only (and ``electra_ablate.study.schedule`` and
``electra_ablate.infra.archives``, likewise): the GPU session's
controller imports this on the node, where it must always be able to write its record.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from electra_ablate.infra.archives import ArchiveRefused, Limits, members
from electra_ablate.study.schedule import Job, Schedule, Shape, resolved_schedule

Kind = Literal["pretrain", "finetune", "probe"]
UnitKind = Literal["run", "baseline", "reference"]

# ----------------------------------------------------------------------------- the model

# produced by `python bench/replay.py --sessions reports/gpu_sessions --fit` (2026-11-27-e last)
FITTED: dict[str, float] = {
    "compile_s/bert_mlm/compiled/warm": 2.51893,
    "compile_s/bert_mlm/cuda_graphs/cold": 31.4611,
    "compile_s/electra/compiled/warm": 4.09901,
    "compile_s/electra/cuda_graphs/cold": 55.9803,
    "eval_start_s": 3.65586,
    "finetune_load": 0.179236,
    "finetune_per_s/cola": 1137.83,
    "finetune_per_s/mrpc": 734.79,
    "finetune_per_s/rte": 1057.36,
    "finetune_per_s/sst2": 1411.27,
    "finetune_per_s/stsb": 1121.84,
    "finetune_start_s": 1.64218,
    "pretrain_load/compiled": 0.524895,
    "pretrain_load/cuda_graphs": 1.01822,
    "pretrain_per_s/bert_mlm/compiled": 54.4088,
    "pretrain_per_s/bert_mlm/cuda_graphs": 108.64,
    "pretrain_per_s/electra/compiled": 28.9668,
    "pretrain_per_s/electra/cuda_graphs": 79.1115,
    "probe_load": 6.14421e-06,
    "probe_s": 2.04072,
    "start_s": 9.27692,
}
"""The model's parameters as fitted to ``reports/gpu_sessions`` (``fit``); a test fits them again
from the committed files and compares. Names: see ``Model``."""

# produced by the same command, from the newest committed study
STUDY: dict[str, Any] = {
    "units": [
        ["bert_small", "run", "bert_mlm", 977018908672.0, 1065729982464.0],
        ["electra_small", "run", "electra", 1292457865216.0, 1149953703936.0],
        ["no pre-training", "baseline", None, None, None],
        ["bigram", "reference", None, None, None],
        ["token_identity", "reference", None, None, None],
    ],
    "blocks": {
        "finetune": {
            "tasks": ["cola", "sst2", "mrpc", "stsb", "rte"],
            "seeds": [0],
            "fractions": [1.0],
            "baseline": True,
            "epochs": 3,
            "task_epochs": {"rte": 10, "stsb": 10},
        },
        "evaluation": {
            "tasks": ["rtd_unigram"],
            "seeds": [0],
            "fractions": [0.25, 0.5, 1.0],
            "baseline": True,
            "epochs": 3,
            "task_epochs": {"rte": 10, "stsb": 10},
        },
    },
    "sizes": {"mrpc": 3668, "stsb": 5749, "sst2": 67349, "rte": 2490, "cola": 8551},
    "probes": ["rtd_unigram"],
    "references": {"bigram": ["rtd_unigram"], "token_identity": ["rtd_unigram"]},
}
"""The committed GPU study's facts (``StudyFacts``), so the node plans without the packs; a test
reads them again from the committed files."""

MARGIN = 1.1
"""A plan is chosen only if its last job ends by the deadline divided by this. Fitted to the
recorded seconds alone, the model replayed the committed commands' lost jobs up to 8% of their
deadline too early (2026-11-27-e's BERT SST-2 ending at 223 s; it had not ended at 242 s);
the committed fit, which also holds each job on its side of its command's deadline, replays
the one command that finished 10% late (241 s for 220 s). A job's own error is larger (the
fit's ``spread``, about x1.2) but a command's end is the sum of many."""


class ReplayInputError(ValueError):
    """A committed session or pack that cannot be read as one (named in the message)."""


@dataclass(frozen=True)
class Model:
    """The replay's parameters, by name:

    - ``start_s``: from the study command's start to its workers' first job (the command's
      imports and plan, the workers' start, their CUDA contexts);
    - ``eval_start_s``: an evaluation's seconds outside its record (loading the kept encoder,
      the task's data), on the host;
    - ``finetune_start_s``: a fine-tune's seconds inside its record that are not its examples
      (the model onto the card, the dev set's predictions), on the host;
    - ``finetune_per_s/<task>``: a fine-tune's training examples per second alone on the card;
    - ``finetune_load``, ``probe_load``, ``pretrain_load/<mode>``: the share of the card each
      keeps busy alone (the sharing law: see the module's docstring);
    - ``probe_s``: a probe's seconds alone on the card;
    - ``pretrain_per_s/<objective>/<mode>``: pre-training steps per second alone on the card;
    - ``compile_s/<objective>/<mode>/<cache>``: the first, compiling step (cache ``cold`` or
      ``warm``), on the host.
    """

    values: Mapping[str, float]

    def __getitem__(self, name: str) -> float:
        try:
            return self.values[name]
        except KeyError:
            raise ReplayInputError(f"the time model has no measured {name}") from None

    def compile_s(self, objective: str, mode: str, cache: str) -> float:
        """A run's first step; a warm cache never measured in a mode is taken from the warm
        cache measured in another mode (what is left is tracing and loading the kernels)."""
        name = f"compile_s/{objective}/{mode}/{cache}"
        if name in self.values or cache != "warm":
            return self[name]
        warm = [v for k, v in self.values.items() if k.startswith(f"compile_s/{objective}/")
                and k.endswith("/warm")]  # fmt: skip
        if not warm:
            return self[name]
        return max(warm)

    def work(self, item: Item, mode: str, cache: str) -> tuple[float, float, float]:
        """``item``'s seconds on the host before its card work, its card seconds alone, and its
        load."""
        if item.kind == "pretrain":
            return (
                self.compile_s(str(item.objective), mode, cache),
                item.steps / self[f"pretrain_per_s/{item.objective}/{mode}"],
                self[f"pretrain_load/{mode}"],
            )
        if item.kind == "finetune":
            return (
                self["eval_start_s"] + self["finetune_start_s"],
                item.examples / self[f"finetune_per_s/{item.task}"],
                self["finetune_load"],
            )
        return self["eval_start_s"], self["probe_s"], self["probe_load"]

    def record_offset(self, item: Item) -> float:
        """Seconds of a job before its record's clock starts (``eval_start_s``)."""
        return 0.0 if item.kind == "pretrain" else self["eval_start_s"]


# ----------------------------------------------------------------------------- the jobs


@dataclass(frozen=True)
class Item:
    """One job of a study command: a pre-training run or one evaluation of one unit."""

    kind: Kind
    unit: UnitKind
    label: str
    objective: str | None = None
    steps: int = 0
    task: str | None = None
    seed: int | None = None
    fraction: float | None = None
    examples: int = 0
    """A fine-tune's training examples seen: the training set times the epochs."""
    flops: float = 0.0
    """A pre-training's standard-convention FLOPs."""

    @property
    def order(self) -> float:
        """What the schedule orders it by, as the worker pool measures it
        (``electra_ablate.scaleout.workers``): a run's FLOPs (most first), an evaluation's
        training examples seen (``Task.relative_cost``, whose evaluation-set term and probes'
        fraction of a fine-tune the replay leaves out: they order nothing here)."""
        return self.flops if self.kind == "pretrain" else float(self.examples)

    @property
    def key(self) -> str:
        if self.kind == "pretrain":
            return f"pretrain {self.label}"
        return f"{self.label} {self.task} at {self.fraction:g} seed {self.seed}"

    @property
    def needs(self) -> str | None:
        """The pre-training whose kept encoder it evaluates (a run's evaluations only)."""
        if self.kind == "pretrain" or self.unit != "run":
            return None
        return f"pretrain {self.label}"


@dataclass(frozen=True)
class Command:
    """One study command as the replay runs it."""

    items: tuple[Item, ...]
    workers: int
    mode: str = "cuda_graphs"
    cache: str = "cold"
    shape: Shape = "pool"
    beside: int = 0
    deadline_s: float | None = None
    compile_ahead: int = 0
    """Pre-trainings started ahead to compile while one trains (``Schedule.compile_ahead``);
    with any, the pre-trainings train through the device gate, one at a time, as the worker
    pool makes them."""


@dataclass(frozen=True)
class Slot:
    """One job's place in a replay: when it starts, when its card work starts (after its
    start-up or compile), when it ends, whether the deadline cuts it."""

    item: Item
    start_s: float
    card_s: float
    end_s: float
    cut: bool


@dataclass(frozen=True)
class Replay:
    slots: tuple[Slot, ...]
    deadline_s: float | None
    progress: Mapping[str, tuple[tuple[float, float], ...]] = field(repr=False)
    """Each pre-training's (time, share of its steps done) at every change of rate."""

    @property
    def cut(self) -> list[Slot]:
        return [s for s in self.slots if s.cut]

    @property
    def end_s(self) -> float:
        return max((s.end_s for s in self.slots), default=0.0)

    def slot(self, key: str) -> Slot:
        (found,) = [s for s in self.slots if s.item.key == key]
        return found


def simulate(model: Model, command: Command) -> Replay:
    """Replay ``command``: its workers take jobs as ``Schedule.pick`` says, each job's card work
    slows while the loads on the card sum above 1 (the module's docstring). With
    ``compile_ahead``, a pre-training that has compiled waits for the card until the one on it
    ends, first come first served (the device gate: ``electra_ablate.infra.device_gate``)."""
    schedule = Schedule(command.shape, command.beside, command.compile_ahead)
    gated = command.compile_ahead > 0
    work = {i.key: model.work(i, command.mode, command.cache) for i in command.items}
    jobs = {
        i.key: Job(i.key, "pretrain" if i.kind == "pretrain" else "evaluate", i.order, i.needs)
        for i in command.items
    }
    items = {i.key: i for i in command.items}
    keys = set(items)
    later: dict[str, list[str]] = {}
    waiting: list[str] = sorted(
        (k for k in items if items[k].kind == "pretrain"), key=lambda k: -jobs[k].cost
    )
    for item in command.items:
        if item.kind == "pretrain":
            continue
        if item.needs is not None and item.needs in keys:
            later.setdefault(item.needs, []).append(item.key)
        else:
            waiting.append(item.key)
    t = model["start_s"]
    free = max(1, command.workers)
    running: dict[str, list[float]] = {}  # key -> [host seconds left, card seconds left]
    started: dict[str, float] = {}
    on_card: dict[str, float] = {}
    ended: dict[str, float] = {}
    progress: dict[str, list[tuple[float, float]]] = {
        k: [] for k in items if items[k].kind == "pretrain"
    }
    gate: list[str] = []  # gated: the pre-training on the card, then those waiting, in turn

    def reach_card(key: str) -> None:
        """``key``'s host work is done: its card work starts now, or it waits at the gate."""
        if gated and items[key].kind == "pretrain":
            gate.append(key)
            if len(gate) > 1:
                return
        on_card[key] = t

    def on(key: str) -> bool:
        """Whether ``key`` works on the card now (started up, not waiting at the gate)."""
        return running[key][0] <= 0.0 and not (gated and key in gate[1:])

    while True:
        chosen = schedule.pick([jobs[k] for k in waiting], [jobs[k] for k in running], free)
        for job in chosen:
            waiting.remove(job.key)
            host, card, _ = work[job.key]
            running[job.key] = [host, card]
            started[job.key] = t
            if host <= 0.0:
                reach_card(job.key)
            free -= 1
        if not running:
            if waiting:
                raise RuntimeError(f"the schedule starts none of {len(waiting)} waiting jobs")
            break
        slow = max(1.0, sum(work[k][2] for k in running if on(k)))
        step = min(
            left[0] if left[0] > 0.0 else left[1] * slow
            for k, left in running.items()
            if left[0] > 0.0 or on(k)
        )
        for key, left in progress.items():
            if key in running and on(key):
                total = work[key][1]
                left.append((t, 1.0 - running[key][1] / total if total else 1.0))
        t += step
        done = []
        for key, left in running.items():
            if left[0] > 0.0:
                left[0] -= step
                if left[0] <= 1e-9:
                    left[0] = 0.0
                    reach_card(key)
            elif on(key):
                left[1] -= step / slow
            if on(key) and left[1] <= 1e-9:
                done.append(key)
        for key in done:
            del running[key]
            ended[key] = t
            on_card.setdefault(key, t)
            free += 1
            if key in progress:
                progress[key].append((t, 1.0))
            waiting.extend(later.pop(key, []))
            if key in gate:  # the card is free: the next at the gate takes it
                gate.remove(key)
                if gate:
                    on_card[gate[0]] = t
    deadline = command.deadline_s
    slots = tuple(
        Slot(items[k], started[k], on_card[k], ended[k],
             deadline is not None and ended[k] > deadline + 1e-9)
        for k in sorted(items, key=lambda k: (started[k], ended[k]))
    )  # fmt: skip
    return Replay(slots, deadline, {k: tuple(v) for k, v in progress.items()})


# ----------------------------------------------------------------------------- reading sessions

MAX_PACK_BYTES = 64 << 20
"""A pack larger than this (compressed) is refused: the committed ones are under 100 kB."""
MAX_MEMBER_BYTES = 4 << 20
"""The most bytes one member may unpack to: a record is under 1 kB, a run's metrics.jsonl
61 kB at 1e16 (about 6 kB per 1,000 steps), a committed pack's largest table under 100 kB."""
MAX_MEMBERS = 20_000
MAX_UNPACKED_BYTES = 256 << 20
"""What the members of a pack may declare in all (each member is inflated to be skipped): a
committed pack holds under 200 kB; this bounds what a hostile one makes the reader inflate."""
MAX_TEXT_BYTES = 4 << 20
"""session.json and session.log are read only up to this."""

WANTED = re.compile(
    r"^[A-Za-z0-9_.+-]+/(plan\.json|study\.json|pretrain/[A-Za-z0-9_.+-]+/(done\.json|"
    r"metrics\.jsonl)|finetune/[A-Za-z0-9_.-]+\.json)$"
)
"""The members of a pack the replay reads (under the pack's one top folder)."""

STUDY_LINE = re.compile(r"\] study: .*\(at most (\d+(?:\.\d+)?) s\)")
RESULTS_LINE = re.compile(r"^results in .* \((\d+(?:\.\d+)?) s\)")
WORK_FOLDER = re.compile(r"--out (\S+)/study-")


def read_pack(path: Path) -> dict[str, bytes]:
    """The members of a result pack that ``WANTED`` names, by their path under the pack's top
    folder, read from the archive without extracting anything (a pack is untrusted: read by
    ``electra_ablate.infra.archives`` within ``MAX_*``; a link or a name leading out of the pack
    is refused, the members the replay does not need are skipped)."""
    limits = Limits(MAX_MEMBERS, MAX_MEMBER_BYTES, MAX_UNPACKED_BYTES, MAX_PACK_BYTES)
    try:
        return {
            member.name.split("/", 1)[1]: member.read()
            for member in members(path, limits, compression="gz")
            if WANTED.match(member.name)
        }
    except ArchiveRefused as e:
        raise ReplayInputError(f"{path}: not a readable pack ({e})") from None


def read_json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ReplayInputError(f"{where}: not JSON ({e})") from None


def read_text(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_TEXT_BYTES).decode("utf-8", errors="replace")
    except OSError as e:
        raise ReplayInputError(f"{path}: {e.strerror or e}") from None


def compile_mode(pretrain: Mapping[str, Any], done: Mapping[str, Any]) -> str:
    """How a run's steps ran: ``cuda_graphs`` (``pretrain.compile: reduce-overhead``),
    ``compiled`` (torch.compile's default mode) or ``eager``."""
    if done.get("compile_mode") == "reduce-overhead" or (
        pretrain.get("compile") == "reduce-overhead" and done.get("compiled")
    ):
        return "cuda_graphs"
    return "compiled" if done.get("compiled") else "eager"


@dataclass(frozen=True)
class Observed:
    """One committed study command: what it had to do and what its records say."""

    name: str
    started: str
    rung: float
    """The study's budget: paper-convention FLOPs per objective."""
    command: Command
    study: StudyFacts
    planned: tuple[Item, ...]
    units: tuple[tuple[str, UnitKind, int], ...]
    """plan.json's units: label, kind, the number of evaluation jobs it plans."""
    carried: frozenset[str]
    """Evaluations whose records an earlier stretch made (read back, not run)."""
    recorded: Mapping[str, float]
    """Each evaluation this command ran: its record's seconds."""
    runs: Mapping[str, tuple[float, tuple[tuple[int, float], ...]]]
    """Each run's pre-training: its wall seconds and (step, seconds since its start) per
    logged row."""
    makespan_s: float | None
    """The command's own seconds where it finished (``results in ... (N s)``), else None."""

    @property
    def lost(self) -> frozenset[str]:
        """Planned evaluations with no record in the command's last pack."""
        return frozenset(
            i.key for i in self.planned if i.kind != "pretrain" and i.key not in self.recorded
            and i.key not in self.carried
        )  # fmt: skip


@dataclass(frozen=True)
class StudyFacts:
    """What a study's jobs are, as the replay needs them: its units in the order the pool
    queues them (label, kind, objective, FLOPs per pre-training step in the paper's convention,
    which sets the steps of a budget, and in the standard one, which orders the runs), its
    evaluation blocks (``finetune`` and ``evaluation``: tasks, seeds, kept fractions, baseline,
    epochs), each fine-tuned task's training set, the probed tasks and each reference's tasks.
    ``STUDY`` keeps the committed GPU study's, so the node plans without the committed packs."""

    units: tuple[tuple[str, UnitKind, str | None, float | None, float | None], ...]
    blocks: Mapping[str, Mapping[str, Any]]
    sizes: Mapping[str, int]
    probes: tuple[str, ...]
    references: Mapping[str, tuple[str, ...]]

    def steps_at(self, rung: float) -> dict[str, int]:
        """Each run's steps at ``rung`` FLOPs per objective, rounded as the budget planner
        rounds them (``electra_ablate.pretraining.engine.plan``)."""
        return {label: max(1, round(rung / flops)) for label, kind, _, flops, _ in self.units
                if kind == "run" and flops}  # fmt: skip

    def with_seeds(self, seeds: Sequence[int]) -> StudyFacts:
        """The same study fine-tuned with ``seeds`` (``finetune.seeds``)."""
        blocks = dict(self.blocks)
        if "finetune" in blocks:
            blocks["finetune"] = {**blocks["finetune"], "seeds": [int(s) for s in seeds]}
        return replace(self, blocks=blocks)

    def with_runs(self, labels: Sequence[str]) -> StudyFacts:
        """The same study with only the pre-training runs ``labels`` (``--set objectives=...``:
        a rung too long for one command, one objective per stretch); the baseline and the
        references stay, as the spec keeps them."""
        known = {label for label, kind, *_ in self.units if kind == "run"}
        if unknown := sorted(set(labels) - known):
            raise ReplayInputError(
                f"no run {', '.join(unknown)} in the study (its runs: {', '.join(sorted(known))})"
            )
        units = tuple(u for u in self.units if u[1] != "run" or u[0] in labels)
        return replace(self, units=units)

    def items(self, steps: Mapping[str, int]) -> list[Item]:
        """Every job, in the order its units and their evaluations are queued: each run's
        pre-training, then per unit its evaluation blocks (per fraction, task and seed), as
        ``Study.jobs`` lists them."""
        items: list[Item] = []
        for label, kind, objective, _, standard in self.units:
            if kind == "run":
                if objective is None or label not in steps:
                    raise ReplayInputError(f"run {label}: no objective or no steps")
                flops = steps[label] * (standard or 0.0)
                items.append(Item("pretrain", "run", label, objective, steps[label], flops=flops))
            for block in self.blocks.values():
                if kind == "reference":
                    tasks = [t for t in block["tasks"] if t in self.references.get(label, ())]
                    fractions, seeds = [0.0], block["seeds"][:1]
                else:
                    tasks, seeds = block["tasks"], block["seeds"]
                    fractions = block["fractions"] if kind == "run" else [0.0] * block["baseline"]
                for fraction in fractions:
                    for task in tasks:
                        for seed in seeds:
                            items.append(self.evaluation(kind, label, task, seed, fraction, block))
        return items

    def evaluation(
        self,
        unit: UnitKind,
        label: str,
        task: str,
        seed: int,
        fraction: float,
        block: Mapping[str, Any],
    ) -> Item:
        if task in self.probes:
            return Item("probe", unit, label, task=task, seed=seed, fraction=fraction)
        if task not in self.sizes:
            raise ReplayInputError(f"task {task}: no committed record says how large it is")
        epochs = block["task_epochs"].get(task, block["epochs"])
        return Item("finetune", unit, label, task=task, seed=seed, fraction=fraction,
                    examples=self.sizes[task] * epochs)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"units": [list(u) for u in self.units], "blocks": dict(self.blocks),
                "sizes": dict(self.sizes), "probes": list(self.probes),
                "references": {k: list(v) for k, v in self.references.items()}}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StudyFacts:
        return cls(
            tuple((str(u[0]), u[1], u[2], u[3], u[4]) for u in data["units"]),
            {str(k): dict(v) for k, v in data["blocks"].items()},
            {str(k): int(v) for k, v in data["sizes"].items()},
            tuple(str(p) for p in data["probes"]),
            {str(k): tuple(v) for k, v in data["references"].items()},
        )


def unit_kinds(plan: Mapping[str, Any]) -> list[tuple[str, UnitKind, str, int]]:
    """plan.json's units: label, kind, run id, planned jobs."""
    kinds = {"run": "run", "baseline": "baseline", "reference": "reference"}
    try:
        return [(str(u["label"]), kinds[u["kind"]], str(u["run_id"]), int(u["jobs"]))
                for u in plan["units"]]  # fmt: skip
    except (KeyError, TypeError, ValueError) as e:
        raise ReplayInputError(f"plan.json: not a study plan ({e})") from None


def block_facts(study: Mapping[str, Any]) -> dict[str, Any]:
    """The evaluation blocks, objectives and pre-training settings of a resolved spec
    (study.json's ``spec``)."""
    try:
        spec = study["spec"]
        checkpoints = [float(f) for f in spec["budget"]["checkpoints"]]
        blocks = {}
        for name in ("finetune", "evaluation"):
            block = spec.get(name)
            if not block:
                continue
            recipe = block.get("recipe") or {}
            blocks[name] = {
                "tasks": [str(t) for t in block["tasks"]],
                "seeds": [int(s) for s in block["seeds"]],
                "fractions": sorted(float(f) for f in (block.get("checkpoints") or checkpoints)),
                "baseline": bool(block.get("baseline")),
                "epochs": int(recipe.get("epochs", 3)),
                "task_epochs": {str(k): int(v) for k, v in
                                (recipe.get("task_epochs") or {}).items()},
            }  # fmt: skip
        objectives = {str(o["label"]): str(o["name"]) for o in spec["objectives"]}
        return {"blocks": blocks, "objectives": objectives, "pretrain": spec.get("pretrain", {})}
    except (KeyError, TypeError, ValueError) as e:
        raise ReplayInputError(f"study.json: not a resolved study ({e})") from None


def windows(metrics: bytes, tokens_per_step: int, where: str) -> tuple[tuple[int, float], ...]:
    """(step, seconds since the run's start) at each logged training row: a row's token rate
    over the tokens of its steps (batch x sequence length: ``Trainer.log_train`` counts every
    position) gives the row's seconds."""
    previous, t, times = 0, 0.0, []
    for line in metrics.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        row = read_json(line.encode(), where)
        if not isinstance(row, dict) or row.get("split") != "train":
            continue
        try:
            step, rate = int(row["step"]), float(row["tokens_per_s"])
        except (KeyError, TypeError, ValueError):
            continue
        if rate <= 0 or step <= previous:
            continue
        t += (step - previous) * tokens_per_step / rate
        previous = step
        times.append((step, t))
    return tuple(times)


@dataclass(frozen=True)
class PackFacts:
    """What the replay reads of one pack."""

    study: Mapping[str, Any]
    plan: Mapping[str, Any]
    done: Mapping[str, Mapping[str, Any]]
    """Per run folder name (``<label>-s<seed>-<run id>``): its done.json."""
    metrics: Mapping[str, bytes]
    records: Mapping[str, Mapping[str, Any]]
    """Per job id: its evaluation record."""
    raw: Mapping[str, bytes]
    """Per job id: the record's bytes (a record byte for byte like an earlier one was carried)."""


def pack_facts(path: Path) -> PackFacts:
    members = read_pack(path)
    where = str(path)
    if "plan.json" not in members or "study.json" not in members:
        raise ReplayInputError(f"{where}: no plan.json or study.json")
    done, metrics, records, raw = {}, {}, {}, {}
    for name, data in members.items():
        parts = name.split("/")
        if parts[0] == "pretrain" and parts[2] == "done.json":
            done[parts[1]] = read_json(data, f"{where}: {name}")
        elif parts[0] == "pretrain":
            metrics[parts[1]] = data
        elif parts[0] == "finetune":
            record = read_json(data, f"{where}: {name}")
            if isinstance(record, dict) and record.get("status") == "done":
                records[parts[1][: -len(".json")]] = record
                raw[parts[1][: -len(".json")]] = data
    return PackFacts(
        read_json(members["study.json"], f"{where}: study.json"),
        read_json(members["plan.json"], f"{where}: plan.json"),
        done, metrics, records, raw,
    )  # fmt: skip


def session_facts(folder: Path) -> tuple[dict[str, Any], str, PackFacts | None]:
    """A committed session folder's session.json, session.log and pack (None: it ran no
    study)."""
    record = read_json(read_text(folder / "session.json").encode(), f"{folder}/session.json")
    if not isinstance(record, dict):
        raise ReplayInputError(f"{folder}/session.json: not a session record")
    log = read_text(folder / "session.log") if (folder / "session.log").exists() else ""
    packs = sorted(folder.glob("*.pack.tar.gz"))
    if len(packs) > 1:
        raise ReplayInputError(f"{folder}: {len(packs)} packs, one expected")
    return record, log, pack_facts(packs[0]) if packs else None


def read_sessions(root: Path) -> list[Observed]:
    """Every study command of the committed sessions under ``root``, oldest first. A record
    that does not read as the toolkit writes it is one ``ReplayInputError``."""
    if not root.is_dir():
        raise ReplayInputError(f"{root}: no such folder")
    sessions = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        record, log, pack = session_facts(folder)
        sessions.append((str(record.get("started", "")), folder.name, record, log, pack))
    sessions.sort(key=lambda s: (s[0], s[1]))
    try:
        return observe_all(sessions)
    except ReplayInputError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
        raise ReplayInputError(f"{root}: a record the replay cannot read ({e!r})") from None


def observe_all(
    sessions: list[tuple[str, str, dict[str, Any], str, PackFacts | None]],
) -> list[Observed]:
    """The sessions' study commands, oldest first: a record carried byte for byte from an
    earlier one was read back, not run; a command on a machine whose work folder (named in its
    log) already compiled the same objectives in the same mode, or after its own dry run,
    compiled with a warm cache."""
    tasks = task_facts([s[4] for s in sessions if s[4] is not None])
    observed: list[Observed] = []
    seen: dict[str, bytes] = {}
    compiled_in: dict[str, str] = {}
    for started, name, record, log, pack in sessions:
        if pack is None:
            continue
        work = WORK_FOLDER.search(log)
        folder = work.group(1) if work else name
        item = observe(name, started, record, log, pack, tasks, seen, compiled_in.get(folder))
        observed.append(item)
        compiled_in[folder] = item.command.mode
        for job_id, data in pack.raw.items():
            seen.setdefault(job_id, data)
    return observed


def task_facts(packs: Sequence[PackFacts]) -> dict[str, Any]:
    """Across every committed pack: each fine-tuned task's training set size, the probed tasks
    (their records say no epochs), each reference's tasks."""
    sizes: dict[str, int] = {}
    probes: set[str] = set()
    references: dict[str, set[str]] = {}
    for pack in packs:
        for record in pack.records.values():
            task, metrics = str(record.get("task")), record.get("metrics") or {}
            if "reference" in record:
                references.setdefault(str(record["reference"]), set()).add(task)
            if "epochs" in metrics:
                sizes[task] = int(metrics["train_examples"])
            else:
                probes.add(task)
    return {"sizes": sizes, "probes": frozenset(probes - set(sizes)),
            "references": {k: sorted(v) for k, v in references.items()}}  # fmt: skip


def observe(
    name: str,
    started: str,
    record: Mapping[str, Any],
    log: str,
    pack: PackFacts,
    tasks: Mapping[str, Any],
    seen: Mapping[str, bytes],
    earlier_mode: str | None,
) -> Observed:
    """One committed study command, as planned and as recorded."""
    facts = block_facts(pack.study)
    units = unit_kinds(pack.plan)
    labels = {run_id: label for label, _, run_id, _ in units}
    try:
        tokens = int(pack.study["pretrain"]["batch_size"]) * int(
            pack.study["backbone"]["max_seq_len"]
        )
        rung = float(pack.study["budget"]["flops"])
    except (KeyError, TypeError, ValueError) as e:
        raise ReplayInputError(f"{name}: study.json lacks the batch shape ({e})") from None
    steps, runs, modes, flops, standard = {}, {}, set(), {}, {}
    for folder, done in pack.done.items():
        label = folder.rsplit("-s", 1)[0]
        if label not in facts["objectives"] or done.get("status") != "done":
            continue
        try:
            steps[label] = int(done["steps"])
            flops[label] = float(done["flops_paper"]) / steps[label]
            standard[label] = float(done["flops_standard"]) / steps[label]
            wall = float(done["wall_s"])
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            raise ReplayInputError(f"{name}: {folder}/done.json unreadable ({e})") from None
        modes.add(compile_mode(facts["pretrain"], done))
        runs[f"pretrain {label}"] = (wall, windows(pack.metrics.get(folder, b""), tokens,
                                                   f"{name}: {folder}"))  # fmt: skip
    if len(modes) != 1:
        raise ReplayInputError(f"{name}: runs in {len(modes)} compile modes, one expected")
    (mode,) = modes
    study = StudyFacts(
        tuple((label, kind, facts["objectives"].get(label) if kind == "run" else None,
               flops.get(label) if kind == "run" else None,
               standard.get(label) if kind == "run" else None)
              for label, kind, _, _ in units),
        facts["blocks"], tasks["sizes"], tuple(sorted(tasks["probes"])),
        {k: tuple(v) for k, v in tasks["references"].items()},
    )  # fmt: skip
    planned = study.items(steps)
    for label, _, _, jobs in units:
        counted = sum(1 for i in planned if i.label == label and i.kind != "pretrain")
        if counted != jobs:
            raise ReplayInputError(
                f"{name}: {label} plans {jobs} evaluations, the replay rebuilt {counted}"
            )
    carried, recorded = set(), {}
    for job_id, rec in pack.records.items():
        label = labels.get(str(rec.get("run_id")))
        if label is None:
            continue
        seed = rec.get("seed")
        key = Item("probe", "run", label, task=str(rec.get("task")),
                   seed=None if seed is None else int(seed),
                   fraction=float(rec.get("fraction", 0.0))).key  # fmt: skip
        if seen.get(job_id) == pack.raw[job_id]:
            carried.add(key)
        else:
            recorded[key] = float((rec.get("metrics") or {}).get("wall_seconds", 0.0))
    limit = STUDY_LINE.search(log)
    results = [m for line in log.splitlines() if (m := RESULTS_LINE.match(line.strip()))]
    phase = (record.get("phases") or {}).get("study") or {}
    finished = phase.get("status") == "finished"
    phases = record.get("phases") or {}
    warm = earlier_mode == mode or (phases.get("plan") or {}).get("status") == "finished"
    command = Command(
        tuple(i for i in planned if i.key not in carried),
        int(record.get("workers", 1)),
        mode,
        "warm" if warm else "cold",
        "pool",
        0,
        float(limit.group(1)) if limit else None,
    )
    return Observed(
        name, started, rung, command, study, tuple(planned),
        tuple((label, kind, jobs) for label, kind, _, jobs in units),
        frozenset(carried), recorded, runs,
        float(results[-1].group(1)) if finished and results else None,
    )  # fmt: skip


# ----------------------------------------------------------------------------- the fit

WEIGHTS = {"run": 8.0, "finetune": 1.0, "probe": 0.25, "makespan": 8.0, "deadline": 4.0}
"""How much each kind of observation counts in the fit (squared log errors): a run's whole
logged progress counts as much as eight evaluations (it sets the contention every evaluation
beside it sees), a probe a quarter (its 1-5 s are mostly noise), the one finished command's
time as much as a run; ``deadline``: each job's end on the right side of its command's
deadline (a lost job ran at least until then, a recorded one ended before)."""

DEADLINE_CLEARANCE_S = 2.0
"""The fit holds each job this many seconds clear of its command's deadline, on the side it
ended (a penalty that fades at the deadline would leave lost jobs replayed just inside it)."""

DEADLINE_SCALE_S = 5.0
"""A job replayed on the wrong side of its command's deadline counts as an error of one per
this many seconds."""

ROWS_PER_RUN = 24
"""A run's logged rows are thinned to at most this many (evenly) for the fit."""


def compile_estimates(observed: Sequence[Observed]) -> dict[str, float]:
    """Each run's first, compiling step: its first logged row's seconds less its other steps at
    the rate of the row after it; the mean per objective, mode and cache state."""
    found: dict[str, list[float]] = {}
    for command in observed:
        for key, (_, rows) in command.runs.items():
            if len(rows) < 2:
                continue
            (first, t1), (second, t2) = rows[0], rows[1]
            rate = (second - first) / (t2 - t1)
            item = next(i for i in command.planned if i.key == key)
            name = f"compile_s/{item.objective}/{command.command.mode}/{command.command.cache}"
            found.setdefault(name, []).append(max(0.0, t1 - (first - 1) / rate))
    return {name: sum(v) / len(v) for name, v in sorted(found.items())}


def starting_point(observed: Sequence[Observed]) -> dict[str, float]:
    """Where the fit starts, from the records alone: each pre-training's fastest logged rate
    as its solo rate, each task's median recorded rate, fixed guesses for the rest."""
    values: dict[str, float] = {"start_s": 10.0, "eval_start_s": 3.0, "finetune_start_s": 1.0,
                                "finetune_load": 0.3, "probe_load": 0.3}  # fmt: skip
    rates: dict[str, list[float]] = {}
    probes: list[float] = []
    for command in observed:
        mode = command.command.mode
        values[f"pretrain_load/{mode}"] = 1.0
        for key, (_, rows) in command.runs.items():
            item = next(i for i in command.planned if i.key == key)
            name = f"pretrain_per_s/{item.objective}/{mode}"
            fastest = max(
                (b[0] - a[0]) / (b[1] - a[1]) for a, b in zip(rows, rows[1:], strict=False)
            )
            values[name] = max(values.get(name, 0.0), fastest)
        for item in command.planned:
            if item.key in command.recorded:
                seconds = command.recorded[item.key]
                if item.kind == "probe":
                    probes.append(seconds)
                else:
                    rates.setdefault(str(item.task), []).append(item.examples / seconds)
    for task, seen in rates.items():
        values[f"finetune_per_s/{task}"] = 1.5 * statistics.median(seen)
    values["probe_s"] = statistics.median(probes) if probes else 2.0
    return values


def step_time(progress: Sequence[tuple[float, float]], share: float) -> float:
    """When a run's progress curve reaches ``share`` of its steps."""
    previous = None
    for t, done in progress:
        if done >= share - 1e-12:
            if previous is None or done <= previous[1]:
                return t
            return previous[0] + (t - previous[0]) * (share - previous[1]) / (done - previous[1])
        previous = (t, done)
    return progress[-1][0] if progress else 0.0


def residuals(model: Model, observed: Sequence[Observed], deadline_weight: float) -> list[float]:
    """The fit's errors, each a weighted log ratio of replayed to recorded seconds."""
    out: list[float] = []
    for command in observed:
        replay = simulate(model, command.command)
        for key, (_, rows) in command.runs.items():
            slot = replay.slot(key)
            every = max(1, math.ceil(len(rows) / ROWS_PER_RUN))
            kept = rows[::every]
            weight = math.sqrt(WEIGHTS["run"] / len(kept))
            for step, seconds in kept:
                t = step_time(replay.progress[key], step / slot.item.steps) - slot.start_s
                out.append(weight * math.log(max(t, 1e-3) / seconds))
        deadline = command.command.deadline_s
        for slot in replay.slots:
            if slot.item.kind == "pretrain":
                continue
            key = slot.item.key
            start = slot.start_s + model.record_offset(slot.item)
            if key in command.recorded:
                weight = math.sqrt(WEIGHTS[slot.item.kind])
                seconds = max(slot.end_s - start, 1e-3)
                out.append(weight * math.log(seconds / max(command.recorded[key], 1e-3)))
            if deadline is None or not deadline_weight:
                continue
            early = deadline - slot.end_s  # > 0: inside the deadline
            miss = (early if key in command.lost else -early) + DEADLINE_CLEARANCE_S
            out.append(math.sqrt(deadline_weight) * max(0.0, miss) / DEADLINE_SCALE_S)
        if command.makespan_s:
            error = math.log(replay.end_s / command.makespan_s)
            out.append(math.sqrt(WEIGHTS["makespan"]) * error)
    return out


@dataclass(frozen=True)
class Fit:
    model: Model
    cost: float
    iterations: int
    spread: float
    """The geometric spread of recorded evaluation seconds around the replay's: exp of the
    root mean square log error."""


def fit(observed: Sequence[Observed], iterations: int = 40) -> Fit:
    """Fit the model to the committed commands: the compiling steps from each run's first
    logged row, everything else by damped least squares (Levenberg-Marquardt on the log of each
    parameter, finite differences, at most ``iterations`` a stage) on ``residuals``, from
    ``starting_point``: first the recorded seconds alone, then with the deadlines too (their
    penalties are kinks that stall the search from a far start; from the first fit they move it
    only as far as the deadlines need). Deterministic."""
    fixed = compile_estimates(observed)
    start = starting_point(observed)
    names = sorted(start)
    x = [math.log(start[n]) for n in names]
    cost, done = 0.0, 0

    def model_of(point: Sequence[float]) -> Model:
        return Model({**fixed, **{n: math.exp(v) for n, v in zip(names, point, strict=True)}})

    for weight in (0.0, WEIGHTS["deadline"]):  # the recorded seconds, then the deadlines too
        x, cost, used = least_squares(
            lambda point, w=weight: residuals(model_of(point), observed, w), x, iterations
        )
        done += used
    model = model_of(x)
    return Fit(model, cost, done, evaluation_spread(model, observed))


def least_squares(
    errors: Callable[[Sequence[float]], list[float]], x: list[float], iterations: int
) -> tuple[list[float], float, int]:
    """Levenberg-Marquardt from ``x``: the point, its cost and the iterations used."""
    r = errors(x)
    cost = sum(e * e for e in r)
    damping, done = 1e-2, 0
    while done < iterations:
        done += 1
        h = 1e-3
        columns = []
        for j in range(len(x)):
            moved = list(x)
            moved[j] += h
            columns.append([(a - b) / h for a, b in zip(errors(moved), r, strict=True)])
        normal = [
            [sum(a * b for a, b in zip(ci, cj, strict=True)) for cj in columns] for ci in columns
        ]
        gradient = [sum(a * b for a, b in zip(c, r, strict=True)) for c in columns]
        improved = False
        while damping < 1e8:
            system = [row[:] for row in normal]
            for j in range(len(x)):
                system[j][j] += damping * (normal[j][j] + 1e-9)
            step = solve(system, [-g for g in gradient])
            trial = [min(max(a + b, -12.0), 14.0) for a, b in zip(x, step, strict=True)]
            r_trial = errors(trial)
            trial_cost = sum(e * e for e in r_trial)
            if trial_cost < cost:
                improved = cost - trial_cost > 1e-7 * cost
                x, r, cost = trial, r_trial, trial_cost
                damping = max(damping / 3.0, 1e-7)
                break
            damping *= 4.0
        if not improved:
            break
    return x, cost, done


def evaluation_spread(model: Model, observed: Sequence[Observed]) -> float:
    errors = []
    for command in observed:
        replay = simulate(model, command.command)
        for key, seconds in command.recorded.items():
            slot = replay.slot(key)
            took = slot.end_s - slot.start_s - model.record_offset(slot.item)
            if slot.item.kind == "finetune":
                errors.append(math.log(max(took, 1e-3) / seconds))
    return math.exp(math.sqrt(sum(e * e for e in errors) / len(errors))) if errors else 1.0


def solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """``matrix`` x = ``vector`` by Gaussian elimination with partial pivoting (small, dense)."""
    n = len(vector)
    rows = [row[:] + [v] for row, v in zip(matrix, vector, strict=True)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(rows[i][col]))
        rows[col], rows[pivot] = rows[pivot], rows[col]
        if abs(rows[col][col]) < 1e-300:
            continue
        for i in range(col + 1, n):
            factor = rows[i][col] / rows[col][col]
            if factor:
                for k in range(col, n + 1):
                    rows[i][k] -= factor * rows[col][k]
    x = [0.0] * n
    for i in reversed(range(n)):
        if abs(rows[i][i]) < 1e-300:
            continue
        x[i] = (rows[i][n] - sum(rows[i][k] * x[k] for k in range(i + 1, n))) / rows[i][i]
    return x


# ----------------------------------------------------------------------------- planning

LADDER = (1e15, 3e15, 1e16, 3e16, 1e17)
"""The GPU session's rungs (``electra_ablate.scaleout.node.session``'s ``LADDER``): paper-convention
FLOPs per objective."""


def fitted() -> Model:
    """The committed model (``FITTED``)."""
    return Model(FITTED)


def committed_study() -> StudyFacts:
    """The committed GPU study's facts (``STUDY``)."""
    return StudyFacts.from_json(STUDY)


def carried_keys(records: Iterable[Mapping[str, Any]], study: StudyFacts) -> frozenset[str]:
    """The jobs that evaluation records from earlier stretches (``--reuse``) spare a study: the
    baseline's and the references' (fraction 0: their ids do not depend on the budget)."""
    baseline = [u[0] for u in study.units if u[1] == "baseline"]
    keys = set()
    for record in records:
        if record.get("status") != "done" or float(record.get("fraction", -1.0)) != 0.0:
            continue
        label = record.get("reference") or (baseline[0] if baseline else None)
        seed = record.get("seed")
        if label is None or record.get("task") is None:
            continue
        keys.add(Item("probe", "baseline", str(label), task=str(record["task"]),
                      seed=None if seed is None else int(seed), fraction=0.0).key)  # fmt: skip
    return frozenset(keys)


def committed_carried(study: StudyFacts) -> frozenset[str]:
    """The baseline's and references' jobs of the committed study at fine-tuning seed 0,
    which every later stretch reads back (``--reuse``)."""
    items = study.items(study.steps_at(min(LADDER)))
    return frozenset(i.key for i in items if i.unit != "run" and i.seed in (0, None))


def plan(
    rung: float,
    seeds: Sequence[int],
    workers: int,
    deadline_s: float | None,
    shape: Shape = "one_card",
    beside: int = 0,
    cache: str = "cold",
    mode: str = "cuda_graphs",
    carried: Iterable[str] | None = None,
    model: Model | None = None,
    study: StudyFacts | None = None,
    compile_ahead: int | None = None,
    runs: Sequence[str] | None = None,
) -> Replay:
    """The replay of one study command at ``rung`` with fine-tuning ``seeds``: every job's
    predicted start and end, and which ones ``deadline_s`` (seconds of the command) cuts.
    ``carried``: jobs read back from earlier stretches (default: the committed baseline's and
    references' at seed 0). ``compile_ahead``: as the worker pool does for ``shape`` where
    None (``pool_compile_ahead``). ``runs``: only these pre-training runs (default: all)."""
    model = model or fitted()
    study = (study or committed_study()).with_seeds(seeds)
    if runs is not None:
        study = study.with_runs(runs)
    if not study.steps_at(rung):
        raise ReplayInputError("the study has no pre-training run to plan")
    done = committed_carried(study) if carried is None else frozenset(carried)
    items = tuple(i for i in study.items(study.steps_at(rung)) if i.key not in done)
    if compile_ahead is None:
        compile_ahead = pool_compile_ahead(shape, beside, workers)
    command = Command(items, workers, mode, cache, shape, beside, deadline_s, compile_ahead)
    return simulate(model, command)


def pool_compile_ahead(shape: Shape, beside: int, workers: int) -> int:
    """The pre-trainings the worker pool compiles ahead with ``shape`` on the node's one card
    (``resolved_schedule``: one card's ``ONE_CARD_COMPILE_AHEAD``, none for the pool)."""
    return resolved_schedule(shape, beside, "cuda", 1, workers).compile_ahead


@dataclass(frozen=True)
class Choice:
    """What ``choose`` picked, why, and the replay of it (None: nothing fits)."""

    rung: float
    seeds: tuple[int, ...]
    replay: Replay
    fits: bool
    why: str


def choose(
    deadline_s: float,
    workers: int,
    shape: Shape = "one_card",
    beside: int = 0,
    cache: str = "cold",
    ladder: Sequence[float] = LADDER,
    max_seeds: int = 3,
    seeds: Sequence[int] | None = None,
    margin: float = MARGIN,
    mode: str = "cuda_graphs",
    carried: Iterable[str] | None = None,
    model: Model | None = None,
    study: StudyFacts | None = None,
    compile_ahead: int | None = None,
    runs: Sequence[str] | None = None,
) -> Choice:
    """The largest rung, then the most fine-tuning seeds (``[0]``, ``[0, 1]``, ... up to
    ``max_seeds``, or exactly ``seeds`` where given), whose replay ends within ``deadline_s``
    divided by ``margin``. Where nothing fits: the first rung with one seed (or ``seeds``), its
    finished parts packed as they come. ``compile_ahead``, ``runs``: as in ``plan``."""
    options = (
        [tuple(seeds)] if seeds is not None else [tuple(range(n)) for n in range(max_seeds, 0, -1)]
    )
    carried = None if carried is None else frozenset(carried)
    limit = deadline_s / margin
    for rung in sorted(ladder, reverse=True):
        for option in options:
            replay = plan(rung, option, workers, deadline_s, shape, beside, cache, mode, carried,
                          model, study, compile_ahead, runs)  # fmt: skip
            if replay.end_s <= limit:
                why = (f"the largest rung and the most seeds replayed to end by {limit:.0f} s "
                       f"({deadline_s:.0f} s / {margin:g}): {replay.end_s:.0f} s")  # fmt: skip
                return Choice(rung, option, replay, True, why)
    rung, option = min(ladder), options[-1]
    replay = plan(rung, option, workers, deadline_s, shape, beside, cache, mode, carried,
                  model, study, compile_ahead, runs)  # fmt: skip
    why = (
        f"nothing is replayed to end by {limit:.0f} s: the first rung, its finished parts "
        "packed as they come"
    )
    return Choice(rung, option, replay, False, why)


def session_schedule(device: str, workers: int, shape: str = "auto", beside: int = 0) -> Schedule:
    """The schedule a study's ``schedule`` block resolves to on a lent node, which has one
    card (``electra_ablate.study.schedule.resolved_schedule``)."""
    return resolved_schedule(shape, beside, device, 1, workers)


def card_loads(model: Model, mode: str = "cuda_graphs") -> dict[str, float]:
    """The share of the card each kind of process keeps busy alone (the sharing law's loads)."""
    return {"pretrain": model[f"pretrain_load/{mode}"], "finetune": model["finetune_load"],
            "probe": model["probe_load"]}  # fmt: skip


def plan_record(replay: Replay) -> list[dict[str, Any]]:
    """A replay as ``session.json`` keeps it: per job its kind, unit label, task, seed, predicted
    start and end (seconds of the study command) and whether the deadline cuts it."""
    return [
        {"kind": s.item.kind, "label": s.item.label, "task": s.item.task, "seed": s.item.seed,
         "fraction": s.item.fraction, "start_s": round(s.start_s, 1),
         "end_s": round(s.end_s, 1), "cut": s.cut}
        for s in replay.slots
    ]  # fmt: skip


def fitted_source(result: Fit, study: StudyFacts) -> str:
    """``FITTED`` and ``STUDY`` as Python, to paste into this module after a new fit."""
    values = ",\n".join(f"    {name!r}: {value:.6g}" for name, value in
                        sorted(result.model.values.items()))  # fmt: skip
    fitted_part = f"FITTED: dict[str, float] = {{\n{values},\n}}\n"
    return f"{fitted_part}\nSTUDY: dict[str, Any] = {study.to_json()!r}\n"
