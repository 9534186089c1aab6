"""The semantics of every objective, tested directly (docs/design.md): which positions carry loss,
labels, gradients that must or must not flow, frozen and tied parameters."""

from __future__ import annotations

import importlib
import math
import pkgutil
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from electra_ablate.objectives.all_tokens_mlm import copy_mixture_log_prob
from engine_helpers import pair_batch
from objective_names import BUILT_IN, MODULE_PREFIX

import electra_ablate.pretraining.components as components
import electra_ablate.pretraining.components.generator as generator_module
from electra_ablate.backbone.config import preset
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.plugin import Objective
from electra_ablate.pretraining.components import rtd_loss
from electra_ablate.pretraining.registry import available_objectives, build_objective

SPECIAL = SpecialTokens()
VOCAB = 120
CFG = preset("micro").with_overrides(vocab_size=VOCAB, max_seq_len=32)
UNIFORM = Vocab.uniform(VOCAB, SPECIAL)
NAMES = list(BUILT_IN)


def make_batch(seed: int = 0, batch: int = 4, length: int = 32) -> dict[str, torch.Tensor]:
    return pair_batch(VOCAB, seed, batch, length)


def build(name: str, **params) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_objective(name, CFG, params, UNIFORM)


@pytest.fixture
def recorded_slots(monkeypatch):
    recorder = SimpleNamespace(slots=[])
    original = components.select_masked

    def wrapped(*args, **kwargs):
        slots = original(*args, **kwargs)
        recorder.slots.append(slots)
        return slots

    monkeypatch.setattr(generator_module, "select_masked", wrapped)
    monkeypatch.setattr("electra_ablate.objectives.bert_mlm.select_masked", wrapped)
    return recorder


def slot_mask(slots: components.MaskedSlots, shape: torch.Size) -> torch.Tensor:
    return torch.zeros(shape, dtype=torch.bool).scatter(1, slots.positions, slots.valid)


def test_every_objective_class_of_the_package_is_a_registered_built_in():
    """``BUILT_IN`` (the entry points) is every objective ``objectives/`` defines, no more and no
    less: a class added there without its entry point fails here, not silently untested."""
    package = importlib.import_module(MODULE_PREFIX.rstrip("."))
    defined = set()
    for module_info in pkgutil.iter_modules(package.__path__, MODULE_PREFIX):
        module = importlib.import_module(module_info.name)
        defined |= {
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, Objective)
            and value.__module__ == module.__name__
        }
    registered = available_objectives()
    built_in = {
        name for name, cls in registered.items() if cls.__module__.startswith(MODULE_PREFIX)
    }
    assert built_in == set(BUILT_IN)
    assert {registered[name] for name in BUILT_IN} == defined


@pytest.mark.parametrize("name", NAMES)
def test_loss_is_finite_and_decreases_on_a_repeated_batch(name):
    objective = build(name)
    batch = make_batch()
    for stage in range(len(objective.stages())):
        objective.enter_stage(stage)
        params = [p for _, p in objective.trainable_parameters()]
        optimizer = torch.optim.AdamW(params, lr=2e-3)
        losses = []
        for _ in range(12):
            torch.manual_seed(1)  # same masks and samples each step
            out = objective(batch)
            assert torch.isfinite(out.loss)
            optimizer.zero_grad()
            out.loss.backward()
            optimizer.step()
            losses.append(out.loss.item())
        assert losses[-1] < losses[0], (name, stage, losses)


def test_mask_selection_picks_15_percent_of_maskable_tokens():
    batch = make_batch(batch=64, length=128)
    torch.manual_seed(0)
    slots = components.select_masked(batch["input_ids"], SPECIAL, 0.15)
    chosen = slot_mask(slots, batch["input_ids"].shape)
    maskable = components.maskable(batch["input_ids"], SPECIAL)
    assert not (chosen & ~maskable).any(), "special or pad tokens selected"
    expected = torch.round(maskable.sum(1).float() * 0.15).long()
    assert torch.equal(chosen.sum(1), expected)
    assert torch.equal(slots.originals, batch["input_ids"].gather(1, slots.positions))


