"""The CUDA tests: what only a GPU can show, run where one is (``pytest -m cuda``; the GPU node's
``node.sh test`` step runs them), skipped with a reason where none is.

``ABLATE_CUDA_TESTS_ON=cpu`` runs them on the CPU instead, with the same steps and checks (bf16
autocast exists on the CPU too), so that their logic can be checked on a machine without a GPU
before a node's scarce minutes are spent on them.

Everything is tiny (the ``micro`` preset, a few seeded steps): the whole file took 53 s on an
H200 before the two compiled fine-tunes joined it (their compilations, about half a minute
each, are most of what they add; the session's tests phase allows 150 s).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from ablate_cli import ABLATE, ablate
from engine_helpers import SEQ, VOCAB, make_trainer
from objective_names import BUILT_IN

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.conformance import (
    CONTRACT_SEQ_LEN,
    CONTRACT_VOCAB_SIZE,
    contract_batch,
    contract_settings,
)
from electra_ablate.conformance.task import _contract_kept
from electra_ablate.data.paths import file_hash
from electra_ablate.evaluation.finetune import loop as finetune_loop
from electra_ablate.evaluation.finetune.loop import finetune_task
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.glue.task import GLUE_TASKS
from electra_ablate.evaluation.probes import frozen_features, rtd_probe
from electra_ablate.evaluation.probes.corruption_sources import BigramTable
from electra_ablate.evaluation.task import get_task
from electra_ablate.pretraining.engine import Trainer
from electra_ablate.pretraining.objective import KeptModel

ON = os.environ.get("ABLATE_CUDA_TESTS_ON", "cuda") or "cuda"
if ON not in ("cuda", "cpu"):
    raise ValueError(f"ABLATE_CUDA_TESTS_ON={ON!r}: expected 'cpu' (or unset for 'cuda')")
DEVICE = torch.device(ON)
CPU = torch.device("cpu")

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        ON == "cuda" and not torch.cuda.is_available(),
        reason="no CUDA device (ABLATE_CUDA_TESTS_ON=cpu runs these on the CPU)",
    ),
]

CFG: BackboneConfig = preset("micro").with_overrides(vocab_size=VOCAB, max_seq_len=SEQ)
ONE_LAYER = CFG.with_overrides(num_layers=1)
"""For the compiled step: compile time grows with the traced layers, and one shows what two do."""
UNIFORM = Vocab.uniform(VOCAB)
BATCH = 4
STEPS = 4
"""Planned steps of each objective's run: enough to reach every stage of a staged objective."""
FIRST_STEP_RTOL = 5e-2
"""bf16 keeps 8 bits of mantissa (relative rounding ~4e-3 per product): a first-step loss, from
the same weights and batch, stays within a few per cent of fp32's unless something is computed
in bf16 that must not be (a softmax, a loss, a sampling distribution)."""
LATER_STEP_RTOL = 0.2
"""After an optimizer step the two runs' weights and (for objectives that sample) their samples
part ways; later losses are compared loosely, to catch a blow-up rather than rounding."""


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


class PaddedBatches:
    """The conformance contract's packed batches (one row padded), a pure function of the step."""

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        return contract_batch(VOCAB, batch_size=BATCH, seq_len=SEQ, seed=step)


def trainer(
    run_dir: Path,
    name: str,
    device: torch.device,
    backbone: BackboneConfig = CFG,
    steps_of_budget: int = STEPS,
    **spec: Any,
) -> Trainer:
    """A ``Trainer`` of objective ``name`` on ``device`` over the contract's padded batches,
    logging every step, with no held-out split and no states unless asked."""
    return make_trainer(
        run_dir,
        name,
        steps_of_budget,
        BATCH,
        backbone=backbone,
        device=device,
        train_batches=PaddedBatches(),
        heldout_batches=None,
        checkpoints=(1.0,),
        **{"log_every": 1, "eval_batches": 0, "warmup_fraction": 0.25, "resume_every": 0,
           "compile": False, **spec},
    )  # fmt: skip


