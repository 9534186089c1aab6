"""Import a Hugging Face ELECTRA or BERT checkpoint as a ``LoadedKept``, without ``transformers``.

A published encoder (``google/electra-small-discriminator``, ``bert-base-uncased``) then goes
through exactly the fine-tuning recipe our own pre-trained encoders get, so it can stand beside
them as a reference row. This is the reverse of ``electra_ablate.checkpoints.export`` and shares
its name tables, so the two directions cannot drift apart.

Only the encoder is imported. Pre-training heads (ELECTRA's discriminator/generator heads, BERT's
MLM and next-sentence heads) are not needed for fine-tuning and get a fresh, seeded head of the
matching role instead. BERT's pooler is dropped too: fine-tuning here puts its linear head on the
raw ``[CLS]`` vector, as ELECTRA does, which differs from BERT's own GLUE recipe (a linear head
on the tanh pooler); a BERT row is therefore "BERT weights under the ELECTRA recipe".

The tokenizer is rebuilt as our ``tokenizer.json`` (WordPiece, BERT normaliser, ``[CLS] A [SEP]
B [SEP]``) in a folder of its own, from the checkpoint's ``tokenizer.json`` or ``vocab.txt`` and
the normaliser settings in ``tokenizer_config.json``. Those settings, not the normaliser stored in
``tokenizer.json``, are what ``transformers`` applies (``do_lower_case`` defaults to true), so the
ids match what ``AutoTokenizer.from_pretrained`` gives for the same folder.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import Tokenizer, normalizers

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.backbone.tokens import SPECIAL_TOKENS
from electra_ablate.checkpoints.export import BLOCK_NAMES, EMBEDDING_NAMES
from electra_ablate.checkpoints.kept import KeptModel, LoadedKept
from electra_ablate.data.tokenizer import load_vocab_file, save_tokenizer
from electra_ablate.infra.errors import DataError, InputError

SUPPORTED_TYPES = ("electra", "bert")
EXACT_GELU = ("gelu", "gelu_python")
"""HF activation names that are the exact erf GELU our encoder computes ("gelu_new" and
"gelu_pytorch_tanh" are the tanh approximation: close, but not the same network)."""

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_CLASSES = ("BertTokenizer", "ElectraTokenizer")
HUB_TEXT_FILES = ["config.json", "tokenizer_config.json", "tokenizer.json", "vocab.txt"]
HUB_WEIGHT_PATTERNS = (
    ["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"],
    ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"],
)
HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")

# What ``transformers`` assumes when config.json leaves a field out (its class defaults).
HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "electra": {
        "vocab_size": 30522,
        "embedding_size": 128,
        "hidden_size": 256,
        "num_hidden_layers": 12,
        "num_attention_heads": 4,
        "intermediate_size": 1024,
    },
    "bert": {
        "vocab_size": 30522,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
}
SHARED_DEFAULTS: dict[str, Any] = {
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
}
IGNORED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
"""Index buffers some checkpoints carry; they are recomputed, never learnt."""
LAYER = re.compile(r"layers\.(\d+)\.(.+)")


def is_hub_name(name: str) -> bool:
    """True for ``org/name`` that is not a local path, so a mistyped local path like
    ``runs/kept`` (whose ``runs`` exists) is reported as a path, not looked up on the hub."""
    if not HUB_NAME.fullmatch(name):
        return False
    return not Path(name).exists() and not Path(name.split("/", 1)[0]).exists()


def is_hf_folder(path: Path) -> bool:
    """``kept.json`` wins over ``config.json``: a kept folder is our own, richer description."""
    return (path / "config.json").is_file() and not (path / "kept.json").exists()


def load_hf(source: str | Path, tokenizer_dir: Path | None = None) -> LoadedKept:
    """A local Hugging Face folder or hub name as a ``LoadedKept`` (encoder weights imported,
    fresh head, our tokenizer files in ``tokenizer_dir`` or in a temporary folder that lives
    as long as the returned object)."""
    local = Path(source).expanduser()
    folder = local if local.is_dir() else _download(str(source))
    config = _read_json(folder / "config.json", source)
    model_type = config.get("model_type")
    if model_type is None:
        raise InputError(
            f"cannot import {source}: config.json has no model_type (supported: "
            f"{', '.join(SUPPORTED_TYPES)})"
        )
    if model_type not in SUPPORTED_TYPES:
        raise InputError(
            f"cannot import {source}: model_type {model_type!r} in config.json is not supported "
            f"(supported: {', '.join(SUPPORTED_TYPES)})"
        )
    cfg = backbone_config(config, model_type, source)
    tokenizer = hf_tokenizer(folder, cfg.vocab_size, source)
    tensors = read_weights(folder, source)
    encoder_tensors, role = _encoder_tensors(tensors, model_type, config)

    with torch.random.fork_rng(devices=[]):  # the same fresh head on every import; CPU only
        torch.manual_seed(0)
        encoder = Encoder(cfg)
        head = TokenBinaryHead(cfg) if role == "discriminator" else MLMHead(cfg, cfg.embedding_size)
    encoder.load_state_dict(ours_from_hf(encoder, encoder_tensors, model_type, source))

    meta = {
        "source": str(source),
        "folder": str(folder),
        "model_type": model_type,
        "objective": f"hf:{model_type}",
        "architectures": config.get("architectures"),
        "head": "untrained (only the encoder is imported)",
    }
    kept = LoadedKept(KeptModel(encoder, role, head), meta, Path())
    if tokenizer_dir is None:
        tokenizer_dir = Path(tempfile.mkdtemp(prefix="ablate-hf-tokenizer-"))
        weakref.finalize(kept, shutil.rmtree, tokenizer_dir, ignore_errors=True)
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    save_tokenizer(tokenizer, tokenizer_dir)
    kept.tokenizer_dir = tokenizer_dir
    return kept


def backbone_config(config: dict[str, Any], model_type: str, source: str | Path) -> BackboneConfig:
    """Our backbone shape from an HF config, refusing what our encoder would compute differently
    (another activation, relative positions, causal attention) rather than approximating it."""
    values = {**SHARED_DEFAULTS, **HF_DEFAULTS[model_type], **config}
    act = values["hidden_act"]
    if act not in EXACT_GELU:
        raise InputError(
            f"cannot import {source}: hidden_act {act!r} is not supported; our encoder uses the "
            f"exact (erf) GELU, which Hugging Face calls 'gelu'"
        )
    positions = values.get("position_embedding_type") or "absolute"
    if positions != "absolute":
        raise InputError(
            f"cannot import {source}: position_embedding_type {positions!r} is not supported "
            "(only 'absolute')"
        )
    if values.get("is_decoder") or values.get("add_cross_attention"):
        raise InputError(
            f"cannot import {source}: it is configured as a decoder (is_decoder / "
            "add_cross_attention); only bidirectional encoders are supported"
        )
    hidden = values["hidden_size"]
    embedding = values["embedding_size"] if model_type == "electra" else hidden  # BERT: E = H
    try:
        return BackboneConfig(
            vocab_size=values["vocab_size"],
            hidden_size=hidden,
            num_layers=values["num_hidden_layers"],
            num_heads=values["num_attention_heads"],
            intermediate_size=values["intermediate_size"],
            embedding_size=embedding,
            max_seq_len=values["max_position_embeddings"],
            type_vocab_size=values["type_vocab_size"],
            dropout=values["hidden_dropout_prob"],
            attention_dropout=values["attention_probs_dropout_prob"],
            layer_norm_eps=values["layer_norm_eps"],
            initializer_range=values["initializer_range"],
            layer_norm="post",
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "config"
        raise InputError(
            f"cannot import {source}: config.json gives an encoder we cannot build "
            f"({where}: {error['msg']})"
        ) from None


def hf_tokenizer(folder: Path, vocab_size: int, source: str | Path) -> Tokenizer:
    """Our WordPiece tokenizer with the checkpoint's vocabulary and normaliser settings."""
    settings: dict[str, Any] = {}
    if (folder / "tokenizer_config.json").is_file():
        settings = _read_json(folder / "tokenizer_config.json", source)
    name = settings.get("tokenizer_class")
    if name is not None and str(name).removesuffix("Fast") not in TOKENIZER_CLASSES:
        raise InputError(
            f"cannot import {source}: its tokenizer_class {name!r} is not a BERT WordPiece "
            f"tokenizer (supported: {', '.join(TOKENIZER_CLASSES)})"
        )
    roles = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
    for role, expected in zip(roles, SPECIAL_TOKENS, strict=True):
        token = settings.get(role)
        token = token.get("content") if isinstance(token, dict) else token
        if token is not None and token != expected:
            raise InputError(
                f"cannot import {source}: its {role} is {token!r}; BERT/ELECTRA tokenizers use "
                f"{expected!r}"
            )
    for file_name in ("tokenizer.json", "vocab.txt"):  # transformers prefers tokenizer.json too
        if (folder / file_name).is_file():
            vocab_file = folder / file_name
            break
    else:
        raise InputError(
            f"cannot import {source}: no tokenizer in {folder} (looked for tokenizer.json and "
            "vocab.txt)"
        )
    lowercase = bool(settings.get("do_lower_case", True))
    try:
        tokenizer = load_vocab_file(vocab_file, lowercase)
    except DataError as exc:  # e.g. [PAD] not at id 0, which fine-tuning's padding assumes
        raise InputError(f"cannot import {source}: {exc}") from None
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=bool(settings.get("tokenize_chinese_chars", True)),
        strip_accents=settings.get("strip_accents"),
        lowercase=lowercase,
    )
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:
        raise InputError(
            f"cannot import {source}: its tokenizer has {size} tokens but the model only "
            f"{vocab_size} embeddings"
        )
    return tokenizer


