"""``ablate doctor``: what this machine offers a study, on one screen.

Meant for the first minutes on a new cluster or GPU node, before any study runs there: the
software (Python, torch and its CUDA, the packages the job path needs), each device with its
bf16 and fp16 support, the attention kernel ``scaled_dot_product_attention`` picks for the
GPU study's shapes (the ``small`` preset, with and without a padded row), whether
``torch.compile`` builds and runs, and a timed micro pre-training run on every device through
the engine's own ``Trainer.advance`` on synthetic packed batches (no data needed).

Every check reports its failure as a row instead of raising: a doctor that stops at the first
problem tells less than one that lists them all.
"""

from __future__ import annotations

import importlib.metadata
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from electra_ablate import __version__
from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import Encoder
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.data.batches import PackedBatches
from electra_ablate.infra.layout import RunLayout
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.engine.trainer import PretrainRun, Trainer, autocast
from electra_ablate.pretraining.flops import objective_flops
from electra_ablate.pretraining.registry import build_objective

PACKAGES = {
    "torch": "training",
    "pydantic": "specs",
    "pyarrow": "data and tables",
    "tokenizers": "tokenizer",
    "safetensors": "weights",
    "scipy": "statistics",
    "typer": "CLI",
    "rich": "CLI",
    "transformers": "hf extra: import/export, bench peer",
    "polars": "merge and report only",
    "datasets": "data prepare only",
}
"""What each package is for, so a missing one says what will not work (the job path of a GPU
node needs neither polars nor datasets)."""

SDPA_PRESET = "small"
"""Attention shapes that matter: the GPU study's backbone (studies/small_gpu.yaml)."""

SDPA_KERNELS = (  # aten op name fragment -> kernel, most specific first
    ("_scaled_dot_product_flash_attention_for_cpu", "flash (CPU)"),
    ("_scaled_dot_product_flash_attention", "flash"),
    ("_scaled_dot_product_efficient_attention", "memory-efficient"),
    ("_scaled_dot_product_cudnn_attention", "cuDNN"),
    ("_scaled_dot_product_fused_attention_overrideable", "fused (device backend)"),
    ("_scaled_dot_product_attention_math", "math (unfused)"),
)

MICRO = "micro"
MICRO_BATCH = 16
MICRO_VOCAB = 4096  # the smoke study's: a check of the path, not of the embedding's size


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class DeviceReport:
    device: str
    name: str
    facts: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)


@dataclass
class DoctorReport:
    software: dict[str, str]
    devices: list[DeviceReport]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def diagnose(steps: int = 20, compile_check: bool = True) -> DoctorReport:
    """Every check on every device this process sees (the CPU and each CUDA device)."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices += [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    reports = []
    for device in devices:
        report = describe_device(device)
        report.checks.append(attempt("attention (SDPA)", lambda d=device: sdpa_kernels(d)))
        if compile_check:
            report.checks.append(attempt("torch.compile", lambda d=device: compile_works(d)))
        report.checks.append(
            attempt(f"{steps}-step {MICRO} run", lambda d=device: micro_run(d, steps))
        )
        reports.append(report)
    return DoctorReport(software(), reports)


def software() -> dict[str, str]:
    found = {
        "electra-ablate": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "CUDA (torch built with)": torch.version.cuda or "none (CPU build)",
        "cuDNN": str(torch.backends.cudnn.version() or "none"),
    }
    for package, purpose in PACKAGES.items():
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = f"MISSING ({purpose})"
    return found


def describe_device(device: torch.device) -> DeviceReport:
    if device.type == "cpu":
        return DeviceReport(
            str(device),
            platform.processor() or platform.machine(),
            {"threads": torch.get_num_threads(), "precision": "fp32 (bf16 autocast is slow)"},
        )
    props = torch.cuda.get_device_properties(device)
    major, minor = props.major, props.minor
    bf16 = major >= 8  # Ampere and later: bf16 tensor cores
    return DeviceReport(
        str(device),
        props.name,
        {
            "compute capability": f"{major}.{minor}",
            "memory": f"{props.total_memory / 2**30:.1f} GiB",
            "multiprocessors": props.multi_processor_count,
            "bf16": "yes" if bf16 else "no: use fp16 with a gradient scaler",
            "fp16": "yes" if (major, minor) >= (5, 3) else "no",
        },
    )


def attempt(name: str, check: Callable[[], str]) -> Check:
    """Run one check; its failure becomes the row's detail (first line of the error)."""
    try:
        return Check(name, True, check())
    except Exception as exc:  # a doctor reports every failure; it does not stop at one
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Check(name, False, f"{type(exc).__name__}: {first}"[:200])


