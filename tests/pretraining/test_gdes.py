"""``tying: gdes``, DeBERTa-v3's gradient-disentangled embedding sharing (docs/design.md): the
generator owns and trains the shared tables with its MLM loss, the discriminator reads them
through a stop-gradient plus zero-initialised residuals of its own, and what the run keeps is one
ordinary table, the sum. Each test that states what ``gdes`` does also runs ``embeddings``, where
the statement must come out the other way (or the same, where the two must agree), so it can
fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_helpers import pair_batch

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import TABLES, DisentangledEmbeddings, Embeddings
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.checkpoints.export import hf_state_dict
from electra_ablate.checkpoints.kept import load_kept, save_kept
from electra_ablate.pretraining.components import maskable, non_pad
from electra_ablate.pretraining.engine.state import load_latest_state, save_state
from electra_ablate.pretraining.registry import build_objective

SPECIAL = SpecialTokens()
VOCAB = 120
CFG = preset("micro").with_overrides(vocab_size=VOCAB, max_seq_len=32)
UNIFORM = Vocab.uniform(VOCAB, SPECIAL)
SIZES = [1.0, 0.25]


def make_batch(seed: int = 0, batch: int = 4, length: int = 32) -> dict[str, torch.Tensor]:
    return pair_batch(VOCAB, seed, batch, length)


def build(tying: str, size: float = 1.0, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_objective("electra", CFG, {"tying": tying, "generator_size": size}, UNIFORM)


def shared_tables(objective) -> list[torch.Tensor]:
    """The generator's token, position and type tables: E_G."""
    embeddings = objective.generator.encoder.embeddings
    return [getattr(embeddings, name).weight for name in TABLES]


def residuals(objective) -> list[torch.Tensor]:
    """The discriminator's own residual tables: E_Δ."""
    embeddings = objective.discriminator.encoder.embeddings
    return [getattr(embeddings, name).delta for name in TABLES]


def reached(params: list[torch.Tensor]) -> list[bool]:
    return [p.grad is not None and bool(p.grad.any()) for p in params]


def trained(objective, steps: int = 3) -> torch.nn.Module:
    """A few large steps, so every residual and shared table is off its initial value."""
    optimizer = torch.optim.AdamW(objective.parameters(), lr=1e-2)
    for step in range(steps):
        torch.manual_seed(step)
        objective.zero_grad()
        objective(make_batch(step)).loss.backward()
        optimizer.step()
    objective.eval()
    return objective


@pytest.mark.parametrize("size", SIZES)
def test_gdes_is_built_as_described(size):
    objective = build("gdes", size)
    generator, discriminator = objective.generator.encoder, objective.discriminator.encoder
    assert type(generator.embeddings) is Embeddings
    assert isinstance(discriminator.embeddings, DisentangledEmbeddings)
    for name in TABLES:  # the residuals read the generator's own tables, at the main model's E
        table = getattr(discriminator.embeddings, name)
        assert table.source is getattr(generator.embeddings, name)
        assert table.delta.shape == table.source.weight.shape
    assert discriminator.embeddings.norm is not generator.embeddings.norm
    # E_G belongs to the generator alone: nothing of the discriminator holds it
    owned = {id(p) for p in discriminator.parameters()}
    assert not owned & {id(p) for p in generator.embeddings.parameters()}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("tying", ["gdes", "embeddings"])
def test_which_loss_reaches_which_table(tying, size):
    """MLM loss -> E_G, never E_Δ; RTD loss -> E_Δ, never E_G (under ``embeddings`` the RTD
    loss does reach the shared tables: the difference gdes makes)."""
    objective = build(tying, size)
    batch = make_batch()
    torch.manual_seed(1)
    c = objective.generator.corrupt(batch, UNIFORM, 0.15, 1.0)
    c.mlm_loss.backward()
    assert reached(shared_tables(objective)) == [True, True, True]
    if tying == "gdes":
        assert all(p.grad is None for p in residuals(objective))

    objective.zero_grad(set_to_none=True)
    weights = non_pad(batch, SPECIAL.pad)
    replaceable = maskable(batch["input_ids"], UNIFORM)
    d = objective.discriminator.detect(batch, c.corrupted, c.replaced, weights, replaceable)
    d.loss.backward()
    assert reached(shared_tables(objective)) == [tying == "embeddings"] * 3
    if tying == "gdes":
        assert reached(residuals(objective)) == [True, True, True]