def read_weights(folder: Path, source: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor in the checkpoint's PyTorch weights (safetensors preferred, sharded or not);
    pickles load with ``weights_only=True`` so a checkpoint cannot run code."""
    for file_name in WEIGHT_FILES:
        path = folder / file_name
        if path.is_file():
            break
    else:
        found = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
        raise InputError(
            f"cannot import {source}: no weights in {folder} (looked for model.safetensors or "
            f"pytorch_model.bin; found: {found})"
        )
    files = [path]
    if file_name.endswith(".index.json"):
        weight_map = _read_json(path, source).get("weight_map", {})
        files = [folder / shard for shard in sorted(set(weight_map.values()))]
    tensors: dict[str, torch.Tensor] = {}
    for shard in files:
        try:
            if shard.suffix == ".safetensors":
                tensors |= load_file(str(shard))
            else:
                tensors |= torch.load(shard, map_location="cpu", weights_only=True)
        except (SafetensorError, OSError, RuntimeError, ValueError, pickle.UnpicklingError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"cannot import {source}: cannot read {shard}: {first}") from None
    return tensors


def _encoder_tensors(
    tensors: dict[str, torch.Tensor], model_type: str, config: dict[str, Any]
) -> tuple[dict[str, torch.Tensor], str]:
    """The encoder's tensors without the model prefix (``electra.``/``bert.``, absent in a bare
    model), old ``gamma``/``beta`` LayerNorm names renamed, and the role the checkpoint had."""
    prefix = f"{model_type}." if any(k.startswith(f"{model_type}.") for k in tensors) else ""
    encoder: dict[str, torch.Tensor] = {}
    for key, tensor in tensors.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        if not name.startswith(("embeddings.", "embeddings_project.", "encoder.")):
            continue  # pooler, heads: not part of the encoder fine-tuning uses
        if name in IGNORED_BUFFERS:
            continue
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        encoder[re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)] = tensor
    architectures = " ".join(config.get("architectures") or [])
    generator = any(k.startswith("generator_") for k in tensors) or "MaskedLM" in architectures
    role = "mlm" if model_type == "bert" or generator else "discriminator"
    return encoder, role


def hf_names(encoder: Encoder) -> dict[str, list[str]]:
    """Our encoder's tensor names -> the (prefix-free) HF names they are made of; the fused qkv
    comes from three."""
    names: dict[str, list[str]] = {}
    for name in encoder.state_dict():
        module, param = name.rsplit(".", 1)
        layer = LAYER.fullmatch(module)
        if layer is None:
            if module not in EMBEDDING_NAMES:
                raise InputError(f"cannot import into our tensor {name!r}: no Hugging Face name")
            names[name] = [f"{EMBEDDING_NAMES[module].removeprefix('electra.')}.{param}"]
            continue
        index, part = layer.groups()
        prefix = f"encoder.layer.{index}"
        if part == "attention.qkv":
            qkv = ("query", "key", "value")
            names[name] = [f"{prefix}.attention.self.{w}.{param}" for w in qkv]
        elif part in BLOCK_NAMES:
            names[name] = [f"{prefix}.{BLOCK_NAMES[part]}.{param}"]
        else:
            raise InputError(f"cannot import into our tensor {name!r}: no Hugging Face name")
    return names


def ours_from_hf(
    encoder: Encoder, tensors: dict[str, torch.Tensor], model_type: str, source: str | Path
) -> dict[str, torch.Tensor]:
    """Our encoder's state dict built from the HF encoder tensors. A missing tensor, a left-over
    one (a part our encoder lacks) or a wrong shape is an error, never a silent partial load."""
    names = hf_names(encoder)
    wanted = {hf for parts in names.values() for hf in parts}
    missing = sorted(wanted - set(tensors))
    if missing:
        raise InputError(
            f"cannot import {source}: its weights lack {len(missing)} of the {model_type} "
            f"encoder's tensors (e.g. {missing[0]}); does config.json match the weights?"
        )
    extra = sorted(set(tensors) - wanted)
    if extra:
        raise InputError(
            f"cannot import {source}: tensor {extra[0]} has no counterpart in our encoder "
            f"({len(extra)} such tensors)"
        )
    expected = encoder.state_dict()
    state = {}
    for name, parts in names.items():
        tensor = torch.cat([tensors[p] for p in parts]) if len(parts) > 1 else tensors[parts[0]]
        if tensor.shape != expected[name].shape:
            raise InputError(
                f"cannot import {source}: {' + '.join(parts)} has shape {tuple(tensor.shape)}, "
                f"config.json implies {tuple(expected[name].shape)}"
            )
        state[name] = tensor.to(expected[name].dtype)
    return state


def _download(name: str) -> Path:
    """The hub snapshot of ``name`` (config, tokenizer files and one weights format only)."""
    if not is_hub_name(name):
        raise InputError(f"cannot import {name}: not a folder, and not a hub name (org/name)")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError
    except ImportError:
        raise InputError(
            f"cannot fetch {name!r}: huggingface_hub is not installed; pass a local folder"
        ) from None
    folder: Path | None = None
    try:
        for patterns in HUB_WEIGHT_PATTERNS:  # safetensors first; .bin only when there is none
            folder = Path(snapshot_download(name, allow_patterns=HUB_TEXT_FILES + patterns))
            if any((folder / f).is_file() for f in WEIGHT_FILES):
                break
    except RepositoryNotFoundError:
        reason = "no such model on the hub (or it is private or gated)"
    except LocalEntryNotFoundError:
        reason = "the hub is not reachable (offline or HF_HUB_OFFLINE=1) and it is not cached"
    except Exception as exc:  # HTTP errors, bad revisions, full disk: one line for the user
        lines = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {lines[0][:200] if lines else 'no details'}"
    else:
        assert folder is not None
        return folder
    raise InputError(
        f"cannot fetch Hugging Face model {name!r}: {reason}; download it where the hub is "
        "reachable and pass its local folder (config.json, model.safetensors, vocab.txt)"
    )


def _read_json(path: Path, source: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot import {source}: cannot read {path.name}: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"cannot import {source}: {path.name} is not a JSON object")
    return data
