"""The encoder backbone's options: post-LN (the paper's, the default) and pre-LN (a deviation
offered for faster training at small scale)."""

from __future__ import annotations

import pytest
import torch

from electra_ablate.backbone.config import preset
from electra_ablate.backbone.model import Encoder, TokenBinaryHead
from electra_ablate.checkpoints.export import export_hf
from electra_ablate.checkpoints.kept import save_kept
from electra_ablate.evaluation.finetune.classifier import GlueClassifier, layer_depth
from electra_ablate.infra.errors import AblateError
from electra_ablate.pretraining.flops import LAYER_NORM, encoder_forward_flops
from electra_ablate.pretraining.objective import KeptModel

POST = preset("micro").with_overrides(vocab_size=100, max_seq_len=16, dropout=0.0)
PRE = POST.with_overrides(layer_norm="pre")


def test_post_ln_is_the_default_as_in_bert_and_electra():
    assert preset("small").layer_norm == "post"
    assert Encoder(POST).final_norm is None


def test_pre_ln_normalises_before_each_sublayer_and_once_at_the_end():
    torch.manual_seed(0)
    encoder = Encoder(PRE).eval()
    x = torch.randn(2, 16, PRE.hidden_size)
    block = encoder.layers[0]
    with torch.no_grad():
        h = x + block.attention(block.attention_norm(x), None)
        expected = h + block.ffn(block.ffn_norm(h))
        torch.testing.assert_close(block(x, None), expected)
        out = encoder(torch.randint(5, 100, (2, 16)))
    # the final LayerNorm: zero mean and unit variance per token (gain 1, bias 0 at init)
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 16), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.std(-1, unbiased=False), torch.ones(2, 16), atol=1e-3, rtol=0)


def test_pre_ln_costs_one_more_layer_norm_per_token_in_the_paper_convention():
    extra = encoder_forward_flops(PRE, 16, "paper") - encoder_forward_flops(POST, 16, "paper")
    assert extra == 16 * LAYER_NORM * PRE.hidden_size
    assert encoder_forward_flops(PRE, 16, "standard") == encoder_forward_flops(POST, 16, "standard")


def test_fine_tuning_puts_the_final_norm_with_the_top_layer():
    model = GlueClassifier(Encoder(PRE), 2, 0.1)
    names = [n for n, _ in model.named_parameters() if "final_norm" in n]
    assert names and all(layer_depth(n, PRE.num_layers) == PRE.num_layers for n in names)


def test_a_pre_ln_encoder_cannot_be_exported_as_hugging_face_electra(tmp_path):
    tok = tmp_path / "tok"
    tok.mkdir()
    for name in ("tokenizer.json", "vocab.txt"):
        (tok / name).write_text("{}" if name.endswith("json") else "[PAD]\n")
    save_kept(
        tmp_path / "kept", KeptModel(Encoder(PRE), "discriminator", TokenBinaryHead(PRE)), tok, {}
    )
    with pytest.raises(AblateError, match="pre-LN"):
        export_hf(tmp_path / "kept", tmp_path / "hf")
