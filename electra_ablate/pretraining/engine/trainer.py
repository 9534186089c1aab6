"""The pre-training loop: trains any registered objective for its planned number of steps.

It never knows which objective it runs. From the objective it takes a loss, metrics, its
stages and (through the plan) its per-step FLOPs. At each budget fraction it saves the encoder
the objective keeps for fine-tuning. Exact resume: the batch of a step is a pure function of
(seed, step), the learning rate a pure function of the step, and the state (weights, optimizer,
RNG, metric sums) is saved atomically, so a killed run ends with the weights of an
uninterrupted one.

A loss that stays finite but runs away (too high a learning rate) does not stop a run, but it is
flagged: the run's summary says ``diverged`` with the step and value, and the study warns.

Where ``ABLATE_DEVICE_GATE`` names a gate (``electra_ablate.infra.device_gate``: processes that
share one card), the first step (compiling) runs without it and the rest of the loop holds it,
so another run may compile while this one trains; the summary then says when training under the
gate began and ended and how long it waited (``gated``).
"""

from __future__ import annotations

import hashlib
import math
import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from electra_ablate.checkpoints.kept import save_kept
from electra_ablate.infra.device_gate import DeviceGate, gate_from_env
from electra_ablate.infra.errors import DataError, TrainingDiverged
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.progress import ProgressLine, ProgressMode, progress_mode, warn
from electra_ablate.infra.tracking import Tracking
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.compiling import compile_mode, compiled
from electra_ablate.pretraining.engine.distributed import Distributed
from electra_ablate.pretraining.engine.metrics_log import MetricsLog
from electra_ablate.pretraining.engine.optim import learning_rate, make_optimizer
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.engine.precision import autocast, grad_scaler, resolve_precision
from electra_ablate.pretraining.engine.state import (
    load_latest_state,
    restore_rng,
    rng_state,
    save_state,
)
from electra_ablate.pretraining.metric_names import collapse_warnings
from electra_ablate.pretraining.objective import Batch, Objective

DIVERGENCE_FACTOR = 4.0
"""A logged training loss this many times the loss of its stage's first step flags the run as
diverged. A healthy run's loss falls from its first step (a stage switch, as two-stage's, starts
a new reference), so 4x is far outside noise; ``learning_rate: 10`` on micro reaches ~100x."""
DIVERGENCE_BOUND = 1.0e4
"""A logged training loss above this flags the run whatever its start: no token-level loss in
nats (ELECTRA's 50 x detection loss included) comes near it while a model learns."""


class Batches(Protocol):
    """Batches as a pure function of the step (``data.batches.PackedBatches``)."""

    def batch(self, step: int) -> Batch: ...


@dataclass
class PretrainRun:
    """Everything one pre-training run needs besides the objective."""

    spec: PretrainSpec
    plan: RunPlan
    layout: RunLayout
    seed: int
    train_batches: Batches
    heldout_batches: Batches | None
    tokenizer_dir: Path
    meta: dict[str, Any] = field(default_factory=dict)  # copied into every kept.json
    tracking: Tracking | None = None  # the spec's trackers, opened (and closed) by the study


