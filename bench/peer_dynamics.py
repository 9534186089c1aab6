"""Learning dynamics of replaced-token detection: our discriminator against Hugging Face
``transformers``' ``ElectraForPreTraining``, trained side by side.

Both sides get the same everything but the implementation: the objectives study's data (its
tokenizer and packed corpus, ``studies/objectives.yaml``), its backbone and recipe (batch 32, lr
5e-4, 10% warm-up then constant, AdamW as the engine configures it, clipping at 1.0), the same
initial weights (ours exported into theirs with ``export.hf_state_dict``), the same batch at each
step, and the same corruption at each step, drawn once and given to both. The corruption source
is fixed rather than a jointly trained generator, so both detectors chase the same target:
``unigram`` replacements (the paper's unigram generator, and what every generator on its unigram
plateau samples), another fixed source of ``evaluation.corruption_sources``, or ``generator``:
samples from a trained MLM (a kept MLM encoder, e.g. BERT MLM's, ``--generator KEPT_DIR``) at the
same positions.

At every ``--eval-every`` steps both are scored on the same corrupted held-out split: ROC-AUC over
ordinary tokens (``[CLS]``/``[SEP]`` are never replaced, so a detector knowing only that would
look better than chance over every token) and the detection loss, beside the label entropy (the
loss of predicting the base rate). The count-based bigram detector's AUC on the same held-out
replacements is the reference: the signal the data holds for a detector that reads two
neighbours.

    ABLATE_DATA_DIR=/work/shared/data python bench/peer_dynamics.py --steps 1000 --eval-every 100
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.tokens import Vocab
from electra_ablate.checkpoints.export import hf_config, hf_state_dict
from electra_ablate.checkpoints.kept import LoadedKept, load_kept
from electra_ablate.data.batches import PackedBatches, column_matrix
from electra_ablate.data.pretraining import PretrainingData, prepare_pretraining
from electra_ablate.evaluation.probes.corruption_sources import (
    CORRUPTION_SOURCES,
    BigramTable,
    CorruptedText,
    corrupt,
    select_positions,
)
from electra_ablate.evaluation.probes.reference_detectors import bigram_detector_scores
from electra_ablate.pretraining.components import (
    Discriminator,
    binary_entropy,
    maskable,
    masked_mean,
    non_pad,
    roc_auc,
    rtd_loss,
    sample_tokens,
    sampling_log_probs,
)
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine import learning_rate
from electra_ablate.pretraining.engine.plan import RunPlan
from electra_ablate.pretraining.flops import CONVENTIONS
from electra_ablate.pretraining.objective import Batch
from electra_ablate.scaleout.node.measure import adamw
from electra_ablate.spec import load_spec
from electra_ablate.study.context import data_vocab

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SIDES = ("ours", "peer")
EVAL_ROWS_PER_FORWARD = 32
HELDOUT_SEED = 0  # the held-out corruption: the seed evaluation.corruption_sources' table used


@dataclass
class Setup:
    data: PretrainingData
    vocab: Vocab
    backbone: BackboneConfig
    recipe: PretrainSpec
    bigrams: BigramTable


def load_setup(spec_path: Path, dropout: float | None) -> Setup:
    """The study's data (built or taken from the cache, as ``ablate run`` does), its vocabulary
    statistics, backbone and pre-training recipe, and the bigram counts of its training split."""
    spec = load_spec(spec_path)
    data = prepare_pretraining(
        spec.data, spec.backbone_config().max_seq_len, spec_dir=spec.spec_dir
    )
    backbone = spec.backbone_config(vocab_size=data.vocab_size)
    if dropout is not None:
        backbone = backbone.with_overrides(dropout=dropout, attention_dropout=dropout)
    train_ids = column_matrix(data.train, "input_ids")
    bigrams = BigramTable.from_sequences(train_ids, data.vocab_size, data.special.ids)
    return Setup(data, data_vocab(data), backbone, spec.pretrain, bigrams)


def heldout_batch(data: PretrainingData, rows: int | None) -> Batch:
    ids = torch.from_numpy(column_matrix(data.heldout, "input_ids").astype("int64"))
    types = torch.from_numpy(column_matrix(data.heldout, "token_type_ids").astype("int64"))
    if rows is not None:
        ids, types = ids[:rows], types[:rows]
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": ids != data.special.pad}


# --------------------------------------------------------------------------- corruption
class Corrupter:
    """The corruption both sides see: a fixed source of ``corruption_sources``, or samples from
    a trained MLM at the positions those sources would pick (same rate, same rule)."""

    def __init__(self, source: str, setup: Setup, generator_dir: Path | None, rate: float):
        self.source, self.setup, self.rate = source, setup, rate
        self.generator: LoadedKept | None = None
        if source == "generator":
            if generator_dir is None:
                raise SystemExit("--source generator needs --generator KEPT_DIR (an MLM encoder)")
            self.generator = load_kept(generator_dir)
            if self.generator.model.role != "mlm":
                raise SystemExit(f"{generator_dir} holds a {self.generator.model.role}, not an MLM")
            ours = (setup.data.tokenizer_dir / "vocab.txt").read_text(encoding="utf-8")
            theirs = (self.generator.tokenizer_dir / "vocab.txt").read_text(encoding="utf-8")
            if ours != theirs:
                raise SystemExit(f"{generator_dir} was trained with another vocabulary")
            self.generator.model.encoder.eval()
            self.generator.model.head.eval()

    def __call__(self, batch: Batch, seed: int) -> CorruptedText:
        if self.generator is None:
            return corrupt(
                batch["input_ids"],
                self.source,
                self.setup.vocab,
                self.setup.bigrams,
                rate=self.rate,
                seed=seed,
            )
        return self.generator_samples(batch, seed)

    @torch.no_grad()
    def generator_samples(self, batch: Batch, seed: int) -> CorruptedText:
        """[MASK] at the selected positions, the MLM's distribution there (without special
        tokens, as our generators sample), one sample each; seeded, whatever the global RNG."""
        assert self.generator is not None
        special = self.setup.vocab.special
        original = batch["input_ids"]
        replaceable = maskable(original, special)
        rng = torch.Generator().manual_seed(seed)
        selected = select_positions(replaceable, self.rate, rng)
        kept = self.generator.model
        hidden = kept.encoder(
            original.masked_fill(selected, special.mask),
            batch["token_type_ids"],
            batch["attention_mask"],
        )
        logits = kept.head(hidden[selected], kept.encoder.embeddings.word.weight)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            samples = sample_tokens(sampling_log_probs(logits, special, temperature=1.0))
        corrupted = original.clone()
        corrupted[selected] = samples
        return CorruptedText(original, corrupted, corrupted != original, replaceable, selected)


# ------------------------------------------------------------------------------- models
def build_pair(backbone: BackboneConfig, seed: int) -> tuple[Discriminator, torch.nn.Module]:
    """Our discriminator (seeded init, as the engine's) and ``ElectraForPreTraining`` holding
    the same weights."""
    from transformers import ElectraConfig, ElectraForPreTraining

    torch.manual_seed(seed)
    ours = Discriminator(backbone)
    peer = ElectraForPreTraining(ElectraConfig(**hf_config(backbone, "discriminator")))
    peer.load_state_dict(hf_state_dict(ours.kept()), strict=True)
    return ours, peer


def logits_of(side: str, model: torch.nn.Module, batch: Batch, corrupted: torch.Tensor):
    """One "replaced" logit per token, [B, L]."""
    if side == "ours":
        return model(batch, corrupted)
    return model(
        corrupted,
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"],
    ).logits


def train_loss(side: str, model: torch.nn.Module, batch: Batch, c: CorruptedText, pad: int):
    """Each implementation's own detection loss: ours through ``Discriminator.detect`` (as
    the objectives compute it), theirs through ``ElectraForPreTraining(labels=...)``."""
    if side == "ours":
        weights = non_pad(batch, pad)
        return model.detect(batch, c.corrupted, c.replaced.long(), weights, c.replaceable).loss
    return model(
        c.corrupted,
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"],
        labels=c.replaced.long(),
    ).loss


@torch.no_grad()
def evaluate(side: str, model: torch.nn.Module, batch: Batch, c: CorruptedText, pad: int):
    """Held-out detection loss (over non-[PAD] tokens), ROC-AUC over ordinary tokens, and
    ROC-AUC over every non-[PAD] token (the figure logged before on-policy metrics left out
    ``[CLS]``/``[SEP]``, kept for comparison with older numbers)."""
    model.eval()
    chunks = []
    for start in range(0, len(c.corrupted), EVAL_ROWS_PER_FORWARD):
        rows = slice(start, start + EVAL_ROWS_PER_FORWARD)
        part = {k: v[rows] for k, v in batch.items()}
        chunks.append(logits_of(side, model, part, c.corrupted[rows]))
    model.train()
    logits = torch.cat(chunks)
    scored = non_pad(batch, pad)
    loss = rtd_loss(logits, c.replaced, scored)
    auc = roc_auc(logits, c.replaced, c.replaceable)
    return float(loss), float(auc), float(roc_auc(logits, c.replaced, scored))


# -------------------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> dict[str, object]:
    started = time.perf_counter()
    setup = load_setup(args.spec, args.dropout)
    recipe = setup.recipe
    pad = setup.vocab.special.pad
    corrupter = Corrupter(args.source, setup, args.generator, args.rate)
    heldout = heldout_batch(setup.data, args.heldout_rows)
    heldout_c = corrupter(heldout, HELDOUT_SEED)
    bigram_auc = heldout_c.detection_auc(bigram_detector_scores(heldout_c.corrupted, setup.bigrams))
    heldout_rate = masked_mean(heldout_c.replaced.float(), non_pad(heldout, pad))
    ordinary_rate = masked_mean(heldout_c.replaced.float(), heldout_c.replaceable)
    setup_s = time.perf_counter() - started
    print(
        f"held-out: {len(heldout['input_ids'])} sequences, {args.source} replacements, label "
        f"entropy {float(binary_entropy(heldout_rate)):.4f} nats (replaced rate "
        f"{float(heldout_rate):.4f} of non-pad tokens); bigram detector AUC {bigram_auc:.4f}",
        flush=True,
    )

    models = dict(zip(SIDES, build_pair(setup.backbone, args.seed), strict=True))
    optimizers = {side: adamw(m.parameters(), recipe) for side, m in models.items()}
    plan = RunPlan((args.steps,), (dict.fromkeys(CONVENTIONS, 0.0),), ())
    batches = PackedBatches(setup.data.train, recipe.batch_size, seed=args.seed)
    for model in models.values():
        model.train()

    curve: list[dict[str, float]] = []
    window: dict[str, list[float]] = {side: [] for side in SIDES}
    seconds = dict.fromkeys(SIDES, 0.0)

    def record(step: int) -> None:
        row: dict[str, float] = {"step": step, "lr": learning_rate(plan, max(step - 1, 0), recipe)}
        for side in SIDES:
            losses = window[side]
            row[f"{side}_train_loss"] = sum(losses) / len(losses) if losses else float("nan")
            loss, auc, auc_incl_special = evaluate(side, models[side], heldout, heldout_c, pad)
            row[f"{side}_heldout_loss"], row[f"{side}_heldout_auc"] = loss, auc
            row[f"{side}_heldout_auc_incl_special"] = auc_incl_special
            window[side] = []
        curve.append(row)
        print_row(row, first=len(curve) == 1)

    record(0)
    for step in range(args.steps):
        batch = batches.batch(step)
        c = corrupter(batch, seed=args.seed * 1_000_003 + step + 1)
        lr = learning_rate(plan, step, recipe)
        for side in SIDES:
            tick = time.perf_counter()
            for group in optimizers[side].param_groups:
                group["lr"] = lr
            loss = train_loss(side, models[side], batch, c, pad)
            optimizers[side].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(models[side].parameters(), recipe.grad_clip)
            optimizers[side].step()
            window[side].append(float(loss.detach()))
            seconds[side] += time.perf_counter() - tick
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            record(step + 1)

    return {
        "command": " ".join(["python", "bench/peer_dynamics.py", *sys.argv[1:]]),
        "spec": str(args.spec),
        "source": args.source,
        "steps": args.steps,
        "batch_size": recipe.batch_size,
        "backbone": setup.backbone.model_dump(),
        "heldout_rows": len(heldout["input_ids"]),
        "heldout_replaced_rate_non_pad": float(heldout_rate),
        "heldout_label_entropy": float(binary_entropy(heldout_rate)),
        "heldout_replaced_rate_ordinary": float(ordinary_rate),
        "bigram_detector_auc": bigram_auc,
        "seconds_per_step": {side: seconds[side] / max(args.steps, 1) for side in SIDES},
        "setup_s": setup_s,
        "wall_s": time.perf_counter() - started,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "curve": curve,
    }


COLUMNS = (
    ("step", "step", "{:>6.0f}"),
    ("lr", "lr", "{:>8.1e}"),
    ("ours_train_loss", "train loss ours", "{:>15.4f}"),
    ("peer_train_loss", "peer", "{:>7.4f}"),
    ("ours_heldout_loss", "held-out loss ours", "{:>18.4f}"),
    ("peer_heldout_loss", "peer", "{:>7.4f}"),
    ("ours_heldout_auc", "held-out AUC ours", "{:>17.4f}"),
    ("peer_heldout_auc", "peer", "{:>7.4f}"),
)


def print_row(row: dict[str, float], first: bool) -> None:
    if first:
        widths = [len(fmt.format(0.0)) for _, _, fmt in COLUMNS]
        print(" ".join(f"{title:>{w}}" for (_, title, _), w in zip(COLUMNS, widths, strict=True)))
    print(" ".join(fmt.format(row[key]) for key, _, fmt in COLUMNS), flush=True)


def print_summary(result: dict[str, object]) -> None:
    per_step = result["seconds_per_step"]
    assert isinstance(per_step, dict)
    print(f"bigram detector held-out AUC: {result['bigram_detector_auc']:.4f}")
    print(
        f"seconds per training step: ours {per_step['ours']:.3f}, transformers "
        f"{per_step['peer']:.3f}; wall {result['wall_s'] / 60:.1f} min"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", type=Path, default=REPO / "studies" / "objectives.yaml")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--source", choices=[*CORRUPTION_SOURCES, "generator"], default="unigram")
    parser.add_argument("--generator", type=Path, help="kept MLM folder for --source generator")
    parser.add_argument("--rate", type=float, default=0.15, help="share of tokens replaced")
    parser.add_argument("--heldout-rows", type=int, help="held-out sequences (default: all)")
    parser.add_argument("--dropout", type=float, help="override the backbone's dropout, both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args()
    if args.steps <= 0 or args.eval_every <= 0:
        parser.error("--steps and --eval-every must be positive")
    return args


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    result = run(args)
    print_summary(result)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