def test_bert_corruption_split_is_80_10_10():
    ids = torch.randint(5, VOCAB, (400, 128))
    torch.manual_seed(0)
    slots = components.select_masked(ids, SPECIAL, 0.15)
    repl = components.bert_corruption(slots, UNIFORM, 0.8, 0.1)[slots.valid]
    originals = slots.originals[slots.valid]
    masked = (repl == SPECIAL.mask).float().mean().item()
    kept = (repl == originals).float().mean().item()
    assert masked == pytest.approx(0.8, abs=0.02)
    assert kept == pytest.approx(0.1 + 0.1 / VOCAB, abs=0.02)
    assert not torch.isin(repl[repl != SPECIAL.mask], torch.tensor(SPECIAL.ids)).any()


def main_encoder_output_grad(objective, batch) -> torch.Tensor:
    """d loss / d (main model's final hidden states): non-zero exactly where loss is carried."""
    encoder = objective.kept_model().encoder
    captured = {}

    def hook(module, args, output):
        output.retain_grad()
        captured["hidden"] = output

    handle = encoder.register_forward_hook(hook)
    objective.eval()  # no dropout: a clean map of which positions feed the loss
    out = objective(batch)
    handle.remove()
    out.loss.backward()
    return captured["hidden"].grad.abs().sum(-1)


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("bert_mlm", "masked"),
        ("replace_mlm", "masked"),
        ("electra_15", "masked"),
        ("all_tokens_mlm", "all"),
        ("electra", "all"),
    ],
)
def test_positions_that_carry_the_main_loss(name, where, recorded_slots):
    objective = build(name)
    batch = make_batch()
    grad = main_encoder_output_grad(objective, batch)
    carries = grad > 0
    if where == "masked":
        expected = slot_mask(recorded_slots.slots[-1], grad.shape)
    else:
        expected = batch["input_ids"] != SPECIAL.pad
    assert torch.equal(carries, expected)


@pytest.mark.parametrize(
    "name", ["replace_mlm", "all_tokens_mlm", "electra_15", "electra", "adversarial"]
)
def test_main_model_never_sees_mask_but_generator_does(name):
    objective = build(name)
    seen = {}
    main = objective.kept_model().encoder
    gen_encoder = objective.generator.encoder
    gen_inputs, main_inputs = [], []
    gen_encoder.register_forward_pre_hook(lambda m, a: gen_inputs.append(a[0]))
    if main is not gen_encoder:
        main.register_forward_pre_hook(lambda m, a: main_inputs.append(a[0]))
    objective(make_batch())
    seen["gen"] = gen_inputs[0]
    assert (seen["gen"] == SPECIAL.mask).any()
    if main is not gen_encoder:
        assert not (main_inputs[0] == SPECIAL.mask).any()


def test_generator_never_samples_a_special_token():
    logits = torch.zeros(4096, VOCAB)
    logits[:, SPECIAL.mask] = 50.0  # even where [MASK] is by far the likeliest prediction
    samples = components.sample_tokens(components.sampling_log_probs(logits, SPECIAL, 1.0))
    assert samples.min() >= len(SPECIAL.ids)


def test_rtd_labels_mark_exactly_the_tokens_that_differ(monkeypatch):
    objective = build("electra")
    batch = make_batch()

    def half_copies(log_probs):
        """Sample the original token in every other slot, a different token elsewhere."""
        originals = captured_slots[-1].originals
        other = (originals - len(SPECIAL.ids) + 1) % (VOCAB - len(SPECIAL.ids)) + len(SPECIAL.ids)
        keep = torch.arange(originals.shape[1]) % 2 == 0
        return torch.where(keep, originals, other)

    captured_slots = []
    original_select = components.select_masked

    def recording_select(*args, **kwargs):
        captured_slots.append(original_select(*args, **kwargs))
        return captured_slots[-1]

    monkeypatch.setattr(generator_module, "select_masked", recording_select)
    monkeypatch.setattr(generator_module, "sample_tokens", half_copies)
    c = objective.generator.corrupt(batch, UNIFORM, 0.15, 1.0)
    slots = captured_slots[-1]
    assert torch.equal(c.replaced.bool(), c.corrupted != batch["input_ids"])
    labels_at_slots = c.replaced.gather(1, slots.positions).bool()
    keep = torch.arange(slots.positions.shape[1]) % 2 == 0
    assert not labels_at_slots[slots.valid & keep].any(), "sampled original labelled replaced"
    assert labels_at_slots[slots.valid & ~keep].all()
    assert c.replaced.sum() == (slots.valid & ~keep).sum()


