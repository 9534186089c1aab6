"""Small deterministic pieces for engine tests: synthetic packed batches and a trainer factory."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from safetensors.torch import load_file

from electra_ablate.backbone.config import BackboneConfig, preset
from electra_ablate.backbone.model import Encoder, MLMHead, gather_positions
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.tracking import Tracking
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine import Distributed, PretrainRun, Trainer, plan_run
from electra_ablate.pretraining.flops import stage_step_flops
from electra_ablate.pretraining.objective import (
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    StepOutput,
)
from electra_ablate.pretraining.registry import build_objective

SPECIAL = SpecialTokens()
VOCAB = 97
SEQ = 24
CFG = preset("micro").with_overrides(vocab_size=VOCAB, max_seq_len=SEQ)
UNIFORM = Vocab.uniform(VOCAB, SPECIAL)


class SyntheticBatches:
    """Random token sequences whose batch at a step depends only on (seed, step, rank)."""

    def __init__(self, batch_size: int, seed: int = 0, rank: int = 0, world_size: int = 1):
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + step)
        total = self.batch_size * self.world_size
        ids = torch.randint(len(SPECIAL.ids), VOCAB, (total, SEQ), generator=g)
        ids[:, 0], ids[:, -1] = SPECIAL.cls, SPECIAL.sep
        ids = ids[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]
        return {
            "input_ids": ids,
            "token_type_ids": torch.zeros_like(ids),
            "attention_mask": torch.ones_like(ids),
        }


def make_trainer(
    run_dir: Path,
    objective_name: str = "electra",
    steps_of_budget: int = 12,
    batch_size: int = 4,
    params: dict | None = None,
    backbone: BackboneConfig = CFG,
    device: torch.device | str = "cpu",
    train_batches: Any = None,
    heldout_batches: Any = "synthetic",
    checkpoints: tuple[float, ...] = (0.5, 1.0),
    tracking: Tracking | None = None,
    **spec_overrides: Any,
) -> Trainer:
    """A ``Trainer`` as ``ablate run`` builds one: the weights initialised on the CPU from seed
    0 (the same whatever the device), then moved to ``device``. ``train_batches`` default to
    ``SyntheticBatches``; ``heldout_batches`` to another seed of them (None: no held-out split);
    ``tracking``: the trackers its rows go to; ``spec_overrides`` replace the small recipe
    below."""
    torch.manual_seed(0)
    objective = build_objective(objective_name, backbone, params or {}, UNIFORM)
    recipe = dict(log_every=2, eval_batches=1, learning_rate=1e-3, warmup_fraction=0.2)
    spec = PretrainSpec(batch_size=batch_size, **{**recipe, "resume_every": 3, **spec_overrides})
    seq = backbone.max_seq_len
    per_step = sum(s.fraction * f for s, f in stage_step_flops(objective, seq, batch_size, "paper"))
    plan = plan_run(objective, steps_of_budget * per_step, "paper", batch_size, seq, checkpoints)
    tokenizer_dir = run_dir / "tok"
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    run = PretrainRun(
        spec=spec,
        plan=plan,
        layout=RunLayout(run_dir),
        seed=0,
        train_batches=train_batches or SyntheticBatches(batch_size),
        heldout_batches=(
            SyntheticBatches(batch_size, seed=99)
            if heldout_batches == "synthetic"
            else heldout_batches
        ),
        tokenizer_dir=tokenizer_dir,
        meta={"objective": objective_name},
        tracking=tracking,
    )
    return Trainer(objective, run, torch.device(device), progress=False)


class DeterministicMLM(Objective):
    """MLM with a fixed mask (every 5th maskable token) and no dropout: no randomness at all,
    so a 2-process run must match a 1-process run of the same global batch to float precision."""

    name = "deterministic_mlm_test"
    description = "test only"

    def __init__(self, backbone, params, vocab):
        super().__init__(backbone, params, vocab)
        self.encoder = Encoder(backbone)
        self.head = MLMHead(backbone, backbone.embedding_size)

    def forward(self, batch):
        ids = batch["input_ids"]
        positions = torch.arange(1, ids.shape[1] - 1, 5, device=ids.device)
        positions = positions.expand(ids.shape[0], -1)
        hidden = self.encoder(ids.scatter(1, positions, SPECIAL.mask))
        logits = self.head(gather_positions(hidden, positions), self.encoder.embeddings.word.weight)
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), ids.gather(1, positions).flatten()
        )
        return StepOutput(loss, {"mlm_loss": loss.detach()})

    def kept_model(self):
        return KeptModel(self.encoder, "mlm", self.head)

    def flops_plan(self, seq_len):
        return [ModelPass(self.backbone, "mlm", len(range(1, seq_len - 1, 5)))]


def deterministic_trainer(run_dir: Path, global_batch: int, rank: int, world_size: int) -> Trainer:
    torch.manual_seed(0)
    cfg = CFG.with_overrides(dropout=0.0, attention_dropout=0.0)
    objective = DeterministicMLM(cfg, ObjectiveParams(), UNIFORM)
    spec = PretrainSpec(
        batch_size=global_batch,
        log_every=2,
        eval_batches=0,
        learning_rate=1e-3,
        warmup_fraction=0.2,
        resume_every=0,
    )
    per_step = stage_step_flops(objective, SEQ, global_batch, "paper")[0][1]
    plan = plan_run(objective, 6 * per_step, "paper", global_batch, SEQ, [1.0])
    tokenizer_dir = run_dir / "tok"
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    local = global_batch // world_size
    dist_ctx = Distributed.from_env(torch.device("cpu"))
    run = PretrainRun(
        spec=spec,
        plan=plan,
        layout=RunLayout(run_dir),
        seed=0,
        train_batches=SyntheticBatches(local, rank=rank, world_size=world_size),
        heldout_batches=None,
        tokenizer_dir=tokenizer_dir,
    )
    return Trainer(objective, run, torch.device("cpu"), dist_ctx, progress=False)


def become_rank(rank: int, world_size: int, store: str, timeout: timedelta | None = None) -> None:
    """Make this spawned process rank ``rank`` of a local gloo group, as torchrun would, on one
    torch thread (two ranks share the test machine's cores). The ranks meet in ``store``, a
    file of the test's own ``tmp_path``, not on a TCP port: a port picked free beforehand can be
    taken by another test's group (xdist runs them at the same time) before rank 0 binds it.
    ``timeout``: the group's (torch's default where None)."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        store=dist.FileStore(store, world_size),
        rank=rank,
        world_size=world_size,
        timeout=timeout,
    )


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    state = sorted((run_dir / "states").glob("step-*"))[-1]
    return load_file(str(state / "model.safetensors"))


def metric_rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("tokens_per_s", None)
    return rows


def assert_same_run(a: Path, b: Path) -> None:
    """Two runs ended with the same weights and logged the same rows (speed aside)."""
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    assert metric_rows(a) == metric_rows(b)


class Crash(Exception):
    """Raised from a batch to stop a run mid-way, as a crash would."""


def pair_batch(
    vocab: int, seed: int = 0, batch: int = 4, length: int = 32
) -> dict[str, torch.Tensor]:
    """Random sentence pairs ``[CLS] a [SEP] b [SEP]`` over ``vocab`` ids, the second row
    padded from position 20: where objectives must tell segments, specials and padding apart."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(len(SPECIAL.ids), vocab, (batch, length), generator=g)
    ids[:, 0] = SPECIAL.cls
    ids[:, length // 2] = SPECIAL.sep
    ids[:, -1] = SPECIAL.sep
    ids[1, 20:] = SPECIAL.pad  # one padded row
    ids[1, 19] = SPECIAL.sep
    types = torch.zeros_like(ids)
    types[:, length // 2 + 1 :] = 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": ids != SPECIAL.pad}