@dataclass
class MetricMeans:
    """Running sums of step metrics between two log lines; saved with the state for resume.

    Each metric is averaged over the steps that reported it, so a diagnostic that only some
    steps have is not diluted towards zero by the steps that lack it.

    Tensor metrics stay on their device: each step's are stacked and added to a float64 sum
    there (what summing their ``.item()`` values in Python gave), and reach the host only when
    the means are read (``pop``, ``state``), once per logged row instead of once per metric and
    step. A non-finite value makes its sum non-finite, so the means name the terms that went bad.
    """

    sums: dict[str, float] = field(default_factory=dict)
    count: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # absent in states saved before it
    on_device: dict[tuple[str, ...], list[Any]] = field(default_factory=dict, repr=False)
    """Key tuple -> [float64 sums on the device, steps] of the steps with those tensor metrics."""

    def add(self, metrics: dict[str, torch.Tensor | float]) -> None:
        tensors = {k: v for k, v in metrics.items() if isinstance(v, torch.Tensor)}
        for k, v in metrics.items():
            if k not in tensors:
                self.sums[k] = self.sums.get(k, 0.0) + v
                self.counts[k] = self.counts.get(k, 0) + 1
        if tensors:
            keys = tuple(tensors)
            values = torch.stack([v.detach().float().reshape(()) for v in tensors.values()])
            pending = self.on_device.setdefault(keys, [0.0, 0])
            pending[0] = values.double() + pending[0]
            pending[1] += 1
        self.count += 1

    def fetch(self) -> None:
        """Bring the device sums to the host (one sync per key set; usually one)."""
        for keys, (values, steps) in self.on_device.items():
            for k, v in zip(keys, values.tolist(), strict=True):
                self.sums[k] = self.sums.get(k, 0.0) + v
                self.counts[k] = self.counts.get(k, 0) + steps
        self.on_device.clear()

    def state(self) -> dict[str, Any]:
        """The JSON-able sums saved with a resumable state."""
        self.fetch()
        return {"sums": self.sums, "count": self.count, "counts": self.counts}

    def pop(self) -> dict[str, float]:
        self.fetch()
        means = {k: v / max(1, self.counts.get(k, self.count)) for k, v in self.sums.items()}
        self.sums, self.count, self.counts = {}, 0, {}
        return means


