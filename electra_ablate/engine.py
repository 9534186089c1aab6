"""The pre-training engine: trains any registered objective for a FLOPs budget.

It never knows which objective it runs. From the objective it takes a loss, metrics, its
stages and its per-step FLOPs; from those it derives how many steps each stage gets so that
every objective in a study spends the same compute, and at which steps the budget fractions
(1/8, 1/4, ...) fall. At each fraction it saves the encoder the objective keeps for fine-tuning.

Exact resume: the batch of a step is a pure function of (seed, step), the learning rate a pure
function of the step, and the training state (weights, optimizer, RNG, metric accumulators) is
saved atomically with a checksum. A run killed at any moment restarts from its last good state
and ends with the same weights as an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import time
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from safetensors.torch import load_model, save_model

from electra_ablate.errors import TrainingDiverged
from electra_ablate.flops import CONVENTIONS, Convention, stage_step_flops
from electra_ablate.kept import save_kept
from electra_ablate.objective import Batch, Objective
from electra_ablate.spec import PretrainSpec
from electra_ablate.storage import atomic_dir, atomic_write_text

STATES_KEPT = 2  # the newest state and the one before it, in case the newest is corrupt


@dataclass(frozen=True)
class RunPlan:
    """How a FLOPs budget turns into steps: per stage, and where each checkpoint falls."""

    stage_steps: tuple[int, ...]
    stage_flops: tuple[dict[str, float], ...]  # FLOPs of one step of each stage, per convention
    checkpoints: tuple[tuple[float, int], ...]  # (budget fraction, global step)

    @property
    def total_steps(self) -> int:
        return sum(self.stage_steps)

    def stage_of(self, step: int) -> int:
        """The stage that trains step ``step`` (0-based)."""
        bounds = [sum(self.stage_steps[: i + 1]) for i in range(len(self.stage_steps))]
        return min(bisect_right(bounds, step), len(bounds) - 1)

    def stage_start(self, stage: int) -> int:
        return sum(self.stage_steps[:stage])

    def flops_at(self, step: int) -> dict[str, float]:
        """Cumulative pre-training FLOPs after ``step`` steps, in both conventions."""
        out = dict.fromkeys(CONVENTIONS, 0.0)
        remaining = step
        for steps, flops in zip(self.stage_steps, self.stage_flops, strict=True):
            done = min(steps, remaining)
            for c in CONVENTIONS:
                out[c] += done * flops[c]
            remaining -= done
        return out


def plan_run(
    objective: Objective,
    budget_flops: float,
    convention: Convention,
    batch_size: int,
    seq_len: int,
    fractions: list[float],
) -> RunPlan:
    """Split ``budget_flops`` between the objective's stages and place the checkpoints."""
    per_convention = {c: stage_step_flops(objective, seq_len, batch_size, c) for c in CONVENTIONS}
    stages = [stage for stage, _ in per_convention[convention]]
    stage_flops = tuple(
        {c: per_convention[c][i][1] for c in CONVENTIONS} for i in range(len(stages))
    )
    if objective.stage_split() == "steps":  # n_i = fraction_i * N, with sum n_i f_i = budget
        pairs = zip(stages, stage_flops, strict=True)
        mean_step = sum(s.fraction * f[convention] for s, f in pairs)
        total = budget_flops / mean_step
        stage_steps = tuple(max(1, round(s.fraction * total)) for s in stages)
    else:  # n_i f_i = fraction_i * budget
        stage_steps = tuple(
            max(1, round(budget_flops * stage.fraction / flops[convention]))
            for stage, flops in zip(stages, stage_flops, strict=True)
        )
    plan = RunPlan(stage_steps, stage_flops, ())
    total = plan.flops_at(plan.total_steps)[convention]
    cumulative = [plan.flops_at(s)[convention] for s in range(plan.total_steps + 1)]
    checkpoints = []
    for fraction in sorted(set(fractions)):
        target = fraction * total
        step = min(range(1, plan.total_steps + 1), key=lambda s: abs(cumulative[s] - target))
        checkpoints.append((fraction, step))
    return RunPlan(stage_steps, stage_flops, tuple(checkpoints))