def sdpa_kernels(device: torch.device) -> str:
    """The SDPA kernel of the ``small`` encoder's forward, as the engine runs it (autocast),
    for full packed rows (no mask) and for a batch with one padded row (a mask)."""
    cfg = preset(SDPA_PRESET)
    encoder = Encoder(cfg).to(device).eval()
    ids = torch.randint(len(SpecialTokens().ids), cfg.vocab_size, (4, cfg.max_seq_len))
    ids = ids.to(device)
    full = torch.ones_like(ids, dtype=torch.bool)
    padded = full.clone()
    padded[0, cfg.max_seq_len // 2 :] = False
    found = []
    for case, mask in (("full rows", full), ("a padded row", padded)):
        with OpNames() as seen, torch.no_grad(), autocast(device):
            encoder(ids, torch.zeros_like(ids), mask)
        kernel = next(
            (label for op, label in SDPA_KERNELS if any(op in n for n in seen.names)), "not seen"
        )
        found.append(f"{case}: {kernel}")
    return f"{SDPA_PRESET} preset, seq {cfg.max_seq_len}: " + "; ".join(found)


class OpNames(TorchDispatchMode):
    """Records the name of every aten op dispatched inside it (SDPA's choice among them)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.names.add(str(func))
        return func(*args, **(kwargs or {}))


def compile_works(device: torch.device) -> str:
    """``torch.compile`` (inductor) builds a small function with a backward and matches eager."""

    def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ w).square().mean()

    x = torch.randn(64, 64, device=device)
    w = torch.randn(64, 64, device=device, requires_grad=True)
    start = time.perf_counter()
    compiled = torch.compile(block)
    value = compiled(x, w)
    value.backward()
    seconds = time.perf_counter() - start
    eager = block(x, w)
    if not torch.allclose(value, eager, rtol=1e-4, atol=1e-5):
        raise RuntimeError(f"compiled {value.item():.6g} != eager {eager.item():.6g}")
    return f"inductor built and ran a forward and backward in {seconds:.1f} s"


def micro_run(device: torch.device, steps: int) -> str:
    """``steps`` ELECTRA steps of the ``micro`` preset through ``Trainer.advance`` (warm-up
    step excluded from the timing); the loss must stay finite."""
    cfg = preset(MICRO).with_overrides(vocab_size=MICRO_VOCAB)
    spec = PretrainSpec(batch_size=MICRO_BATCH)
    objective = build_objective("electra", cfg, {}, Vocab.uniform(cfg.vocab_size))
    flops = objective_flops(objective, cfg.max_seq_len, MICRO_BATCH)
    total = steps + 1
    plan = RunPlan((total,), (flops,), ((1.0, total),))
    with tempfile.TemporaryDirectory() as tmp:
        run = PretrainRun(
            spec=spec,
            plan=plan,
            layout=RunLayout(Path(tmp)),
            seed=0,
            train_batches=PackedBatches(synthetic_rows(cfg, 8 * MICRO_BATCH), MICRO_BATCH, 0),
            heldout_batches=None,
            tokenizer_dir=Path(tmp),
        )
        trainer = Trainer(objective, run, device, progress=False)
        trainer.start_or_resume()
        trainer.advance()  # the first step builds kernels and caches: not timed
        synchronize(device)
        start = time.perf_counter()
        for _ in range(steps):
            trainer.advance()
        synchronize(device)
        seconds = time.perf_counter() - start
    if not all(bool(torch.isfinite(p).all()) for p in objective.parameters()):
        raise RuntimeError(f"non-finite weights after {total} steps")
    rate = steps / seconds
    tokens = rate * MICRO_BATCH * cfg.max_seq_len
    return (
        f"{rate:.1f} steps/s, {tokens:,.0f} tokens/s (ELECTRA, batch {MICRO_BATCH}, seq "
        f"{cfg.max_seq_len}); weights finite"
    )


def synthetic_rows(cfg: Any, rows: int) -> pa.Table:
    """Packed-looking rows of random ordinary ids between [CLS] and [SEP], no padding."""
    special = SpecialTokens()
    rng = np.random.default_rng(0)
    length = cfg.max_seq_len
    ids = rng.integers(len(special.ids), cfg.vocab_size, (rows, length), dtype=np.int32)
    ids[:, 0], ids[:, -1] = special.cls, special.sep
    types = np.zeros((rows, length), dtype=np.int8)
    return pa.table(
        {
            "input_ids": pa.FixedSizeListArray.from_arrays(pa.array(ids.ravel()), length),
            "token_type_ids": pa.FixedSizeListArray.from_arrays(pa.array(types.ravel()), length),
        }
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