class Trainer:
    """Pre-trains one objective into ``run.layout``; ``train()`` resumes whatever is there."""

    def __init__(
        self,
        objective: Objective,
        run: PretrainRun,
        device: torch.device,
        dist: Distributed | None = None,
        progress: bool | ProgressMode | None = None,
    ) -> None:
        self.dist = dist or Distributed()
        self.device = self.dist.device(device)
        self.objective = objective.to(self.device)
        self.run, self.plan, self.spec = run, run.plan, run.spec
        self.progress: ProgressMode = (
            progress if isinstance(progress, str) else progress_mode(progress)
        )
        self.log = MetricsLog(run.layout.metrics, run.tracking if self.dist.is_main else None)
        self.means = MetricMeans()
        self.step = 0
        self.stage = 0
        self.model: torch.nn.Module = self.objective  # DDP-wrapped under torchrun
        self.forward: Any = self.model  # the model, compiled when pretrain.compile says so
        self.compile_error = ""  # why compiling failed, if it did: the run went on eager
        # eager (False), compiled (True) or replayed as CUDA graphs, as pretrain.compile and
        # the device and process count decide (``compiling.compile_mode``)
        self.compile_mode = compile_mode(
            self.spec.compile, self.device, distributed=self.dist.world_size > 1
        )
        self.optimizer: torch.optim.AdamW | None = None
        # per stage (as a str: JSON keys); a device tensor until the next log row reads it
        self.stage_start_loss: dict[str, float | torch.Tensor] = {}
        self.diverged: dict[str, Any] | None = None
        self.collapse_warned: set[str] = set()  # the collapse signals this run has said
        self.first_nonfinite: torch.Tensor | None = None  # [] long on the device, -1: none yet
        self.checked_at = -1  # the step check_finite last read first_nonfinite at
        self.precision = resolve_precision(run.spec.precision, self.device)
        self.scaler = grad_scaler(self.device, self.precision)  # fp16 only

    # ------------------------------------------------------------------ the loop
    def train(self, stop_at: int | None = None) -> dict[str, Any]:
        """Train to the end of the plan, or to step ``stop_at`` (rebuilding a kept encoder),
        resuming if a state exists; returns a summary."""
        self.run.layout.root.mkdir(parents=True, exist_ok=True)
        end = self.plan.total_steps if stop_at is None else min(stop_at, self.plan.total_steps)
        with deterministic(self.spec.deterministic):
            return self._train(end)

    def _train(self, end: int) -> dict[str, Any]:
        """``train``'s loop, to step ``end``."""
        started_at = time.time()
        self.start_or_resume()
        checkpoints = self.plan.checkpoint_steps()
        started, tokens, last_log = time.perf_counter(), 0, time.perf_counter()
        first_step_s = None
        title = f"pre-train {self.run.meta.get('label', '')}".rstrip()
        mode = self.progress if self.dist.is_main else "off"
        # ranks of one run each own a device and must train together: no gate between them
        gate = gate_from_env() if self.dist.world_size == 1 else None
        try:
            with ProgressLine(title, self.plan.total_steps, self.step, mode) as bar:
                while self.step < end:
                    stage = self.plan.stage_of(self.step)
                    if stage != self.stage and self.means.count:
                        # a row never averages two stages: their losses and metrics differ
                        self.log_train(bar, tokens, last_log)
                        tokens, last_log = 0, time.perf_counter()
                    self.enter_stage(stage)
                    if first_step_s is None:  # this process's first: it compiles, if anything
                        begun = time.perf_counter()
                        tokens += self.advance()
                        self.wait_for_device()
                        first_step_s = time.perf_counter() - begun
                        if gate is not None:  # compiled without it; trains from here with it
                            gate.take()
                    else:
                        tokens += self.advance()
                    if self.step % self.spec.log_every == 0 or self.step == self.plan.total_steps:
                        self.log_train(bar, tokens, last_log)
                        tokens, last_log = 0, time.perf_counter()
                    if self.step in checkpoints:
                        self.checkpoint(checkpoints[self.step])
                    elif self.spec.resume_every and self.step % self.spec.resume_every == 0:
                        self.save_state()
            self.check_finite()  # a rebuild (stop_at) may end between two logged rows
        finally:
            if gate is not None:
                gate.release()
        self.log.close()
        flops = self.plan.flops_at(self.step)
        return {
            "steps": self.step,
            "wall_s": time.perf_counter() - started,
            "started_at": started_at,  # epoch seconds: when this process began training it
            "first_step_s": first_step_s,  # its first step's seconds, compiling included
            **gated(gate),
            **{f"flops_{c}": v for c, v in flops.items()},
            "diverged": self.diverged or False,
            "threads": torch.get_num_threads(),  # a rebuild re-trains with the same count
            "precision": self.precision,  # like the device, not part of the run's identity
            "compiled": bool(self.compile_mode) and not self.compile_error,
            "compile_mode": self.compile_mode if not self.compile_error else False,
            **({"compile_error": self.compile_error} if self.compile_error else {}),
        }

    def wait_for_device(self) -> None:
        """Wait until the device has run every step queued (a CPU runs them as they come), so
        that a step's seconds are the step's, not its launch's."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def rank_seed(self) -> int:
        """This rank's seed: each rank draws its own masks and samples."""
        return self.run.seed * 1000 + self.dist.rank

    def start_or_resume(self) -> None:
        torch.manual_seed(self.rank_seed())
        counters = load_latest_state(
            self.run.layout.states, self.objective, self._restore, self.device
        )
        if counters is None:
            self.step, self.stage = 0, 0
            self._enter(0)
            self.log.reset()
        self.objective.train()

    def enter_stage(self, stage: int) -> None:
        """Switch stage (new optimizer and schedule) when the plan says so."""
        if stage != self.stage:
            self._enter(stage)

    def advance(self) -> int:
        """Train this step and count it; returns its token count. Nothing here waits for the
        device: metrics are summed there (``MetricMeans``), the loss's finiteness is recorded
        there and checked when a row is logged (``check_finite``)."""
        metrics, n_tokens = self.train_step(self.batch(self.step))
        if str(self.stage) not in self.stage_start_loss:  # a copy: under CUDA graphs the next
            self.stage_start_loss[str(self.stage)] = metrics["loss"].clone()  # replay rewrites it
        self.watch_finite(metrics["loss"])
        self.step += 1
        self.means.add(metrics)
        return n_tokens

    def train_step(self, host_batch: Batch) -> tuple[dict[str, torch.Tensor | float], int]:
        """One optimizer step on a batch; returns its metrics (detached device tensors, and
        the learning rate) and its token count."""
        if self.device.type == "cuda":  # pinned: the copy really is asynchronous
            host_batch = {k: v.pin_memory() for k, v in host_batch.items()}
        batch = {k: v.to(self.device, non_blocking=True) for k, v in host_batch.items()}
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.plan, self.step, self.spec)
        with autocast(self.device, self.precision):
            out = self.compiled_or_eager(batch)
        metrics: dict[str, torch.Tensor | float] = {"loss": out.loss.detach(), **out.metrics}
        self.optimizer.zero_grad(set_to_none=True)
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if self.scaler is None:
            out.loss.backward()  # under DDP the gradients are averaged over ranks here
            metrics["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, self.spec.grad_clip)
            self.optimizer.step()
        else:  # fp16: scaled gradients, unscaled before clipping; overflowing steps are skipped
            self.scaler.scale(out.loss).backward()
            self.scaler.unscale_(self.optimizer)
            metrics["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, self.spec.grad_clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        return metrics, int(host_batch["input_ids"].numel())

    def watch_finite(self, loss: torch.Tensor) -> None:
        """Record, on the device, the first step whose loss is not finite."""
        if self.first_nonfinite is None:
            self.first_nonfinite = torch.full((), -1, dtype=torch.long, device=loss.device)
        first = self.first_nonfinite
        self.first_nonfinite = torch.where((first < 0) & ~torch.isfinite(loss), self.step, first)

    def check_finite(self) -> None:
        """Stop the run (``TrainingDiverged``, one line naming the step and the loss terms) if a
        loss since the last check was not finite.

        The policy: the check runs before anything is written (a metrics row, held-out metrics,
        a kept encoder, a resumable state), so no file ever holds what a non-finite step
        produced, and the last saved state precedes that step: a resume after lowering the
        learning rate starts from finite weights. Checking at every step would stall a GPU
        step on the host; the steps trained in between are thrown away with the run.
        """
        if self.checked_at == self.step:
            return
        self.checked_at = self.step
        step = -1 if self.first_nonfinite is None else int(self.first_nonfinite)
        message = None
        if step >= 0:
            stage = self.objective.stages()[self.plan.stage_of(step)].name
            means = self.means.pop()  # non-finite sums are the terms that went non-finite
            message = nonfinite_message(step, stage, means)
        if self.dist.world_size > 1:
            # every rank calls this at the same steps; the ranks decide together (a rank that
            # stopped alone would leave the others waiting in the next all-reduce) and all
            # stop with the line of the rank whose loss went non-finite first
            seen = [(s, r, m) for r, (s, m) in enumerate(self.dist.gather((step, message))) if m]
            if not seen:
                return
            step, rank, message = min(seen)
            message += f" (rank {rank} of {self.dist.world_size})"
        if message is not None:
            raise TrainingDiverged(message)

    def batch(self, step: int) -> Batch:
        return self.run.train_batches.batch(step)

    # ----------------------------------------------------------- checkpoints
    def checkpoint(self, fractions: list[float]) -> None:
        """Held-out metrics, the kept encoder for each fraction, then the resumable state."""
        self.check_finite()
        if self.run.heldout_batches is not None and self.spec.eval_batches > 0:
            self.watch_collapse(self.write_log("heldout", self.dist.mean(self.evaluate())))
        if self.dist.is_main:
            flops = self.plan.flops_at(self.step)
            for fraction in fractions:
                meta = {
                    **self.run.meta,
                    "fraction": fraction,
                    "step": self.step,
                    "flops_paper": flops["paper"],
                    "flops_standard": flops["standard"],
                }
                save_kept(
                    self.run.layout.kept(fraction),
                    self.objective.kept_model(),
                    self.run.tokenizer_dir,
                    meta,
                )
                self.log.kept(fraction, self.step, {f"flops_{c}": v for c, v in flops.items()})
        self.save_state()

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Mean metrics on fixed held-out batches; the training RNG stream is left untouched."""
        means = MetricMeans()
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(12345)
            self.objective.eval()
            for i in range(self.spec.eval_batches):
                batch = {k: v.to(self.device) for k, v in self.run.heldout_batches.batch(i).items()}
                with autocast(self.device, self.precision):
                    out = self.objective(batch)
                means.add({"loss": out.loss.detach(), **out.metrics})
            self.objective.train()
        return means.pop()

    def save_state(self) -> None:
        self.check_finite()
        rng = self.dist.gather(rng_state())
        if self.dist.is_main:
            counters = {
                "step": self.step,
                "stage": self.stage,
                "means": self.means.state(),
                "stage_start_loss": self.fetch_start_losses(),
                "diverged": self.diverged,
                "collapse_warned": sorted(self.collapse_warned),
                "vocab_sha256": vocab_sha256(self.run.tokenizer_dir),
                "grad_scaler": None if self.scaler is None else self.scaler.state_dict(),
            }
            save_state(
                self.run.layout.state(self.step), self.objective, self.optimizer, rng, counters
            )
        self.dist.barrier()  # no rank runs ahead of a state that may be needed to resume it

    def log_train(self, bar: ProgressLine, tokens: int, since: float) -> None:
        """Write the mean of the training steps since the last row, with the token rate."""
        self.check_finite()
        self.fetch_start_losses()
        speed = tokens * self.dist.world_size / max(time.perf_counter() - since, 1e-9)
        means = {**self.dist.mean(self.means.pop()), "tokens_per_s": speed}
        row = self.write_log("train", means)
        self.watch_divergence(row["loss"])
        bar.update(self.step, f"loss {row['loss']:.3f}  {row['flops_paper']:.2e} FLOPs")

    def compiled_or_eager(self, batch: Batch) -> Any:
        """The step's forward, compiled when the spec says so. A compiler that fails (a
        missing toolchain, an unsupported op on this machine) costs the run its speed, never
        its result: one warning, the rest of the run eager, and ``done.json`` names the error.
        An error that eager raises as well is the model's, and propagates."""
        if self.forward is self.model:
            return self.model(batch)
        try:
            return self.forward(batch)
        except Exception as e:  # noqa: BLE001 - the compiler's errors have no common type
            self.compile_error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
            warnings.warn(
                f"torch.compile failed ({self.compile_error}); this run goes on eager",
                stacklevel=2,
            )
            self.forward = self.model
            return self.model(batch)

    def fetch_start_losses(self) -> dict[str, float]:
        """The stages' first losses as floats (read from the device once, at a log row)."""
        for stage, loss in self.stage_start_loss.items():
            if isinstance(loss, torch.Tensor):
                self.stage_start_loss[stage] = loss.item()
        return self.stage_start_loss  # type: ignore[return-value]

    def watch_divergence(self, loss: float) -> None:
        """Flag the run (once) when a logged training loss runs away from its stage's start."""
        start = self.stage_start_loss.get(str(self.stage))
        if self.diverged is not None or not math.isfinite(loss):
            return
        if loss > DIVERGENCE_BOUND or (start is not None and loss > DIVERGENCE_FACTOR * start > 0):
            self.diverged = {"step": self.step, "loss": loss, "start_loss": start}

    def watch_collapse(self, row: dict[str, Any]) -> None:
        """Say (once per run and signal, never stopping) when a held-out row crosses a threshold
        of the collapse monitor (``metric_names.COLLAPSE_SIGNALS``, checked by metric name).

        Held-out rows only: at initialisation a detection head's logits barely differ
        (N(0, 0.02) weights), so early training rows would cross the logit-spread threshold
        in a healthy run; held-out rows come at the kept checkpoints, on fixed batches."""
        for line in collapse_warnings(row, self.collapse_warned):
            if self.dist.is_main:
                warn(f"{self.run.meta.get('label') or 'pre-training'}: {line}")

    def write_log(self, split: str, metrics: dict[str, float]) -> dict[str, Any]:
        flops = self.plan.flops_at(self.step)
        row = {
            "step": self.step,
            "stage": self.stage,
            "split": split,
            "flops_paper": flops["paper"],
            "flops_standard": flops["standard"],
            **metrics,
        }
        if self.dist.is_main:
            self.log.write(row)
        return row

    # ---------------------------------------------------------------- helpers
    def _enter(self, stage: int) -> None:
        """Enter ``stage``: the objective freezes/unfreezes what it declares, the optimizer is
        rebuilt over what is now trainable, and DDP re-registers those parameters."""
        self.stage = stage
        self.objective.enter_stage(stage)
        self.objective.train()
        self.optimizer = make_optimizer(self.objective, self.spec)
        self.model = self.dist.wrap(self.objective, self.device)
        self.forward = (
            compiled(self.model, self.compile_mode)
            if self.compile_mode and not self.compile_error
            else self.model
        )

    def _restore(self, state: Path, counters: dict[str, Any]) -> None:
        check_same_vocab(counters.get("vocab_sha256"), self.run.tokenizer_dir, state)
        self.step = counters["step"]
        self._enter(counters["stage"])
        optim_state = torch.load(
            state / "optimizer.pt", map_location=self.device, weights_only=True
        )
        self.optimizer.load_state_dict(optim_state)
        restore_rng(state / "rng.pt", self.dist.rank, self.dist.world_size, self.rank_seed())
        self.means = MetricMeans(**counters["means"])
        # absent in states saved before divergence was watched: the next step starts the watch
        self.stage_start_loss = dict(counters.get("stage_start_loss") or {})
        self.diverged = counters.get("diverged")
        self.collapse_warned = set(counters.get("collapse_warned") or ())  # resumed: said once
        if self.scaler is not None and counters.get("grad_scaler"):
            self.scaler.load_state_dict(counters["grad_scaler"])
        if self.dist.is_main:
            self.log.truncate(self.step)


def gated(gate: DeviceGate | None) -> dict[str, float]:
    """What ``done.json`` says of the device gate (``electra_ablate.infra.device_gate``): the
    seconds the run waited for it after its first step (``gate_wait_s``) and when it took it
    (``trained_from``, epoch seconds) and let it go (``trained_until``): its training on the
    device, told apart from its compiling and its waiting. Nothing where no gate was taken (no
    ``ABLATE_DEVICE_GATE``, or no step left to train)."""
    if gate is None or gate.taken_at is None:
        return {}
    return {
        "gate_wait_s": gate.waited_s,
        "trained_from": gate.taken_at,
        "trained_until": gate.released_at,
    }


def vocab_sha256(tokenizer_dir: Path) -> str | None:
    """The checksum of the id -> token map the run trains on (None: no ``vocab.txt``).

    Two builds of the data cache from the same corpus can order WordPiece tokens of equal
    frequency differently: the same run id, other token ids. A state saved under one and resumed
    under the other would not end with the weights of an uninterrupted run."""
    vocab = tokenizer_dir / "vocab.txt"
    return hashlib.sha256(vocab.read_bytes()).hexdigest() if vocab.is_file() else None


def check_same_vocab(saved: str | None, tokenizer_dir: Path, state: Path) -> None:
    """Refuse to resume a state trained on another vocabulary (states saved before the
    checksum was recorded are resumed as before)."""
    current = vocab_sha256(tokenizer_dir)
    if saved is None or current is None or saved == current:
        return
    raise DataError(
        f"cannot resume {state}: it was trained with another tokenizer vocabulary than "
        f"{tokenizer_dir / 'vocab.txt'} (another build of the data cache); delete "
        f"{state.parent} to re-train this run from the start"
    )


def nonfinite_message(step: int, stage: str, means: dict[str, float]) -> str:
    """``non-finite loss at step N (stage s): disc_loss=nan``: the loss terms (``*_loss``)
    whose mean since the last row is not finite, or the total loss."""
    bad = [k for k, v in means.items() if k.endswith("_loss") and not math.isfinite(v)]
    terms = ", ".join(f"{k}={means[k]}" for k in bad) or f"loss={means.get('loss')}"
    return f"non-finite loss at step {step} (stage {stage}): {terms}"


@contextmanager
def deterministic(enabled: bool) -> Iterator[None]:
    """Deterministic kernels for the block where asked (``pretrain.deterministic``): on a CPU a
    resumed run already ends with the weights of an unbroken one; on a GPU, atomics-based
    kernels and cuBLAS's split reductions add in varying order, so only this mode keeps that
    promise there. cuBLAS reads ``CUBLAS_WORKSPACE_CONFIG`` when it starts, so it is set here,
    before the run's first matrix product. The caller's setting comes back afterwards."""
    if not enabled:
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