@pytest.mark.parametrize("size", SIZES)
def test_the_joint_loss_gives_the_shared_tables_exactly_the_mlm_gradient(size):
    objective, batch = build("gdes", size), make_batch()
    torch.manual_seed(3)
    objective(batch).loss.backward()
    joint = [p.grad.clone() for p in shared_tables(objective)]
    objective.zero_grad(set_to_none=True)
    torch.manual_seed(3)
    objective.generator.corrupt(batch, UNIFORM, 0.15, 1.0).mlm_loss.backward()
    for got, mlm_only in zip(joint, shared_tables(objective), strict=True):
        torch.testing.assert_close(got, mlm_only.grad, rtol=0, atol=0)


@pytest.mark.parametrize("size", SIZES)
def test_at_step_0_gdes_is_embeddings_tying(size):
    """The residuals start at zero and draw nothing random: for one seed every weight and the
    discriminator's logits equal ``embeddings`` tying's."""
    gdes, tied = build("gdes", size).eval(), build("embeddings", size).eval()
    assert all(not p.any() for p in residuals(gdes))
    torch.testing.assert_close(
        gdes.generator.state_dict(), tied.generator.state_dict(), rtol=0, atol=0
    )
    plain = gdes.discriminator.encoder.plain_state_dict()
    torch.testing.assert_close(plain, tied.discriminator.encoder.state_dict(), rtol=0, atol=0)
    batch = make_batch()
    with torch.no_grad():
        ids = batch["input_ids"]
        torch.testing.assert_close(gdes.discriminator(batch, ids), tied.discriminator(batch, ids))
    assert gdes.flops_plan(32) == tied.flops_plan(32)


def test_the_kept_encoder_is_one_ordinary_table_the_sum(tmp_path: Path):
    objective = trained(build("gdes", 0.25))
    assert all(p.any() for p in residuals(objective))
    kept = objective.kept_model()
    save_kept(tmp_path / "kept", kept, tmp_path, {"objective": "electra"})
    loaded = load_kept(tmp_path / "kept").model
    assert type(loaded.encoder.embeddings) is Embeddings
    hf = hf_state_dict(kept)
    hf_names = ("word_embeddings", "position_embeddings", "token_type_embeddings")
    for name, hf_name, shared, delta in zip(
        TABLES, hf_names, shared_tables(objective), residuals(objective), strict=True
    ):
        summed = (shared + delta).detach()
        torch.testing.assert_close(getattr(loaded.encoder.embeddings, name).weight, summed)
        torch.testing.assert_close(hf[f"electra.embeddings.{hf_name}.weight"], summed)
    batch = make_batch(7)
    args = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    loaded.encoder.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.encoder(*args), kept.encoder(*args))


def test_a_checkpoint_resumes_both_tables(tmp_path: Path):
    objective = trained(build("gdes", 1.0))
    optimizer = torch.optim.AdamW(objective.parameters())
    save_state(tmp_path / "step-00000003", objective, optimizer, [], {"step": 3})
    resumed = build("gdes", 1.0, seed=5).eval()
    assert load_latest_state(tmp_path, resumed, lambda state, counters: None, "cpu") is not None
    torch.testing.assert_close(resumed.state_dict(), objective.state_dict(), rtol=0, atol=0)
    for got, want in zip(residuals(resumed), residuals(objective), strict=True):
        assert got.any() and torch.equal(got, want)
    # the restored residuals still read the restored generator's tables, not stale copies
    batch = make_batch(9)
    with torch.no_grad():
        ids = batch["input_ids"]
        torch.testing.assert_close(
            resumed.discriminator(batch, ids), objective.discriminator(batch, ids)
        )