def learning_rate(plan: RunPlan, step: int, spec: PretrainSpec) -> float:
    """Linear warm-up then linear decay to zero, restarted for each stage."""
    stage = plan.stage_of(step)
    steps = plan.stage_steps[stage]
    t = step - plan.stage_start(stage)
    warmup = max(1, round(spec.warmup_fraction * steps)) if spec.warmup_fraction > 0 else 0
    if t < warmup:
        return spec.learning_rate * (t + 1) / warmup
    return spec.learning_rate * max(0.0, (steps - t) / max(1, steps - warmup))


def make_optimizer(objective: Objective, spec: PretrainSpec) -> torch.optim.AdamW:
    """AdamW with no weight decay on LayerNorm weights and biases (the 1-D parameters)."""
    decay, no_decay = [], []
    for _, p in objective.trainable_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": spec.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=spec.learning_rate, betas=spec.adam_betas, eps=spec.adam_eps
    )


@dataclass
class Distributed:
    """Rank and world size under ``torchrun``; one process otherwise."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def from_env(cls, device: torch.device) -> Distributed:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1:
            return cls()
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        return cls(dist.get_rank(), world_size)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def average_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """One coalesced all-reduce of every gradient, divided by the world size (DDP's sum)."""
        if self.world_size == 1:
            return
        grads = [p.grad for p in params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def gather(self, obj: Any) -> list[Any]:
        if self.world_size == 1:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out


@dataclass
class MetricMeans:
    """Running sums of step metrics between two log lines; saved with the state for resume."""

    sums: dict[str, float] = field(default_factory=dict)
    count: int = 0

    def add(self, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.count += 1

    def pop(self) -> dict[str, float]:
        means = {k: v / max(1, self.count) for k, v in self.sums.items()}
        self.sums, self.count = {}, 0
        return means


def finite_check(loss: torch.Tensor, metrics: dict[str, float], step: int, stage: str) -> None:
    if math.isfinite(loss.item()):
        return
    bad = [k for k, v in metrics.items() if k.endswith("_loss") and not math.isfinite(v)]
    terms = ", ".join(f"{k}={metrics[k]}" for k in bad) or f"loss={loss.item()}"
    raise TrainingDiverged(f"non-finite loss at step {step} (stage {stage}): {terms}")


@contextmanager
def autocast(device: torch.device) -> Iterator[None]:
    """bf16 autocast on CUDA; fp32 on CPU, where bf16 is hundreds of times slower."""
    if device.type == "cuda":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            yield
    else:
        yield


def to_device(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


class Trainer:
    """Pre-trains one objective into ``run_dir``; ``train()`` resumes whatever is there."""

    def __init__(
        self,
        objective: Objective,
        train_batches: Any,
        heldout_batches: Any | None,
        spec: PretrainSpec,
        plan: RunPlan,
        run_dir: Path,
        seed: int,
        device: torch.device,
        tokenizer_dir: Path,
        meta: dict[str, Any],
        dist_ctx: Distributed | None = None,
        progress: bool | None = None,
    ) -> None:
        self.objective = objective.to(device)
        self.train_batches, self.heldout_batches = train_batches, heldout_batches
        self.spec, self.plan, self.seed, self.device = spec, plan, seed, device
        self.run_dir = Path(run_dir)
        self.tokenizer_dir, self.meta = Path(tokenizer_dir), meta
        self.dist = dist_ctx or Distributed()
        self.progress = sys.stderr.isatty() if progress is None else progress
        self.metrics_path = self.run_dir / "metrics.jsonl"
        self.means = MetricMeans()
        self.step = 0
        self.stage = 0
        self.optimizer: torch.optim.AdamW | None = None
        self.seq_len = 0

    # ----------------------------------------------------------------- state
    @property
    def states_dir(self) -> Path:
        return self.run_dir / "states"

    def save_state(self) -> None:
        rng = self.dist.gather(rng_state())
        if not self.dist.is_main:
            return
        with atomic_dir(self.states_dir / f"step-{self.step:09d}") as tmp:
            save_model(self.objective, str(tmp / "model.safetensors"))
            torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
            torch.save(rng, tmp / "rng.pt")
            trainer = {"step": self.step, "stage": self.stage, "means": self.means.__dict__}
            atomic_write_text(tmp / "trainer.json", json.dumps(trainer))
            files = {p.name: sha256(p) for p in sorted(tmp.iterdir())}
            atomic_write_text(tmp / "manifest.json", json.dumps(files, indent=1))
        for old in sorted(self.states_dir.glob("step-*"))[:-STATES_KEPT]:
            shutil.rmtree(old, ignore_errors=True)

    def load_latest_state(self) -> bool:
        """Restore the newest state whose checksums hold; warn about and skip corrupt ones."""
        for state in sorted(self.states_dir.glob("step-*"), reverse=True):
            problem = verify_state(state)
            if problem is None:
                try:
                    self._load_state(state)
                    return True
                except Exception as exc:  # a state that verifies but will not load
                    problem = f"unreadable ({type(exc).__name__}: {exc})"
            print(f"warning: skipping checkpoint {state}: {problem}", file=sys.stderr)
        return False

    def _load_state(self, state: Path) -> None:
        trainer = json.loads((state / "trainer.json").read_text())
        self.step, self.stage = trainer["step"], trainer["stage"]
        self.objective.enter_stage(self.stage)
        load_model(self.objective, str(state / "model.safetensors"), device=str(self.device))
        self.optimizer = make_optimizer(self.objective, self.spec)
        optim_state = torch.load(
            state / "optimizer.pt", map_location=self.device, weights_only=True
        )
        self.optimizer.load_state_dict(optim_state)
        rng = torch.load(state / "rng.pt", weights_only=False)
        set_rng_state(rng[self.dist.rank])
        self.means = MetricMeans(**trainer["means"])
        truncate_jsonl(self.metrics_path, self.step)

    # ------------------------------------------------------------- training
    def train(self) -> dict[str, Any]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(self.seed * 1000 + self.dist.rank)
        if not self.load_latest_state():
            self.step, self.stage = 0, 0
            self.objective.enter_stage(0)
            self.optimizer = make_optimizer(self.objective, self.spec)
            self.metrics_path.unlink(missing_ok=True)
        self.objective.train()
        checkpoint_steps = {}
        for fraction, step in self.plan.checkpoints:
            checkpoint_steps.setdefault(step, []).append(fraction)
        stage_names = [s.name for s in self.objective.stages()]
        started, last_log, tokens = time.perf_counter(), time.perf_counter(), 0
        with ProgressLine(self.plan.total_steps, self.step, enabled=self.progress) as bar:
            while self.step < self.plan.total_steps:
                stage = self.plan.stage_of(self.step)
                if stage != self.stage:
                    self.stage = stage
                    self.objective.enter_stage(stage)
                    self.objective.train()
                    self.optimizer = make_optimizer(self.objective, self.spec)
                metrics, n_tokens = self.train_step(stage_names[stage])
                tokens += n_tokens
                self.step += 1
                self.means.add(metrics)
                if self.step % self.spec.log_every == 0 or self.step == self.plan.total_steps:
                    now = time.perf_counter()
                    row = self.log_row("train", self.means.pop())
                    row["tokens_per_s"] = tokens * self.dist.world_size / max(now - last_log, 1e-9)
                    self.write_metrics(row)
                    bar.update(self.step, row)
                    last_log, tokens = now, 0
                if self.step in checkpoint_steps:
                    self.checkpoint(checkpoint_steps[self.step])
                elif self.spec.resume_every and self.step % self.spec.resume_every == 0:
                    self.save_state()
        summary = {
            "steps": self.step,
            "wall_s": time.perf_counter() - started,
            **{f"flops_{c}": v for c, v in self.plan.flops_at(self.step).items()},
        }
        return summary

    def train_step(self, stage_name: str) -> tuple[dict[str, float], int]:
        batch = to_device(self.train_batches.batch(self.step), self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.plan, self.step, self.spec)
        with autocast(self.device):
            out = self.objective(batch)
        metrics = {"loss": out.loss.item(), **{k: v.item() for k, v in out.metrics.items()}}
        finite_check(out.loss, metrics, self.step, stage_name)
        self.optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.dist.average_gradients(params)
        metrics["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, self.spec.grad_clip))
        self.optimizer.step()
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        return metrics, int(batch["input_ids"].numel())

    def log_row(self, split: str, metrics: dict[str, float]) -> dict[str, Any]:
        flops = self.plan.flops_at(self.step)
        return {
            "step": self.step,
            "stage": self.stage,
            "split": split,
            "flops_paper": flops["paper"],
            "flops_standard": flops["standard"],
            **metrics,
        }

    def write_metrics(self, row: dict[str, Any]) -> None:
        if self.dist.is_main:
            finite = {
                k: v if not isinstance(v, float) or math.isfinite(v) else None
                for k, v in row.items()
            }
            with self.metrics_path.open("a") as f:
                f.write(json.dumps(finite) + "\n")

    def checkpoint(self, fractions: list[float]) -> None:
        """Held-out metrics, the kept encoder for each fraction, then the resumable state."""
        if self.heldout_batches is not None and self.spec.eval_batches > 0:
            self.write_metrics(self.log_row("heldout", self.evaluate()))
        if self.dist.is_main:
            flops = self.plan.flops_at(self.step)
            for fraction in fractions:
                meta = {
                    **self.meta,
                    "fraction": fraction,
                    "step": self.step,
                    "flops_paper": flops["paper"],
                    "flops_standard": flops["standard"],
                }
                save_kept(
                    kept_dir(self.run_dir, fraction),
                    self.objective.kept_model(),
                    self.tokenizer_dir,
                    meta,
                )
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
                batch = to_device(self.heldout_batches.batch(i), self.device)
                with autocast(self.device):
                    out = self.objective(batch)
                means.add(
                    {"loss": out.loss.item(), **{k: v.item() for k, v in out.metrics.items()}}
                )
            self.objective.train()
        return means.pop()


def kept_dir(run_dir: Path, fraction: float) -> Path:
    return Path(run_dir) / "kept" / f"{fraction:.6g}"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_state(state: Path) -> str | None:
    """None if every file matches the manifest's checksum, else what is wrong."""
    manifest = state / "manifest.json"
    if not manifest.exists():
        return "no manifest (incomplete write)"
    try:
        expected = json.loads(manifest.read_text())
    except json.JSONDecodeError:
        return "corrupt manifest"
    for name, digest in expected.items():
        path = state / name
        if not path.exists():
            return f"{name} is missing"
        if sha256(path) != digest:
            return f"{name} fails its checksum"
    return None


def truncate_jsonl(path: Path, step: int) -> None:
    """Drop log lines written after ``step`` (by a run that was killed before its next state)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line)["step"] <= step:
                keep.append(line)
        except (json.JSONDecodeError, KeyError):
            break  # a torn last line
    atomic_write_text(path, "".join(line + "\n" for line in keep))


class ProgressLine:
    """A rich progress bar with ETA on a terminal; plain log lines otherwise (CI, pipes)."""

    def __init__(self, total: int, start: int, enabled: bool) -> None:
        self.total, self.start, self.enabled = total, start, enabled
        self._progress = None

    def __enter__(self) -> ProgressLine:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("pre-train"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "", total=self.total, completed=self.start, info=""
            )
        return self

    def update(self, step: int, row: dict[str, Any]) -> None:
        info = f"loss {row.get('loss', float('nan')):.3f}  {row['flops_paper']:.2e} FLOPs"
        if self._progress is not None:
            self._progress.update(self._task, completed=step, info=info)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