def logged_losses(run_dir: Path) -> list[float]:
    """The training loss of each step, as the run logged it (``log_every: 1``)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [row["loss"] for row in rows if row["split"] == "train"]


def train_losses(run_dir: Path, name: str, precision: str, **spec: Any) -> list[float]:
    """Train ``name`` through its whole (tiny) plan on the device; its per-step losses."""
    run = trainer(run_dir, name, DEVICE, precision=precision, **spec)
    summary = run.train()
    sync()
    assert summary["precision"] == precision
    assert all(p.device.type == DEVICE.type for p in run.objective.parameters())
    for p in run.objective.parameters():
        assert p.dtype == torch.float32 and bool(torch.isfinite(p).all())
    losses = logged_losses(run_dir)
    assert len(losses) == summary["steps"] == run.plan.total_steps
    return losses


def assert_close_to_fp32(reduced: list[float], fp32: list[float]) -> None:
    assert all(math.isfinite(v) for v in reduced + fp32), (reduced, fp32)
    assert len(reduced) == len(fp32)
    assert reduced[0] == pytest.approx(fp32[0], rel=FIRST_STEP_RTOL), (reduced, fp32)
    assert reduced == pytest.approx(fp32, rel=LATER_STEP_RTOL), (reduced, fp32)


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_objective_trains_under_bf16_autocast_close_to_fp32(tmp_path: Path, name: str):
    """bf16 autocast is what every CUDA run trains under (``precision: auto``), and the CPU
    suite cannot show what the GPU's bf16 kernels do: each built-in objective (every stage of
    it) takes its planned steps on the device under bf16 and under fp32, from the same weights,
    seed and batches, and its losses stay finite and close."""
    bf16 = train_losses(tmp_path / "bf16", name, "bf16")
    fp32 = train_losses(tmp_path / "fp32", name, "fp32")
    assert_close_to_fp32(bf16, fp32)


def compile_unavailable() -> str | None:
    """Why ``torch.compile`` cannot run on the device here (None: it can, or there is no device
    and the module's own skip says so)."""
    if ON == "cuda" and not torch.cuda.is_available():
        return None
    if importlib.util.find_spec("torch._dynamo") is None:
        return "torch without dynamo (torch.compile)"
    if DEVICE.type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "torch.compile on CUDA needs triton"
    if not any(shutil.which(cc) for cc in ("c++", "g++", "clang++")):
        return "torch.compile on the CPU needs a C++ compiler"
    return None


NO_COMPILE = compile_unavailable()


@pytest.mark.skipif(NO_COMPILE is not None, reason=str(NO_COMPILE))
@pytest.mark.parametrize("mode", [True, "reduce-overhead"], ids=["compile", "cuda-graphs"])
def test_a_compiled_electra_step_under_bf16_stays_close_to_eager_fp32(
    tmp_path: Path, mode: bool | str
):
    """``pretrain.compile: auto`` compiles every CUDA run's forward (the engine's
    ``compiling.compiled``, eager random numbers): the compiled bf16 steps of ELECTRA must keep
    to what eager fp32 computes on the device, as the eager bf16 steps do. ``reduce-overhead``
    replays the step as CUDA graphs, whose outputs the next replay overwrites: the run must
    neither fall back to eager nor read a metric a later step rewrote."""
    if mode == "reduce-overhead" and DEVICE.type != "cuda":
        pytest.skip("CUDA graphs need CUDA")
    name = "electra"
    compiled = trainer(
        tmp_path / "compiled", name, DEVICE, ONE_LAYER, precision="bf16", compile=mode
    )
    summary = compiled.train()
    sync()
    assert summary["compiled"] is True, summary.get("compile_error")
    assert compiled.forward is not compiled.model, "the forward was not compiled"
    fused = logged_losses(tmp_path / "compiled")
    eager = trainer(tmp_path / "eager", name, DEVICE, ONE_LAYER, precision="fp32")
    eager.train()
    assert_close_to_fp32(fused, logged_losses(tmp_path / "eager"))


@pytest.fixture
def loss_calls(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """Every fine-tuning loss, as computed (on the device the logits are on)."""
    calls: list[torch.Tensor] = []
    real = finetune_loop._loss

    def recorded(logits: torch.Tensor, labels: torch.Tensor, is_regression: bool) -> torch.Tensor:
        loss = real(logits, labels, is_regression)
        calls.append(loss.detach())
        return loss

    monkeypatch.setattr(finetune_loop, "_loss", recorded)
    return calls


def test_a_fine_tuning_step_on_the_device_is_finite(loss_calls: list[torch.Tensor]):
    """A study fine-tunes every checkpoint on the device it pre-trained on, under bf16 autocast
    (``precision: auto`` on CUDA) with a fused AdamW: one step of it runs there, its loss is
    finite, its dev predictions too, and the kept encoder it started from is left on the CPU,
    unchanged."""
    torch.manual_seed(0)
    kept = LoadedKept(KeptModel(Encoder(CFG), "discriminator", TokenBinaryHead(CFG)), {}, None)
    before = {k: v.clone() for k, v in kept.model.encoder.state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    rows = [
        {
            "input_ids": [2, *torch.randint(5, VOCAB, (8,), generator=generator).tolist(), 3],
            "token_type_ids": [0] * 10,
            "label": i % 2,
        }
        for i in range(8)
    ]
    recipe = FinetuneRecipe(epochs=1, batch_size=8, task_epochs={}, precision="bf16")
    result = finetune_task(kept, GLUE_TASKS["sst2"], rows, rows, recipe, seed=0, device=DEVICE)
    sync()
    assert len(loss_calls) == 1, "one optimizer step"
    (loss,) = loss_calls
    assert loss.device.type == DEVICE.type and loss.dtype == torch.float32
    assert math.isfinite(float(loss))
    assert math.isfinite(result["accuracy"])
    for key, value in kept.model.encoder.state_dict().items():
        assert value.device == CPU and torch.equal(value, before[key]), key


def marker_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """A task a micro encoder learns in a few dozen steps: is token 7 in the sentence?"""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(n):
        length = int(torch.randint(4, 20, (1,), generator=generator))
        body = torch.randint(8, VOCAB, (length,), generator=generator).tolist()
        if i % 2:
            body[length // 2] = 7
        rows.append(
            {"input_ids": [2, *body, 3], "token_type_ids": [0] * (length + 2), "label": i % 2}
        )
    return rows


@pytest.mark.parametrize("mode", [True, "reduce-overhead"], ids=["compile", "cuda-graphs"])
def test_a_compiled_fine_tune_on_the_device_keeps_to_the_eager_one(
    mode: bool | str, loss_calls: list[torch.Tensor], recwarn: pytest.WarningsRecorder
):
    """``finetune.recipe.compile`` on the device, under bf16 autocast: the same seed's first
    loss as eager (same head, same batch, eager random numbers), the later ones and the dev
    accuracy close, and no fall-back to eager. ``reduce-overhead`` replays the step as CUDA
    graphs, one per batch shape, which is what takes a fine-tuning step off the host."""
    if mode == "reduce-overhead" and DEVICE.type != "cuda":
        pytest.skip("CUDA graphs need a CUDA device")
    torch.manual_seed(0)
    kept = LoadedKept(
        KeptModel(Encoder(ONE_LAYER), "discriminator", TokenBinaryHead(ONE_LAYER)), {}, None
    )
    train, dev = marker_rows(128, 0), marker_rows(64, 1)
    recipe = FinetuneRecipe(lr=3e-3, epochs=3, batch_size=16, task_epochs={}, precision="bf16")
    eager = finetune_task(kept, GLUE_TASKS["sst2"], train, dev, recipe, seed=0, device=DEVICE)
    eager_losses = [float(v) for v in loss_calls]
    loss_calls.clear()
    fused = finetune_task(
        kept, GLUE_TASKS["sst2"], train, dev, recipe.model_copy(update={"compile": mode}), 0, DEVICE
    )
    sync()
    assert not [w for w in recwarn if "torch.compile failed" in str(w.message)]
    losses = [float(v) for v in loss_calls]
    assert len(losses) == len(eager_losses) == 24
    assert losses[0] == pytest.approx(eager_losses[0], rel=FIRST_STEP_RTOL)
    assert losses == pytest.approx(eager_losses, rel=LATER_STEP_RTOL, abs=0.05)
    assert fused["accuracy"] == pytest.approx(eager["accuracy"], abs=5.0)


LENGTH_BUCKETS = (8, 16, SEQ)
"""``marker_rows`` are 6 to 21 tokens long: every bucket is used."""


@pytest.mark.skipif(NO_COMPILE is not None, reason=str(NO_COMPILE))
def test_a_bucketed_fine_tune_replayed_as_cuda_graphs_keeps_to_the_eager_one(
    loss_calls: list[torch.Tensor],
    recwarn: pytest.WarningsRecorder,
    monkeypatch: pytest.MonkeyPatch,
):
    """``padding: buckets`` with ``compile: reduce-overhead``, what takes a fine-tuning step
    off the host with one CUDA graph per bucket: under bf16 autocast, every batch is a bucket
    long, the first loss is the eager bucketed fine-tune's (same head, batch and dropout
    draws), the later ones and the dev accuracy close, and nothing falls back to eager. On the
    CPU stand-in, where CUDA graphs do not exist, the same steps run compiled
    (``compile: true``)."""
    mode = "reduce-overhead" if DEVICE.type == "cuda" else True
    lengths: list[int] = []
    real_collate = finetune_loop.collate

    def collate(*args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        batch = real_collate(*args, **kwargs)
        lengths.append(int(batch["input_ids"].shape[1]))
        return batch

    monkeypatch.setattr(finetune_loop, "collate", collate)
    torch.manual_seed(0)
    kept = LoadedKept(
        KeptModel(Encoder(ONE_LAYER), "discriminator", TokenBinaryHead(ONE_LAYER)), {}, None
    )
    train, dev = marker_rows(128, 0), marker_rows(64, 1)
    recipe = FinetuneRecipe(
        lr=3e-3, epochs=3, batch_size=16, task_epochs={}, precision="bf16", max_len=SEQ,
        padding="buckets", length_buckets=LENGTH_BUCKETS,
    )  # fmt: skip
    eager = finetune_task(kept, GLUE_TASKS["sst2"], train, dev, recipe, seed=0, device=DEVICE)
    eager_losses = [float(v) for v in loss_calls]
    loss_calls.clear()
    lengths.clear()
    graphs = recipe.model_copy(update={"compile": mode})
    fused = finetune_task(kept, GLUE_TASKS["sst2"], train, dev, graphs, 0, DEVICE)
    sync()
    assert not [w for w in recwarn if "torch.compile failed" in str(w.message)]
    assert set(lengths) == set(LENGTH_BUCKETS), lengths
    losses = [float(v) for v in loss_calls]
    assert len(losses) == len(eager_losses) == 24
    assert losses[0] == pytest.approx(eager_losses[0], rel=FIRST_STEP_RTOL)
    assert losses == pytest.approx(eager_losses, rel=LATER_STEP_RTOL, abs=0.05)
    assert fused["accuracy"] == pytest.approx(eager["accuracy"], abs=5.0)


@pytest.fixture
def encoder_devices(monkeypatch: pytest.MonkeyPatch) -> list[torch.device]:
    """Where each of a probe's encoder passes ran; the probes' feature cache emptied, so that
    the encoder really runs."""
    devices: list[torch.device] = []
    real = frozen_features._hidden

    def hidden(model: KeptModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        out = real(model, batch)
        devices.append(out.device)
        return out

    monkeypatch.setattr(frozen_features, "_hidden", hidden)
    monkeypatch.setattr(rtd_probe, "_FEATURES", {})
    return devices


def probe_text_in_memory(kept: LoadedKept) -> rtd_probe.ProbeText:
    """Held-out text for the RTD probe, made here rather than read from a study's data cache
    (building one needs ``datasets``, which a GPU node does not have): packed contract rows in
    the kept encoder's vocabulary, one of them padded."""
    ids = contract_batch(CONTRACT_VOCAB_SIZE, batch_size=48, seq_len=CONTRACT_SEQ_LEN)
    vocab = Vocab.uniform(CONTRACT_VOCAB_SIZE)
    input_ids = ids["input_ids"].numpy()
    return rtd_probe.ProbeText(
        input_ids=input_ids,
        token_type_ids=ids["token_type_ids"].numpy(),
        vocab=vocab,
        bigrams=BigramTable.from_sequences(input_ids, CONTRACT_VOCAB_SIZE, vocab.special.ids),
        tokenizer_hash=file_hash(Path(kept.tokenizer_dir) / "tokenizer.json"),
    )


def test_a_probe_fits_on_frozen_features_computed_on_the_device(
    encoder_devices: list[torch.device], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """A study's probes run the frozen encoder on the device (``on_device``) and fit there too:
    the replaced-token-detection probe's encoder passes run on the device, its logistic probe
    is fitted on the device's copy of what they computed, to a finite AUC, and the model is
    handed back to the CPU."""
    fitted_on: list[torch.device] = []
    real_probe = rtd_probe.detection_probe

    def detection_probe(train_x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        fitted_on.append(train_x.device)
        return real_probe(train_x, *args, **kwargs)

    monkeypatch.setattr(rtd_probe, "detection_probe", detection_probe)
    task = get_task("rtd_unigram")
    kept = _contract_kept(tmp_path / "kept", "discriminator")
    text = probe_text_in_memory(kept)
    monkeypatch.setattr(rtd_probe, "probe_text", lambda *args, **kwargs: text)
    result = task.evaluate(kept, contract_settings(task, sources={}), 0, device=DEVICE)
    sync()
    assert encoder_devices and {d.type for d in encoder_devices} == {DEVICE.type}
    assert [d.type for d in fitted_on] == [DEVICE.type]
    assert math.isfinite(result["roc_auc"]) and 0.0 <= result["roc_auc"] <= 100.0, result
    assert result["train_examples"] > 0 and result["eval_examples"] > 0, result
    assert {p.device for p in kept.model.encoder.parameters()} == {CPU}, "handed back"
    assert {p.device for p in kept.model.head.parameters()} == {CPU}, "handed back"


def cpu_parameters(run: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().to(CPU, copy=True) for k, v in run.objective.state_dict().items()}


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_state_saved_on_the_device_resumes_on_the_cpu_and_back(tmp_path: Path):
    """A job on a GPU node is stopped at its time limit, and its training state may be resumed
    on another machine: a state saved on the device resumes on the CPU with equal weights and
    trains on there, and the CPU's next state resumes on the device with equal weights and
    trains on there too (optimizer moments, a fused AdamW's step counters, RNG included)."""
    budget = 9
    spec = {"resume_every": 3}
    device_run = trainer(tmp_path, "electra", DEVICE, steps_of_budget=budget, **spec)
    device_run.train(stop_at=3)
    sync()
    saved_on_device = cpu_parameters(device_run)
    assert (tmp_path / "states").is_dir()

    cpu_run = trainer(tmp_path, "electra", CPU, steps_of_budget=budget, **spec)
    cpu_run.start_or_resume()
    assert cpu_run.step == 3
    assert {p.device for p in cpu_run.objective.parameters()} == {CPU}
    assert_same(cpu_parameters(cpu_run), saved_on_device)
    cpu_run.train(stop_at=6)
    saved_on_cpu = cpu_parameters(cpu_run)
    assert cpu_run.step == 6
    assert not all(torch.equal(saved_on_cpu[k], saved_on_device[k]) for k in saved_on_cpu)

    back = trainer(tmp_path, "electra", DEVICE, steps_of_budget=budget, **spec)
    back.start_or_resume()
    assert back.step == 6
    assert {p.device.type for p in back.objective.parameters()} == {DEVICE.type}
    assert_same(cpu_parameters(back), saved_on_cpu)
    summary = back.train()
    sync()
    assert summary["steps"] == back.plan.total_steps > 6
    assert all(math.isfinite(v) for v in logged_losses(tmp_path))


PACK_SPEC = """\
name: cudapack
description: one objective on micro for a few steps; the CUDA tests' study to pack
data:
  corpus:
    paths: ["${ABLATE_DATA_DIR}/corpus/gutenberg/*.txt.gz"]
    max_documents: 50
  tokenizer:
    vocab_size: 512
  glue: ${ABLATE_DATA_DIR}/glue
backbone:
  preset: micro
budget:
  steps: 4
  steps_of: electra
  checkpoints: [1.0]
pretrain:
  batch_size: 8
  log_every: 2
  eval_batches: 1
  compile: false
objectives:
  - {name: electra}
finetune:
  tasks: [rte]
  seeds: [0]
  checkpoints: [1.0]
  caps: {rte: 16}
  eval_caps: {rte: 16}
  recipe: {epochs: 1, task_epochs: {}}
device: cpu
"""


def pack_members(pack: Path) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(pack) as archive:
        for member in archive.getmembers():
            if member.isfile():
                handle = archive.extractfile(member)
                assert handle is not None
                yield member.name, handle.read()


def test_a_study_run_on_the_device_packs(shared_data: Path, tmp_path: Path):
    """What a GPU node sends home is an ``ablate pack`` of a study it ran there: a micro study
    run on the device through the installed ``ablate`` (``python -m electra_ablate`` where the
    console script is not on the path) with ``--set device=cuda`` finishes, and its pack holds
    the results, the device and the precision it ran with (bf16: ``auto`` on CUDA), and no
    weights. Skipped without the raw data (``$ABLATE_DATA_DIR``) or the packages that build a
    study's data cache from it."""
    for module in ("datasets", "polars"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"building and tabling a study needs {module}, which is not installed")
    spec = tmp_path / "cudapack.yaml"
    spec.write_text(PACK_SPEC)
    out = tmp_path / "runs" / "cudapack"
    env = {
        **os.environ,
        "ABLATE_DATA_DIR": str(shared_data),
        "ABLATE_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        # ``python -m`` would put the repository first on the path, whose source tree lacks
        # ``electra_ablate.objectives`` (installed from ``objectives/``): run what is installed
        "PYTHONSAFEPATH": "1",
    }
    env.pop("ABLATE_DEBUG", None)
    precision = "bf16" if DEVICE.type == "cuda" else "fp32"  # precision: auto
    as_module = ABLATE is None  # no console script on the path: ``python -m electra_ablate``
    device = f"device={ON}"
    run = ablate(
        "run", spec, "--out", out, "--no-progress", "--set", device, env=env, module=as_module
    )
    assert run.returncode == 0, run.stderr
    packed = ablate("pack", out, env=env, module=as_module)
    assert packed.returncode == 0, packed.stderr
    pack = out.parent / "cudapack.pack.tar.gz"
    files = dict(pack_members(pack))
    names = {Path(name).name for name in files}
    assert {"pack.json", "study.json", "results.parquet", "runs.parquet"} <= names, names
    assert not [n for n in names if n.endswith((".safetensors", ".pt", ".bin"))], names
    (study,) = [v for k, v in files.items() if k.endswith("/study.json")]
    assert json.loads(study)["spec"]["device"] == ON
    (done,) = [json.loads(v) for k, v in files.items() if k.endswith("/done.json")]
    assert done["status"] == "done" and done["precision"] == precision, done
    finetunes = [json.loads(v) for k, v in files.items() if "/finetune/" in k]
    assert finetunes and all(f["status"] == "done" for f in finetunes), finetunes
    assert all(f["precision"] == precision for f in finetunes), finetunes
