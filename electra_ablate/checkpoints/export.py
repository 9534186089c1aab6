"""Export a kept model to Hugging Face ``transformers`` ELECTRA format, without ``transformers``.

The output folder loads with ``ElectraForPreTraining.from_pretrained`` (a discriminator) or
``ElectraForMaskedLM.from_pretrained`` (an MLM encoder), and ``AutoTokenizer.from_pretrained``.
Everything is written by hand (config.json, safetensors, tokenizer files) so exporting needs only
the core install; ``transformers`` is needed to *load* the result, not to make it.

Two things differ from our layout: we fuse query/key/value into one ``qkv`` Linear (split here
into three), and the MLM head's output matrix is the token embedding matrix, which HF ties too
(``generator_lm_head.weight`` is left out of the file; HF re-ties it on load, as it does for its
own checkpoints).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.tokens import SPECIAL_TOKENS
from electra_ablate.checkpoints.kept import TOKENIZER_FILES, KeptModel, load_kept
from electra_ablate.data.tokenizer import tokenizer_files_disagree
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.storage import atomic_dir, atomic_write_text

ARCHITECTURES = {"discriminator": "ElectraForPreTraining", "mlm": "ElectraForMaskedLM"}
EXPORTED_FILES = (
    "config.json",
    "model.safetensors",
    *TOKENIZER_FILES,
    "tokenizer_config.json",
    "special_tokens_map.json",
)

# Our module path -> HF module path (parameter names, weight/bias, are the same on both sides).
EMBEDDING_NAMES = {
    "embeddings.word": "electra.embeddings.word_embeddings",
    "embeddings.position": "electra.embeddings.position_embeddings",
    "embeddings.token_type": "electra.embeddings.token_type_embeddings",
    "embeddings.norm": "electra.embeddings.LayerNorm",
    "project": "electra.embeddings_project",
}
BLOCK_NAMES = {
    "attention.out": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "ffn_in": "intermediate.dense",
    "ffn_out": "output.dense",
    "ffn_norm": "output.LayerNorm",
}
HEAD_NAMES = {
    "discriminator": {
        "dense": "discriminator_predictions.dense",
        "logit": "discriminator_predictions.dense_prediction",
    },
    "mlm": {"dense": "generator_predictions.dense", "norm": "generator_predictions.LayerNorm"},
}
LAYER = re.compile(r"layers\.(\d+)\.(.+)")


def hf_config(cfg: BackboneConfig, role: str) -> dict[str, Any]:
    """``ElectraConfig`` fields. Our GELU is the exact erf form, which HF calls ``gelu``."""
    return {
        "architectures": [ARCHITECTURES[role]],
        "model_type": "electra",
        "vocab_size": cfg.vocab_size,
        "embedding_size": cfg.embedding_size,
        "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "intermediate_size": cfg.intermediate_size,
        "hidden_act": "gelu",
        "hidden_dropout_prob": cfg.dropout,
        "attention_probs_dropout_prob": cfg.attention_dropout,
        "max_position_embeddings": cfg.max_seq_len,
        "type_vocab_size": cfg.type_vocab_size,
        "initializer_range": cfg.initializer_range,
        "layer_norm_eps": cfg.layer_norm_eps,
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
        "tie_word_embeddings": True,
    }


def hf_state_dict(kept: KeptModel) -> dict[str, torch.Tensor]:
    """Our encoder + head tensors under the names HF's ELECTRA classes expect.

    Every tensor we hold is renamed or split; an unexpected name is an error, so a future change
    to the backbone cannot silently drop weights from an export. The encoder is taken as the
    ordinary ``Encoder`` it computes as (``plain_state_dict``: a ``tying: gdes`` encoder's
    tables summed), as ``save_kept`` writes it.
    """
    out: dict[str, torch.Tensor] = {}
    for name, tensor in kept.encoder.plain_state_dict().items():
        module, param = name.rsplit(".", 1)
        layer = LAYER.fullmatch(module)
        if layer is None:
            out[f"{_lookup(EMBEDDING_NAMES, module, name)}.{param}"] = tensor
            continue
        index, part = layer.groups()
        prefix = f"electra.encoder.layer.{index}"
        if part == "attention.qkv":
            for which, piece in zip(("query", "key", "value"), tensor.chunk(3, dim=0), strict=True):
                out[f"{prefix}.attention.self.{which}.{param}"] = piece
        else:
            out[f"{prefix}.{_lookup(BLOCK_NAMES, part, name)}.{param}"] = tensor
    for name, tensor in kept.head.state_dict().items():
        out[hf_head_name(kept.role, name)] = tensor
    # safetensors refuses views into shared storage (the q/k/v chunks): give each its own copy.
    return {k: v.detach().cpu().contiguous().clone() for k, v in out.items()}


def hf_head_name(role: str, name: str) -> str:
    """The HF name of one of our head tensors: the MLM head's output bias is the bias of HF's
    ``generator_lm_head`` (whose weight is the tied token embedding matrix), the rest is
    ``HEAD_NAMES``."""
    if role == "mlm" and name == "bias":
        return "generator_lm_head.bias"
    module, param = name.rsplit(".", 1)
    return f"{_lookup(HEAD_NAMES[role], module, name)}.{param}"


def _lookup(table: dict[str, str], module: str, name: str) -> str:
    if module not in table:
        raise InputError(f"cannot export tensor {name!r}: no Hugging Face ELECTRA equivalent")
    return table[module]


def tokenizer_config(tokenizer_json: Path, max_seq_len: int) -> dict[str, Any]:
    """``tokenizer_config.json`` matching our tokenizer's normaliser.

    transformers 5.x rebuilds a BERT tokenizer's normaliser from these fields rather than taking
    it from tokenizer.json (``do_lower_case`` defaults to True), so a cased vocabulary must say so.
    """
    normalizer = json.loads(tokenizer_json.read_text(encoding="utf-8")).get("normalizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        raise InputError(
            f"cannot export {tokenizer_json}: its normaliser is {normalizer.get('type')!r}, "
            "not the BertNormalizer a Hugging Face ELECTRA tokenizer uses"
        )
    names = dict(
        zip(
            ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"),
            SPECIAL_TOKENS,
            strict=True,
        )
    )
    return {
        "tokenizer_class": "ElectraTokenizer",
        "do_lower_case": normalizer["lowercase"],
        "strip_accents": normalizer["strip_accents"],
        "tokenize_chinese_chars": normalizer["handle_chinese_chars"],
        "model_max_length": max_seq_len,
        **names,
    }


def export_hf(kept_dir: Path, out_dir: Path) -> Path:
    """Write the kept model in ``kept_dir`` as a Hugging Face ELECTRA folder ``out_dir``.

    The folder appears whole or not at all. An existing ``out_dir`` is replaced only if it holds
    nothing but files an export writes, so ``--out`` can never wipe unrelated work.
    """
    kept_dir, out_dir = Path(kept_dir), Path(out_dir)
    loaded = load_kept(kept_dir)
    cfg = loaded.model.encoder.cfg  # what it is first: a pre-LN encoder has no HF form
    if cfg.layer_norm != "post":
        raise InputError(
            f"cannot export {kept_dir}: it is a pre-LN encoder, and Hugging Face ELECTRA is "
            "post-LN only (export needs backbone layer_norm: post)"
        )
    for name in TOKENIZER_FILES:
        if not (loaded.tokenizer_dir / name).exists():
            raise InputError(f"cannot export {kept_dir}: tokenizer file {name} is missing")
    # Hugging Face reads either file (a slow tokenizer vocab.txt, a fast one tokenizer.json):
    # exported files that disagree would tokenize differently depending on which one it takes.
    if (problem := tokenizer_files_disagree(loaded.tokenizer_dir)) is not None:
        raise InputError(f"cannot export {kept_dir}: {problem} (damaged?)")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"cannot export to {out_dir}: it is a file, not a folder")
    if out_dir.exists():
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in EXPORTED_FILES)
        if foreign:
            raise InputError(
                f"refusing to replace {out_dir}: it holds files an export does not write "
                f"({', '.join(foreign[:3])}); choose an empty or new --out"
            )
    tok_config = tokenizer_config(loaded.tokenizer_dir / "tokenizer.json", cfg.max_seq_len)
    vocab_lines = (loaded.tokenizer_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    if len(vocab_lines) > cfg.vocab_size:
        raise InputError(
            f"cannot export {kept_dir}: vocab.txt has {len(vocab_lines)} tokens but the model "
            f"only {cfg.vocab_size} embeddings"
        )
    tensors = hf_state_dict(loaded.model)
    with atomic_dir(out_dir) as tmp:
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        _write_json(tmp / "config.json", hf_config(cfg, loaded.model.role))
        _write_json(tmp / "tokenizer_config.json", tok_config)
        _write_json(
            tmp / "special_tokens_map.json",
            {k: v for k, v in tok_config.items() if k.endswith("_token")},
        )
        for name in TOKENIZER_FILES:
            shutil.copy2(loaded.tokenizer_dir / name, tmp / name)
    return out_dir


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")