def generator_only_params(objective) -> dict[str, torch.nn.Parameter]:
    shared = {id(p) for p in objective.discriminator.parameters()}
    return {n: p for n, p in objective.generator.named_parameters() if id(p) not in shared}


def test_electra_discriminator_loss_reaches_generator_only_through_tied_embeddings():
    objective = build("electra")
    gen_emb = objective.generator.encoder.embeddings.word.weight
    disc_emb = objective.discriminator.encoder.embeddings.word.weight
    assert gen_emb is disc_emb and gen_emb.data_ptr() == disc_emb.data_ptr()
    assert objective.generator.encoder.project is not None  # smaller G projects E -> its width
    batch = make_batch()
    c = objective.generator.corrupt(batch, UNIFORM, 0.15, 1.0)
    assert not c.samples.requires_grad and not c.corrupted.requires_grad
    disc_loss = rtd_loss(
        objective.discriminator(batch, c.corrupted), c.replaced, batch["attention_mask"]
    )
    disc_loss.backward()
    for name, p in generator_only_params(objective).items():
        assert p.grad is None or not p.grad.any(), f"D's loss reached generator {name}"
    assert disc_emb.grad is not None and disc_emb.grad.any()


def test_electra_generator_gradient_is_its_mlm_gradient():
    objective = build("electra")
    batch = make_batch()
    torch.manual_seed(3)
    objective(batch).loss.backward()
    full = {n: p.grad.clone() for n, p in generator_only_params(objective).items()}
    objective.zero_grad()
    torch.manual_seed(3)
    objective.generator.corrupt(batch, UNIFORM, 0.15, 1.0).mlm_loss.backward()
    for name, p in generator_only_params(objective).items():
        torch.testing.assert_close(full[name], p.grad, msg=name)


@pytest.mark.parametrize("tying", ["none", "embeddings", "all"])
def test_tying_modes(tying):
    size = 1.0 if tying == "all" else 0.25
    objective = build("electra", tying=tying, generator_size=size)
    g, d = objective.generator.encoder, objective.discriminator.encoder
    shared_embeddings = g.embeddings.word.weight.data_ptr() == d.embeddings.word.weight.data_ptr()
    assert shared_embeddings == (tying != "none")
    assert (g is d) == (tying == "all")
    with pytest.raises(ValueError, match="generator_size 1.0"):
        objective.Params(tying="all", generator_size=0.5)


def test_all_tokens_copy_mixture_is_a_distribution_and_matches_the_formula():
    torch.manual_seed(0)
    n, vocab = 6, 11
    logits, gate = torch.randn(n, vocab), torch.randn(n)
    inputs = torch.randint(0, vocab, (n,))
    every_target = torch.arange(vocab).expand(n, vocab)
    log_p = copy_mixture_log_prob(
        logits[:, None, :].expand(n, vocab, vocab),
        gate[:, None].expand(n, vocab),
        inputs[:, None].expand(n, vocab),
        every_target,
    )
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(n))
    d = torch.sigmoid(gate)
    softmax = logits.softmax(-1)
    expected = (1 - d)[:, None] * softmax + d[:, None] * F.one_hot(inputs, vocab)
    torch.testing.assert_close(log_p.exp(), expected)


