"""Step-for-step conformance with Hugging Face ``transformers``' ELECTRA (docs/conformance.md).

A small reference is built in ``transformers`` with a fixed seed: ``ElectraForMaskedLM`` as the
1/4-width generator and ``ElectraForPreTraining`` as the discriminator, the generator's
embeddings (token, position, type and their LayerNorm: the original code's shared
``electra/embeddings`` scope) and its output matrix tied to the discriminator's token
embeddings, each model with its own ``embeddings_project``. Every weight is then moved off its
initial value (LayerNorms and biases included), so a bias in the wrong place changes results.
The reference's weights enter our ``electra`` objective through the import path
(``hf_import.ours_from_hf`` for the encoders, export's head names for the heads). Both sides get
the same batch and the same corruption: the test draws the selected positions and the
replacements once and injects them into both (our ``select_masked`` and sampling are replaced,
the reference's losses are computed from the same masked input and labels); neither side draws.
Dropout is disabled on both sides (probability 0): seeding it identically cannot work, the two
implementations draw their masks in different orders and shapes.

In fp32 the check requires (``run_electra``):

- the generator's MLM loss, the discriminator's loss and the total (lambda = 50) agree to 1e-5
  relative;
- the gradient of every parameter agrees to 1e-5 relative (per tensor, in the 2-norm), each of
  our parameters paired with the reference's by name (``parameter_map``, built from the export
  and import name tables); a parameter on either side that the map does not pair one-to-one is
  a failure, never a skip;
- one AdamW step (clipping at 1.0, lr 5e-4, betas 0.9/0.999, eps 1e-6, weight decay 0.01 except
  on LayerNorm weights and biases: ours from ``make_optimizer``, the reference's groups from
  ``transformers.Trainer``'s own rule), fed the same gradients (``compare_step`` says why),
  leaves parameters that agree to 1e-5 of the step.

BERT MLM is checked the same way against ``ElectraForMaskedLM`` of the discriminator's size with
BERT's 80/10/10 corruption injected, and the kept encoders exported by ``export_hf`` give
``transformers`` the hidden states ours compute. The planted wiring errors at the end prove the
check fails when our wiring is wrong.

Deliberate differences, each exact on this input, none absorbed by a tolerance:

- q/k/v: one fused ``qkv`` Linear here, ``query``/``key``/``value`` there (its weight and bias
  are the three stacked, ``QKV_FUSED``);
- the MLM output bias is a parameter of our head, the bias of HF's ``generator_lm_head``
  Linear there (whose weight is the tied embedding matrix, ``MLM_OUTPUT_BIAS``);
- MLM logits: ours only at the selected slots (a static number per row, unused slots weigh 0),
  HF's at every position with label -100 elsewhere; both average CE over the selected positions;
- the detection loss: ours averages over non-[PAD] tokens, HF's over ``attention_mask == 1``;
  the same positions whenever the attention mask is exactly the non-[PAD] tokens, which is how
  our pre-training batches are built (``data/batches.py``) and how this test's batch is;
- HF's word embeddings have ``padding_idx=0`` (no gradient into the [PAD] row from lookups),
  ours have none; [PAD] positions reach no loss (masked keys, unscored), so that lookup gradient
  is zero on both sides, and the row's gradient through the tied output layer is the same;
- GELU: both sides use the exact erf form (HF ``"gelu"``), as the original TF code does;
- sampling: ours draws from the generator's softmax without the special tokens; HF has no
  sampler (its users write one), so the samples are injected.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import electra_ablate.objectives.bert_mlm as bert_mlm_module
import pytest
import torch
from electra_ablate.objectives.bert_mlm import BertMLM, BertMLMParams
from electra_ablate.objectives.electra import Electra, ElectraParams
from torch import nn

import electra_ablate.pretraining.components.generator as generator_module
from electra_ablate.backbone.config import BackboneConfig, max_predictions
from electra_ablate.backbone.model import MLMHead
from electra_ablate.backbone.tokens import SPECIAL_TOKENS, SpecialTokens, Vocab
from electra_ablate.checkpoints.export import export_hf, hf_head_name
from electra_ablate.checkpoints.hf_import import backbone_config, hf_names, ours_from_hf
from electra_ablate.checkpoints.kept import save_kept
from electra_ablate.data.tokenizer import load_vocab_file, save_tokenizer
from electra_ablate.pretraining.components import Discriminator, MaskedSlots
from electra_ablate.pretraining.config import PretrainSpec
from electra_ablate.pretraining.engine import optim
from electra_ablate.pretraining.objective import Batch, KeptModel, Objective, StepOutput

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("one_thread")

SPECIAL = SpecialTokens()
FIRST_ORDINARY = max(SPECIAL.ids) + 1
VOCAB_SIZE = 120
SEQ_LEN = 48
ROW_LENGTHS = (48, 48, 35, 21)  # two rows padded: padding is where masks and losses go wrong
SEED = 0
MASK_RATE = 0.15
DISC_WEIGHT = 50.0  # lambda, the paper's
GENERATOR_SIZE = 0.25
TOLERANCE = 1e-5  # relative, fp32

# The reference: an ELECTRA-Small-like shape, small enough for a test (E != H, so projected).
DISCRIMINATOR_SHAPE: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE,
    "embedding_size": 32,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "max_position_embeddings": 64,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0,  # dropout disabled on both sides
    "attention_probs_dropout_prob": 0.0,
    "pad_token_id": SPECIAL.pad,
    "tie_word_embeddings": True,
}
# 1/4 of the width, FFN and heads, same depth and embedding size (ELECTRA's generator).
GENERATOR_SHAPE = {
    **DISCRIMINATOR_SHAPE,
    "hidden_size": 16,
    "num_attention_heads": 1,
    "intermediate_size": 32,
}
# ELECTRA-Small's optimizer (the paper's pre-training hyper-parameters, the original code's
# epsilon and clipping), written out for the reference; ours comes from the engine's defaults.
REFERENCE_ADAMW = {"lr": 5e-4, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.01}
REFERENCE_CLIP = 1.0
SPEC = PretrainSpec()

# Deliberate differences in layout, named (module docstring).
QKV_FUSED = re.compile(r"layers\.\d+\.attention\.qkv\.(weight|bias)")
MLM_OUTPUT_BIAS = "generator_lm_head.bias"


# ----------------------------------------------------------------------------- the inputs
def reference_batch() -> Batch:
    """Packed ``[CLS] A [SEP] B [SEP]`` rows of random ordinary ids, some padded."""
    generator = torch.Generator().manual_seed(SEED + 1)
    ids = torch.full((len(ROW_LENGTHS), SEQ_LEN), SPECIAL.pad)
    types = torch.zeros_like(ids)
    for row, length in enumerate(ROW_LENGTHS):
        ids[row, :length] = torch.randint(
            FIRST_ORDINARY, VOCAB_SIZE, (length,), generator=generator
        )
        middle = length // 2
        ids[row, 0], ids[row, middle], ids[row, length - 1] = SPECIAL.cls, SPECIAL.sep, SPECIAL.sep
        types[row, middle + 1 : length] = 1
    return {
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": (ids != SPECIAL.pad).long(),
    }


@dataclass(frozen=True)
class InjectedCorruption:
    """The corruption both sides get, drawn once by the test: which positions are selected,
    and what each selected position becomes (a generator sample, or BERT's 80/10/10 choice)."""

    selected: torch.Tensor  # [B, L] bool
    tokens: torch.Tensor  # [B, L] the token at each selected position (ignored elsewhere)

    def applied(self, input_ids: torch.Tensor) -> torch.Tensor:
        return torch.where(self.selected, self.tokens, input_ids)

    def slots(self, input_ids: torch.Tensor) -> MaskedSlots:
        """The same selection as our [B, K] slots: selected positions first, then unused slots
        (at unselected positions, weight 0) up to the static K."""
        k = max_predictions(MASK_RATE, input_ids.shape[1])
        count = self.selected.sum(1)
        assert int(count.max()) <= k, "more selected positions than our static slot count"
        positions = torch.argsort((~self.selected).to(torch.int8), dim=1, stable=True)[:, :k]
        valid = torch.arange(k)[None, :] < count[:, None]
        return MaskedSlots(positions, valid, input_ids.gather(1, positions))

    def at_slots(self, slots: MaskedSlots) -> torch.Tensor:
        return self.tokens.gather(1, slots.positions)


def select_positions(input_ids: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """round(15%) of each row's ordinary tokens, uniformly at random."""
    selected = torch.zeros_like(input_ids, dtype=torch.bool)
    for row, ids in enumerate(input_ids):
        candidates = (ids >= FIRST_ORDINARY).nonzero().squeeze(1)
        count = max(1, round(MASK_RATE * len(candidates)))
        pick = torch.randperm(len(candidates), generator=generator)[:count]
        selected[row, candidates[pick]] = True
    return selected


def electra_corruption(batch: Batch) -> InjectedCorruption:
    """Generator samples: random ordinary tokens, every fourth one equal to the original (a
    sample of the original token is not a replacement)."""
    generator = torch.Generator().manual_seed(SEED + 2)
    ids = batch["input_ids"]
    selected = select_positions(ids, generator)
    samples = torch.randint(FIRST_ORDINARY, VOCAB_SIZE, ids.shape, generator=generator)
    keep = torch.zeros_like(selected)
    keep.view(-1)[selected.view(-1).nonzero().squeeze(1)[::4]] = True
    samples = torch.where(keep, ids, samples)
    corruption = InjectedCorruption(selected, samples)
    replaced = corruption.applied(ids) != ids
    assert (selected & ~replaced).any() and replaced.any(), "need kept and replaced samples"
    return corruption


def bert_corruption(batch: Batch) -> InjectedCorruption:
    """BERT's split at the selected positions: 80% [MASK], 10% a random token, 10% kept."""
    generator = torch.Generator().manual_seed(SEED + 3)
    ids = batch["input_ids"]
    selected = select_positions(ids, generator)
    u = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(FIRST_ORDINARY, VOCAB_SIZE, ids.shape, generator=generator)
    tokens = torch.where(u < 0.9, random_ids, ids)
    tokens = torch.where(u < 0.8, torch.full_like(ids, SPECIAL.mask), tokens)
    for kind in (tokens == SPECIAL.mask, (tokens != SPECIAL.mask) & (tokens != ids), tokens == ids):
        assert (selected & kind).any(), "the injected split must hold all three BERT cases"
    return InjectedCorruption(selected, tokens)


def inject_electra(monkeypatch: pytest.MonkeyPatch, batch: Batch, c: InjectedCorruption) -> None:
    """Our generator selects ``c.selected`` and samples ``c.tokens`` (it draws nothing)."""
    slots = c.slots(batch["input_ids"])

    def select_masked(input_ids, special, mask_rate):
        assert torch.equal(input_ids, batch["input_ids"]) and mask_rate == MASK_RATE
        return slots

    def sample_tokens(log_probs):
        assert log_probs.shape[:2] == slots.positions.shape
        return c.at_slots(slots)

    monkeypatch.setattr(generator_module, "select_masked", select_masked)
    monkeypatch.setattr(generator_module, "sample_tokens", sample_tokens)


def inject_bert(monkeypatch: pytest.MonkeyPatch, batch: Batch, c: InjectedCorruption) -> None:
    """Our BERT MLM selects ``c.selected`` and corrupts them to ``c.tokens``."""
    slots = c.slots(batch["input_ids"])

    def select_masked(input_ids, special, mask_rate):
        assert torch.equal(input_ids, batch["input_ids"]) and mask_rate == MASK_RATE
        return slots

    monkeypatch.setattr(bert_mlm_module, "select_masked", select_masked)
    monkeypatch.setattr(bert_mlm_module, "bert_corruption", lambda *args: c.at_slots(slots))


# -------------------------------------------------------------------------- the reference
def perturbed(reference: nn.Module) -> nn.Module:
    """Every weight moved off its initial value (unit LayerNorms and zero biases would hide a
    bias or a LayerNorm in the wrong place); shared tensors are moved once."""
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return reference


def reference_electra() -> nn.ModuleDict:
    """HF's generator and discriminator, tied as ELECTRA ties them: the whole embeddings
    module shared, the generator's output matrix the discriminator's token embeddings."""
    torch.manual_seed(SEED)
    discriminator = transformers.ElectraForPreTraining(
        transformers.ElectraConfig(**DISCRIMINATOR_SHAPE)
    )
    generator = transformers.ElectraForMaskedLM(transformers.ElectraConfig(**GENERATOR_SHAPE))
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
    # discriminator first: a shared tensor carries the discriminator's name, as in ours
    return perturbed(nn.ModuleDict({"discriminator": discriminator, "generator": generator}))


def reference_mlm() -> nn.ModuleDict:
    """HF's ELECTRA MLM at the discriminator's size (BERT's MLM on our backbone)."""
    torch.manual_seed(SEED)
    mlm = transformers.ElectraForMaskedLM(transformers.ElectraConfig(**DISCRIMINATOR_SHAPE))
    assert mlm.generator_lm_head.weight is mlm.electra.embeddings.word_embeddings.weight
    return perturbed(nn.ModuleDict({"mlm": mlm}))


def reference_backbone() -> BackboneConfig:
    """Our backbone, read from the reference's config by the import path."""
    return backbone_config(
        transformers.ElectraConfig(**DISCRIMINATOR_SHAPE).to_dict(), "electra", "reference"
    )


def electra_reference_losses(
    reference: nn.ModuleDict, batch: Batch, c: InjectedCorruption
) -> dict[str, torch.Tensor]:
    """ELECTRA's step as a ``transformers`` user writes it, with the injected corruption."""
    ids = batch["input_ids"]
    inputs = {"attention_mask": batch["attention_mask"], "token_type_ids": batch["token_type_ids"]}
    masked_input = torch.where(c.selected, SPECIAL.mask, ids)
    mlm_labels = torch.where(c.selected, ids, -100)
    generator = reference["generator"](masked_input, labels=mlm_labels, **inputs)
    corrupted = c.applied(ids)
    is_replaced = (corrupted != ids).long()
    discriminator = reference["discriminator"](corrupted, labels=is_replaced, **inputs)
    return {
        "generator MLM loss": generator.loss,
        "discriminator loss": discriminator.loss,
        "total loss": generator.loss + DISC_WEIGHT * discriminator.loss,
    }


def mlm_reference_losses(
    reference: nn.ModuleDict, batch: Batch, c: InjectedCorruption
) -> dict[str, torch.Tensor]:
    labels = torch.where(c.selected, batch["input_ids"], -100)
    out = reference["mlm"](
        c.applied(batch["input_ids"]),
        attention_mask=batch["attention_mask"],
        token_type_ids=batch["token_type_ids"],
        labels=labels,
    )
    return {"MLM loss": out.loss, "total loss": out.loss}


def reference_optimizer(reference: nn.ModuleDict) -> torch.optim.AdamW:
    """torch AdamW, as ``transformers.Trainer`` builds it: no decay on LayerNorm and bias
    (its own ``get_decay_parameter_names``, which uses nothing of the trainer instance)."""
    decay = set(transformers.Trainer.get_decay_parameter_names(None, reference))
    named = list(reference.named_parameters())
    settings = dict(REFERENCE_ADAMW)
    groups = [
        {
            "params": [p for n, p in named if n in decay],
            "weight_decay": settings.pop("weight_decay"),
        },
        {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, **settings)


# ---------------------------------------------------------------------- the name mapping
@dataclass(frozen=True)
class Part:
    """One of our encoder + head pairs and where its counterpart sits in the reference."""

    ours: str  # our parameter-name prefix, e.g. "discriminator."
    encoder: nn.Module
    head: nn.Module
    role: str  # "discriminator" | "mlm": which head-name table
    theirs: str  # the reference's prefix, e.g. "discriminator."


def electra_parts(objective: Electra) -> list[Part]:
    d, g = objective.discriminator, objective.generator
    return [
        Part("discriminator.", d.encoder, d.head, "discriminator", "discriminator."),
        Part("generator.", g.encoder, g.head, "mlm", "generator."),
    ]


def mlm_parts(objective: BertMLM) -> list[Part]:
    return [Part("mlm.", objective.mlm.encoder, objective.mlm.head, "mlm", "mlm.")]


def parameter_map(
    objective: Objective, parts: list[Part], reference: nn.Module
) -> tuple[dict[str, list[str]], list[str]]:
    """Each of our parameters (shared ones once) -> the reference parameters it is made of, and
    what does not pair one-to-one: a parameter of ours with no rule or no counterpart, a
    reference parameter nothing maps to, or one two of ours map to."""
    theirs = dict(reference.named_parameters())
    mapping: dict[str, list[str]] = {}
    problems: list[str] = []
    for name, _ in objective.named_parameters():
        part = next((p for p in parts if name.startswith(p.ours)), None)
        rest = name.removeprefix(part.ours) if part else name
        if part is not None and rest.startswith("encoder."):
            local = rest.removeprefix("encoder.")
            names = [f"electra.{n}" for n in hf_names(part.encoder).get(local, [])]
            assert len(names) == 3 if QKV_FUSED.fullmatch(local) else len(names) <= 1
        elif part is not None and rest.startswith("head."):
            names = [hf_head_name(part.role, rest.removeprefix("head."))]
            # the MLM output bias: a parameter of our head, the LM head Linear's bias there
            assert (names[0] == MLM_OUTPUT_BIAS) == (part.role == "mlm" and rest == "head.bias")
        else:
            names = []
        if not names:
            problems.append(f"our parameter {name} has no counterpart rule")
            continue
        mapping[name] = [part.theirs + n for n in names]
        for n in mapping[name]:
            if n not in theirs:
                problems.append(f"our parameter {name} maps to {n}, which the reference lacks")
    used = [n for names in mapping.values() for n in names]
    problems += [
        f"reference parameter {n} is mapped twice" for n in sorted(set(used)) if used.count(n) > 1
    ]
    problems += [f"reference parameter {n} is unmapped" for n in theirs if n not in used]
    return mapping, problems


# ------------------------------------------------------------------------------ the check
@dataclass
class Conformance:
    """What disagreed, per check: ``parameter map``, ``loaded weights``, ``losses``,
    ``gradients``, ``after one AdamW step``."""

    failures: dict[str, list[str]] = field(default_factory=dict)
    worst: dict[str, float] = field(default_factory=dict)  # largest relative error per check
    compared: dict[str, int] = field(default_factory=dict)  # how many quantities per check

    def record(self, check: str, what: str, error: float) -> None:
        self.failures.setdefault(check, [])
        self.worst[check] = max(self.worst.get(check, 0.0), error)
        self.compared[check] = self.compared.get(check, 0) + 1
        if not error <= TOLERANCE:  # NaN fails too
            self.failures[check].append(f"{what}: relative error {error:.2e}")

    def assert_conforms(self, *checks: str) -> None:
        """Fail listing every disagreement of ``checks`` (default: all of them)."""
        lines = [
            f"{check}: {line}"
            for check, found in self.failures.items()
            if not checks or check in checks
            for line in found
        ]
        assert not lines, "does not conform to transformers' ELECTRA:\n  " + "\n  ".join(lines)


def relative_error(ours: torch.Tensor, theirs: torch.Tensor, scale: torch.Tensor | None = None):
    """||ours - theirs|| / ||scale|| (scale: theirs), 0 when both are exactly zero."""
    scale = (theirs if scale is None else scale).detach()
    difference = (ours.detach().double() - theirs.detach().double()).norm()
    size = scale.double().norm()
    return float(difference / size) if size > 0 else float(difference > 0) * float("inf")


def joined(reference: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    """A reference tensor in our layout: q, k and v stacked into our fused qkv."""
    return torch.cat([reference[n] for n in names]) if len(names) > 1 else reference[names[0]]


def load_reference_weights(objective: Objective, parts: list[Part], reference: nn.Module) -> None:
    """Encoders through the import path, heads through export's names."""
    for part in parts:
        hf_model = reference[part.theirs.rstrip(".")]
        encoder_tensors = hf_model.electra.state_dict()
        part.encoder.load_state_dict(ours_from_hf(part.encoder, encoder_tensors, "electra", "ref"))
        head_tensors = hf_model.state_dict()
        part.head.load_state_dict(
            {name: head_tensors[hf_head_name(part.role, name)] for name in part.head.state_dict()}
        )


def compare_step(
    objective: Objective,
    parts: list[Part],
    reference: nn.ModuleDict,
    batch: Batch,
    our_losses: Callable[[StepOutput], dict[str, torch.Tensor]],
    their_losses: Callable[[], dict[str, torch.Tensor]],
) -> Conformance:
    """One training step on both sides, compared: the loaded weights, the losses, every
    gradient, and the parameters after clipping and one AdamW step."""
    result = Conformance()
    mapping, problems = parameter_map(objective, parts, reference)
    result.failures["parameter map"] = problems
    ours = dict(objective.named_parameters())
    theirs = dict(reference.named_parameters())
    mapping = {k: v for k, v in mapping.items() if all(n in theirs for n in v)}
    for name, names in mapping.items():
        result.record("loaded weights", name, relative_error(ours[name], joined(theirs, names)))
    theirs_before = {k: v.detach().clone() for k, v in theirs.items()}

    out = objective(batch)
    reference_losses = their_losses()
    for key, value in our_losses(out).items():
        result.record("losses", key, relative_error(value, reference_losses[key]))

    optimizer = optim.make_optimizer(objective, SPEC)
    reference_optimizer_ = reference_optimizer(reference)
    out.loss.backward()
    reference_losses["total loss"].backward()
    result.failures["gradients"] = []
    for name, names in mapping.items():
        grads = [theirs[n].grad for n in names]
        if ours[name].grad is None or any(g is None for g in grads):
            result.failures["gradients"].append(f"{name}: no gradient on one side")
            continue
        theirs_grad = torch.cat(grads) if len(grads) > 1 else grads[0]
        result.record("gradients", name, relative_error(ours[name].grad, theirs_grad))

    # The step gets the reference's gradients (equal to ours, as just checked): Adam divides each
    # gradient by its own running scale, so where a gradient is zero in exact arithmetic (the
    # key biases: softmax ignores them) or near eps, fp32 noise of 1e-9 becomes a visible part
    # of the update on either side. With the same gradients in, what is compared is what the
    # step adds: clipping, the hyper-parameters, the no-decay groups, which tensors it updates.
    with torch.no_grad():
        for name, names in mapping.items():
            if ours[name].grad is not None and all(theirs[n].grad is not None for n in names):
                ours[name].grad.copy_(torch.cat([theirs[n].grad for n in names]))
    ours_clipped = [p for group in optimizer.param_groups for p in group["params"]]
    torch.nn.utils.clip_grad_norm_(ours_clipped, SPEC.grad_clip)  # as the engine's step does
    torch.nn.utils.clip_grad_norm_(list(theirs.values()), REFERENCE_CLIP)
    optimizer.step()
    reference_optimizer_.step()
    for name, names in mapping.items():
        after = joined(theirs, names)
        step = after - joined(theirs_before, names)
        what = f"{name} (measured against the step's size)"
        result.record("after one AdamW step", what, relative_error(ours[name], after, scale=step))
    return result


# ------------------------------------------------------------------------------ the runs
Plant = Callable[[pytest.MonkeyPatch, Batch, InjectedCorruption], dict[str, Any]]
"""A wiring error planted in our side before it is built: patches, and params it overrides."""


def run_electra(plant: Plant | None = None) -> tuple[Conformance, int]:
    """The joint ELECTRA step against the reference pair; also how many parameters we have."""
    batch = reference_batch()
    corruption = electra_corruption(batch)
    reference = reference_electra()
    with pytest.MonkeyPatch.context() as monkeypatch:
        overrides = plant(monkeypatch, batch, corruption) if plant else {}
        params = ElectraParams(
            **{"disc_weight": DISC_WEIGHT, "generator_size": GENERATOR_SIZE, **overrides}
        )
        objective = Electra(reference_backbone(), params, Vocab.uniform(VOCAB_SIZE)).train()
        parts = electra_parts(objective)
        load_reference_weights(objective, parts, reference)
        inject_electra(monkeypatch, batch, corruption)
        result = compare_step(
            objective,
            parts,
            reference,
            batch,
            lambda out: {
                "generator MLM loss": out.metrics["gen_mlm_loss"],
                "discriminator loss": out.metrics["disc_loss"],
                "total loss": out.loss,
            },
            lambda: electra_reference_losses(reference, batch, corruption),
        )
    return result, len(list(objective.named_parameters()))


def run_bert() -> tuple[Conformance, int]:
    """BERT's MLM step against ``ElectraForMaskedLM`` of the same size."""
    batch = reference_batch()
    corruption = bert_corruption(batch)
    reference = reference_mlm()
    with pytest.MonkeyPatch.context() as monkeypatch:
        objective = BertMLM(reference_backbone(), BertMLMParams(), Vocab.uniform(VOCAB_SIZE))
        objective.train()
        parts = mlm_parts(objective)
        load_reference_weights(objective, parts, reference)
        inject_bert(monkeypatch, batch, corruption)
        result = compare_step(
            objective,
            parts,
            reference,
            batch,
            lambda out: {"MLM loss": out.loss, "total loss": out.loss},
            lambda: mlm_reference_losses(reference, batch, corruption),
        )
    return result, len(list(objective.named_parameters()))


@pytest.fixture(scope="module")
def electra_step() -> tuple[Conformance, int]:
    return run_electra()


@pytest.fixture(scope="module")
def bert_step() -> tuple[Conformance, int]:
    return run_bert()


# ----------------------------------------------------------------------------- the tests
def test_the_reference_is_tied_as_electra_ties_it():
    reference = reference_electra()
    d, g = reference["discriminator"], reference["generator"]
    assert g.electra.embeddings is d.electra.embeddings
    assert g.generator_lm_head.weight is d.electra.embeddings.word_embeddings.weight
    assert hasattr(d.electra, "embeddings_project") and hasattr(g.electra, "embeddings_project")
    assert g.electra.embeddings_project is not d.electra.embeddings_project


def test_our_quarter_width_generator_has_the_reference_generators_shape():
    ours = reference_backbone().scaled(GENERATOR_SIZE)
    assert (ours.hidden_size, ours.num_heads, ours.intermediate_size, ours.num_layers) == (
        GENERATOR_SHAPE["hidden_size"],
        GENERATOR_SHAPE["num_attention_heads"],
        GENERATOR_SHAPE["intermediate_size"],
        GENERATOR_SHAPE["num_hidden_layers"],
    )
    assert ours.embedding_size == GENERATOR_SHAPE["embedding_size"]
    assert ours.dropout == ours.attention_dropout == 0.0  # dropout disabled on our side too


def test_our_no_decay_groups_are_transformers_and_the_original_codes():
    """Ours: no decay on 1-D tensors. transformers' Trainer: none on LayerNorm and bias. The
    original code: none on names matching LayerNorm, layer_norm, bias. The same sets here."""
    reference = reference_electra()
    objective = Electra(reference_backbone(), ElectraParams(), Vocab.uniform(VOCAB_SIZE))
    parts = electra_parts(objective)
    mapping, problems = parameter_map(objective, parts, reference)
    assert not problems
    ours = {id(p): n for n, p in objective.named_parameters()}
    optimizer = optim.make_optimizer(objective, SPEC)
    our_decayed = {
        ours[id(p)] for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]
    }
    hf_decayed = set(transformers.Trainer.get_decay_parameter_names(None, reference))
    original = {
        n for n, _ in reference.named_parameters() if not re.search("LayerNorm|layer_norm|bias", n)
    }
    for name, names in mapping.items():
        assert (name in our_decayed) == (names[0] in hf_decayed) == (names[0] in original), name


def test_electra_losses_match_transformers(electra_step):
    result, _ = electra_step
    assert result.compared["losses"] == 3
    result.assert_conforms("parameter map", "loaded weights", "losses")


def test_electra_gradients_match_for_every_parameter(electra_step):
    result, n_params = electra_step
    assert result.compared["gradients"] == n_params  # shared embeddings included, once
    result.assert_conforms("parameter map", "gradients")


def test_electra_adamw_step_matches(electra_step):
    result, n_params = electra_step
    assert result.compared["after one AdamW step"] == n_params
    result.assert_conforms()


def test_bert_mlm_matches_electra_for_masked_lm(bert_step):
    result, n_params = bert_step
    assert result.compared["losses"] == 2 and result.compared["gradients"] == n_params
    result.assert_conforms()


@pytest.mark.parametrize("role", ["discriminator", "mlm"])
def test_exported_kept_encoder_gives_transformers_our_hidden_states(tmp_path, role):
    """A kept encoder (and its head) exported by ``export_hf`` computes in ``transformers``
    what it computes here: the discriminator as ``ElectraForPreTraining`` and ``ElectraModel``,
    the MLM encoder (BERT MLM's) as ``ElectraForMaskedLM`` and ``ElectraModel``."""
    backbone, vocab = reference_backbone(), Vocab.uniform(VOCAB_SIZE)
    torch.manual_seed(SEED)
    objective = (
        Electra(backbone, ElectraParams(), vocab)
        if role == "discriminator"
        else BertMLM(backbone, BertMLMParams(), vocab)
    )
    perturbed(objective)
    kept = objective.kept_model()
    assert kept.role == role
    kept_dir = save_with_tokenizer(tmp_path, kept)
    folder = export_hf(kept_dir, tmp_path / "hf")

    batch = reference_batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        hidden = kept.encoder.eval()(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
        if role == "discriminator":
            head_out = kept.head(hidden)
        else:
            head_out = kept.head(hidden, kept.encoder.embeddings.word.weight)
        with_head = "ElectraForPreTraining" if role == "discriminator" else "ElectraForMaskedLM"
        for architecture in (with_head, "ElectraModel"):
            model = getattr(transformers, architecture).from_pretrained(folder).eval()
            out = model(**batch)
            theirs = out.last_hidden_state if architecture == "ElectraModel" else out.logits
            ours = hidden if architecture == "ElectraModel" else head_out
            torch.testing.assert_close(ours[real], theirs[real], rtol=TOLERANCE, atol=TOLERANCE)


def save_with_tokenizer(tmp_path: Path, kept: KeptModel) -> Path:
    """``kept`` saved as a kept folder, with a WordPiece tokenizer of the model's vocabulary."""
    tok_dir = tmp_path / "tokenizer"
    tok_dir.mkdir()
    words = [f"word{i}" for i in range(VOCAB_SIZE - len(SPECIAL_TOKENS))]
    (tok_dir / "vocab.txt").write_text("".join(f"{t}\n" for t in [*SPECIAL_TOKENS, *words]))
    save_tokenizer(load_vocab_file(tok_dir / "vocab.txt", lowercase=True), tok_dir)
    save_kept(tmp_path / "kept", kept, tok_dir, {"objective": "conformance"})
    return tmp_path / "kept"


# --------------------------------------------------------------- planted wiring errors
def labels_shifted_by_one(monkeypatch: pytest.MonkeyPatch, batch: Batch, c: InjectedCorruption):
    detect = Discriminator.detect

    def shifted(self, batch, corrupted, replaced, weights, replaceable):
        return detect(self, batch, corrupted, replaced.roll(1, dims=1), weights, replaceable)

    monkeypatch.setattr(Discriminator, "detect", shifted)
    return {}


def discriminator_reads_masked_input(
    monkeypatch: pytest.MonkeyPatch, batch: Batch, c: InjectedCorruption
):
    detect = Discriminator.detect

    def reads_masked(self, batch, corrupted, replaced, weights, replaceable):
        masked = torch.where(c.selected, SPECIAL.mask, batch["input_ids"])  # the generator's input
        return detect(self, batch, masked, replaced, weights, replaceable)

    monkeypatch.setattr(Discriminator, "detect", reads_masked)
    return {}


def generator_embeddings_not_shared(monkeypatch, batch, c):
    return {"tying": "none"}


def detection_scored_at_masked_positions_only(monkeypatch, batch, c):
    monkeypatch.setattr(
        Electra, "rtd_weights", lambda self, b, corruption: corruption.slots.mask_of(b["input_ids"])
    )
    return {}


def discriminator_weight_one(monkeypatch, batch, c):
    return {"disc_weight": 1.0}


def mlm_output_bias_dropped(monkeypatch, batch, c):
    def no_bias(self, hidden, embedding_weight):
        return torch.nn.functional.linear(
            self.norm(torch.nn.functional.gelu(self.dense(hidden))), embedding_weight
        )

    monkeypatch.setattr(MLMHead, "forward", no_bias)
    return {}


def weight_decay_everywhere(monkeypatch, batch, c):
    def decay_all(objective, spec):
        params = [p for _, p in objective.trainable_parameters()]
        return torch.optim.AdamW(
            params,
            lr=spec.learning_rate,
            betas=spec.adam_betas,
            eps=spec.adam_eps,
            weight_decay=spec.weight_decay,
        )

    monkeypatch.setattr(optim, "make_optimizer", decay_all)
    return {}


PLANTED: dict[str, tuple[Plant, str]] = {
    "labels-shifted-by-one": (labels_shifted_by_one, "losses"),
    "discriminator-reads-masked-input": (discriminator_reads_masked_input, "losses"),
    "generator-embeddings-not-shared": (generator_embeddings_not_shared, "parameter map"),
    "detection-at-masked-positions-only": (detection_scored_at_masked_positions_only, "losses"),
    "lambda-1-not-50": (discriminator_weight_one, "losses"),
    "mlm-output-bias-dropped": (mlm_output_bias_dropped, "losses"),
    "weight-decay-on-layernorm-and-bias": (weight_decay_everywhere, "after one AdamW step"),
}


@pytest.mark.parametrize("planted", list(PLANTED))
def test_a_planted_wiring_error_fails_the_check(planted):
    plant, check = PLANTED[planted]
    result, _ = run_electra(plant)
    with pytest.raises(AssertionError, match="does not conform"):
        result.assert_conforms()
    assert result.failures[check], f"{planted} should fail the {check} check: {result.failures}"
