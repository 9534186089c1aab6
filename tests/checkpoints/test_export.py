"""Export to Hugging Face ELECTRA format: the exported folder must load in ``transformers`` with
no missing or unexpected weights and compute exactly what our encoder and heads compute."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.backbone.tokens import SPECIAL_TOKENS
from electra_ablate.checkpoints.export import EXPORTED_FILES, export_hf, hf_state_dict
from electra_ablate.checkpoints.kept import load_kept, save_kept
from electra_ablate.commands.export import register
from electra_ablate.data.tokenizer import save_tokenizer, train_wordpiece
from electra_ablate.infra.errors import AblateError
from electra_ablate.pretraining.objective import KeptModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

DOCUMENTS = [
    (
        "The quick brown fox jumps over the lazy dog.",
        "A Café in Zürich serves naïve tourists strong coffee.",
        "Dogs and foxes rarely share the same garden, said the gardener.",
    )
] * 10
SENTENCES = ["The lazy Fox drinks coffee in Zürich!", "A dog.", "Gardens, foxes and the café"]


def make_kept_dir(tmp_path: Path, role: str, embedding_size: int, lowercase: bool = True) -> Path:
    tokenizer = train_wordpiece(DOCUMENTS, vocab_size=150, lowercase=lowercase)
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    save_tokenizer(tokenizer, tok_dir)
    cfg = BackboneConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=48,
        embedding_size=embedding_size,
        max_seq_len=32,
        layer_norm_eps=1e-7,
    )
    torch.manual_seed(0)
    encoder = Encoder(cfg)
    head = TokenBinaryHead(cfg) if role == "discriminator" else MLMHead(cfg, cfg.embedding_size)
    with torch.no_grad():  # random non-trivial values everywhere, LayerNorms and biases included
        for p in [*encoder.parameters(), *head.parameters()]:
            p.add_(torch.randn_like(p) * 0.1)
    kept_dir = tmp_path / "kept"
    save_kept(kept_dir, KeptModel(encoder, role, head), tok_dir, {"objective": "test"})
    return kept_dir


@pytest.mark.parametrize("embedding_size", [16, 32], ids=["projected", "same-size"])
@pytest.mark.parametrize("role", ["discriminator", "mlm"])
def test_export_loads_in_transformers_and_matches(tmp_path, role, embedding_size):
    transformers = pytest.importorskip("transformers")
    kept_dir = make_kept_dir(tmp_path, role, embedding_size)
    out = export_hf(kept_dir, tmp_path / "hf")
    assert sorted(p.name for p in out.iterdir()) == sorted(EXPORTED_FILES)

    architecture = {"discriminator": "ElectraForPreTraining", "mlm": "ElectraForMaskedLM"}[role]
    cls = getattr(transformers, architecture)
    hf, info = cls.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert not info["mismatched_keys"] and not info["error_msgs"]
    _, base_info = transformers.ElectraModel.from_pretrained(out, output_loading_info=True)
    assert not base_info["missing_keys"]  # only the head's tensors are left over for the bare model
    assert all(k.startswith(("discriminator_", "generator_")) for k in base_info["unexpected_keys"])
    assert hasattr(hf.electra, "embeddings_project") == (embedding_size != 32)
    if role == "mlm":  # the output matrix must be the (tied) token embeddings, not a random init
        word = hf.electra.embeddings.word_embeddings.weight
        assert hf.generator_lm_head.weight.data_ptr() == word.data_ptr()

    ours = load_kept(kept_dir).model
    ours.encoder.eval()
    ours.head.eval()
    hf.eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    batch = tokenizer(SENTENCES[:2], SENTENCES[1:], padding=True, return_tensors="pt")
    assert not bool(batch["attention_mask"].all()), "the batch must contain padding"
    with torch.no_grad():
        hidden = ours.encoder(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        hf_out = hf(**batch, output_hidden_states=True)
        real = batch["attention_mask"].bool()
        close = {"atol": 1e-5, "rtol": 1e-5}
        torch.testing.assert_close(hf_out.hidden_states[-1][real], hidden[real], **close)
        if role == "discriminator":
            logits = ours.head(hidden)
        else:
            logits = ours.head(hidden, ours.encoder.embeddings.word.weight)
        torch.testing.assert_close(hf_out.logits[real], logits[real], **close)


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_exported_tokenizer_gives_our_ids(tmp_path, lowercase):
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    kept_dir = make_kept_dir(tmp_path, "discriminator", 16, lowercase)
    out = export_hf(kept_dir, tmp_path / "hf")
    ours = Tokenizer.from_file(str(kept_dir / "tokenizer.json"))
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    for a, b in zip(SENTENCES, SENTENCES[1:] + SENTENCES[:1], strict=True):
        mine = ours.encode(a, b)
        got = theirs(a, b)
        assert got["input_ids"] == mine.ids
        assert got["token_type_ids"] == mine.type_ids
    assert theirs.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == [0, 1, 2, 3, 4]
    assert theirs.mask_token_id == 4 and theirs.pad_token_id == 0


def test_qkv_split_into_query_key_value(tmp_path):
    kept = load_kept(make_kept_dir(tmp_path, "discriminator", 16)).model
    tensors = hf_state_dict(kept)
    qkv = kept.encoder.layers[1].attention.qkv
    prefix = "electra.encoder.layer.1.attention.self"
    fused = torch.cat([tensors[f"{prefix}.{w}.weight"] for w in ("query", "key", "value")])
    torch.testing.assert_close(fused, qkv.weight.detach())
    assert tensors[f"{prefix}.value.bias"].shape == (32,)
    assert "generator_lm_head.weight" not in tensors


def test_config_json_describes_the_backbone(tmp_path):
    kept_dir = make_kept_dir(tmp_path, "mlm", 16)
    config = json.loads((export_hf(kept_dir, tmp_path / "hf") / "config.json").read_text())
    assert config["architectures"] == ["ElectraForMaskedLM"]
    assert (config["hidden_size"], config["embedding_size"]) == (32, 16)
    assert config["num_hidden_layers"] == 2
    assert (config["num_attention_heads"], config["intermediate_size"]) == (4, 48)
    assert config["max_position_embeddings"] == 32 and config["layer_norm_eps"] == 1e-7
    assert config["hidden_act"] == "gelu" and config["model_type"] == "electra"


def test_export_refuses_to_replace_unrelated_folder(tmp_path):
    kept_dir = make_kept_dir(tmp_path, "discriminator", 16)
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(AblateError, match="refusing to replace"):
        export_hf(kept_dir, precious)
    assert (precious / "notes.txt").read_text() == "keep me"
    with pytest.raises(AblateError, match="refusing to replace"):
        export_hf(kept_dir, kept_dir)
    with pytest.raises(AblateError, match="is a file"):
        export_hf(kept_dir, precious / "notes.txt")
    export_hf(kept_dir, tmp_path / "hf")
    export_hf(kept_dir, tmp_path / "hf")  # a previous export is replaced


def test_export_command(tmp_path):
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps typer in multi-command mode
    kept_dir = make_kept_dir(tmp_path, "discriminator", 16)
    result = CliRunner().invoke(app, ["export", str(kept_dir), "--out", str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    assert "ElectraForPreTraining" in result.output
    assert (tmp_path / "hf" / "model.safetensors").exists()
    nowhere = [str(tmp_path / "nope"), "--out", str(tmp_path / "x")]
    missing = CliRunner().invoke(app, ["export", *nowhere])
    assert isinstance(missing.exception, AblateError) and "missing" in str(missing.exception)


def test_export_refuses_a_kept_vocab_txt_that_disagrees_with_tokenizer_json(tmp_path):
    """A kept encoder whose vocab.txt was cut (copied from a damaged cache, manifest and all)
    would export a folder that tokenizes differently depending on the file a reader takes."""
    kept_dir = make_kept_dir(tmp_path, "discriminator", 16)
    vocab = tmp_path / "tok" / "vocab.txt"
    lines = vocab.read_text(encoding="utf-8").splitlines(keepends=True)
    vocab.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8")
    damaged = tmp_path / "damaged"
    save_kept(damaged, load_kept(kept_dir).model, tmp_path / "tok", {"objective": "test"})
    with pytest.raises(AblateError, match=r"vocab.txt has \d+ tokens, its tokenizer.json \d+") as e:
        export_hf(damaged, tmp_path / "hf")
    assert str(e.value).startswith(f"cannot export {damaged}:") and e.value.exit_code == 2
    assert not (tmp_path / "hf").exists()