def test_two_stage_initialises_d_from_g_and_freezes_g():
    objective = build("two_stage")
    batch = make_batch()
    assert not any(p.requires_grad for p in objective.discriminator.parameters())
    optimizer = torch.optim.AdamW([p for _, p in objective.trainable_parameters()], lr=1e-3)
    for _ in range(3):
        out = objective(batch)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    assert objective.kept_model().role == "mlm"
    objective.enter_stage(1)
    g_state = {k: v.clone() for k, v in objective.generator.state_dict().items()}
    for k, v in objective.generator.encoder.state_dict().items():
        assert torch.equal(objective.discriminator.encoder.state_dict()[k], v), k
    trainable = {id(p) for _, p in objective.trainable_parameters()}
    assert not trainable & {id(p) for p in objective.generator.parameters()}
    objective.train()
    assert not objective.generator.training
    optimizer = torch.optim.AdamW([p for _, p in objective.trainable_parameters()], lr=1e-3)
    d_before = objective.discriminator.encoder.layers[0].ffn_in.weight.clone()
    for _ in range(3):
        out = objective(batch)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    for k, v in objective.generator.state_dict().items():
        assert torch.equal(v, g_state[k]), f"frozen generator changed: {k}"
    assert not torch.equal(d_before, objective.discriminator.encoder.layers[0].ffn_in.weight)
    assert objective.kept_model().role == "discriminator"


def test_two_stage_can_skip_the_initialisation():
    objective = build("two_stage", init_from_generator=False)
    objective.enter_stage(1)
    g = objective.generator.encoder.layers[0].ffn_in.weight
    assert not torch.equal(objective.discriminator.encoder.layers[0].ffn_in.weight, g)


def test_reinforce_gradient_has_the_policy_gradient_form():
    objective = build("adversarial", baseline=False)
    torch.manual_seed(0)
    logits = torch.randn(2, 3, VOCAB, requires_grad=True)
    samples = torch.randint(len(SPECIAL.ids), VOCAB, (2, 3))  # the policy never samples specials
    valid = torch.tensor([[True, True, False], [True, True, True]])
    reward = torch.full((2, 3), 0.7)
    gen_hidden = torch.randn(2, 3, objective.generator.encoder.cfg.hidden_size)
    policy_loss, _ = objective.reinforce(logits, samples, gen_hidden, reward, valid)
    policy_loss.backward()
    # d/dlogits of -(r/N) sum log π(s), π = softmax over the non-special tokens:
    # -(r/N) (onehot(s) - π), and no gradient at all to the special tokens' logits
    policy = components.without_special(logits.detach(), SPECIAL).softmax(-1)
    expected = -(0.7 / valid.sum()) * (F.one_hot(samples, VOCAB) - policy)
    assert (expected[..., : len(SPECIAL.ids)] == 0).all()
    torch.testing.assert_close(logits.grad, expected * valid[..., None])


def test_reinforce_gradient_vanishes_when_the_baseline_equals_a_constant_reward():
    objective = build("adversarial", baseline=True)
    reward_value = 0.7
    with torch.no_grad():  # make b_t = -log sigmoid(bias) == reward exactly
        objective.baseline_head.weight.zero_()
        objective.baseline_head.bias.fill_(-math.log(math.exp(reward_value) - 1.0))
    logits = torch.randn(2, 3, VOCAB, requires_grad=True)
    samples = torch.randint(len(SPECIAL.ids), VOCAB, (2, 3))
    gen_hidden = torch.randn(2, 3, objective.generator.encoder.cfg.hidden_size)
    valid = torch.ones(2, 3, dtype=torch.bool)
    policy_loss, baseline_loss = objective.reinforce(
        logits, samples, gen_hidden, torch.full((2, 3), reward_value), valid
    )
    policy_loss.backward()
    assert baseline_loss.item() == pytest.approx(0.0, abs=1e-10)
    torch.testing.assert_close(logits.grad, torch.zeros_like(logits))


@pytest.mark.parametrize(("mle_weight", "expect_gradient"), [(0.0, False), (1.0, True)])
def test_adversarial_generator_gets_mle_gradient_only_when_configured(
    monkeypatch, mle_weight, expect_gradient
):
    objective = build("adversarial", mle_weight=mle_weight)

    def no_policy(logits, samples, gen_hidden, reward, valid):
        return logits.sum() * 0.0, torch.zeros(())

    monkeypatch.setattr(objective, "reinforce", no_policy)
    objective(make_batch()).loss.backward()
    grads = [p.grad for p in generator_only_params(objective).values()]
    has_gradient = any(g is not None and g.any() for g in grads)
    assert has_gradient == expect_gradient


def test_adversarial_policy_reward_is_the_discriminator_bce_at_masked_positions(monkeypatch):
    objective = build("adversarial")
    seen = {}

    def spy(logits, samples, gen_hidden, reward, valid):
        seen["reward"] = reward
        return logits.sum() * 0.0, torch.zeros(())

    detect = objective.discriminator.detect

    def recording_detect(batch, corrupted, replaced, weights, replaceable):
        detection = detect(batch, corrupted, replaced, weights, replaceable)
        seen["detection"], seen["replaced"] = detection, replaced
        return seen["detection"]

    monkeypatch.setattr(objective, "reinforce", spy)
    monkeypatch.setattr(objective.discriminator, "detect", recording_detect)
    recorded = []
    original_select = components.select_masked

    def recording_select(*args, **kwargs):
        recorded.append(original_select(*args, **kwargs))
        return recorded[-1]

    monkeypatch.setattr(generator_module, "select_masked", recording_select)
    objective(make_batch())
    d, positions = seen["detection"], recorded[-1].positions
    bce = F.binary_cross_entropy_with_logits(
        d.logits, seen["replaced"].float(), reduction="none"
    )  # -log D where the token is original, -log(1 - D) where replaced
    torch.testing.assert_close(seen["reward"], bce.detach().gather(1, positions))
    assert (seen["reward"] >= 0).all()


def test_adversarial_mle_warmup_is_a_stage():
    objective = build("adversarial", mle_warmup=0.2)
    assert [s.name for s in objective.stages()] == ["mle_warmup", "adversarial"]
    assert sum(s.fraction for s in objective.stages()) == pytest.approx(1.0)


@pytest.mark.parametrize("name", NAMES)
def test_kept_model_and_flops_plan(name):
    objective = build(name)
    kept = objective.kept_model()
    assert kept.role in ("mlm", "discriminator")
    hidden = kept.encoder(make_batch()["input_ids"])
    assert hidden.shape == (4, 32, CFG.hidden_size)
    for stage in range(len(objective.stages())):
        objective.enter_stage(stage)
        plan = objective.flops_plan(32)
        assert plan and all(p.predicted > 0 for p in plan)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_generator_samples_follow_the_tempered_softmax(temperature):
    torch.manual_seed(0)
    logits = torch.tensor([2.0, 0.0, -1.0, -30.0, 1.0])
    rows = logits.expand(200_000, -1)
    log_probs = torch.log_softmax(rows / temperature, dim=-1)
    counts = torch.bincount(components.sample_tokens(log_probs), minlength=5)
    expected = torch.softmax(logits / temperature, -1) * rows.shape[0]
    assert counts[3] == 0  # a token of ~zero probability is never drawn
    torch.testing.assert_close(counts.float(), expected, rtol=0.02, atol=60.0)


def test_bert_scores_its_masked_positions_apart_from_the_ones_it_can_copy():
    """With every selected token [MASK]ed the two losses are one; with BERT's 80/10/10 the
    [MASK]-only loss leaves out the unchanged tokens, which the input gives away."""
    batch = make_batch()
    all_masked = build("bert_mlm", mask_token_prob=1.0, random_token_prob=0.0)
    torch.manual_seed(0)
    m = all_masked(batch).metrics
    assert m["mlm_masked_loss"].item() == pytest.approx(m["mlm_loss"].item(), rel=1e-6)
    none_masked = build("bert_mlm", mask_token_prob=0.0, random_token_prob=0.0)
    torch.manual_seed(0)
    m = none_masked(batch).metrics
    assert m["mlm_masked_loss"].item() == 0.0 and m["mlm_loss"].item() > 0.0
    assert not any(v.requires_grad for v in m.values())
