"""Save and load the encoder an objective keeps for fine-tuning, self-contained.

A kept-model directory holds ``kept.safetensors`` (``encoder.*`` and ``head.*`` tensors),
``kept.json`` (backbone config of the encoder, its role, objective name and params) and the
tokenizer files (``tokenizer.json``, ``vocab.txt``), so fine-tuning and export need nothing else.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from electra_ablate.config import BackboneConfig
from electra_ablate.errors import InputError
from electra_ablate.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.objective import KeptModel
from electra_ablate.storage import atomic_dir, atomic_write_text

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")


@dataclass
class LoadedKept:
    model: KeptModel
    meta: dict[str, Any]
    tokenizer_dir: Path


def save_kept(directory: Path, kept: KeptModel, tokenizer_dir: Path, meta: dict[str, Any]) -> None:
    """Write the kept model atomically (a half-written directory is never visible)."""
    with atomic_dir(Path(directory)) as tmp:
        tensors = {f"encoder.{k}": v for k, v in kept.encoder.state_dict().items()}
        tensors |= {f"head.{k}": v for k, v in kept.head.state_dict().items()}
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in tensors.items()},
            str(tmp / "kept.safetensors"),
        )
        info = {"backbone": kept.encoder.cfg.model_dump(), "role": kept.role, **meta}
        atomic_write_text(tmp / "kept.json", json.dumps(info, indent=2, sort_keys=True))
        for name in TOKENIZER_FILES:
            if (Path(tokenizer_dir) / name).exists():
                shutil.copy2(Path(tokenizer_dir) / name, tmp / name)


def load_kept(directory: Path) -> LoadedKept:
    """Rebuild the kept encoder + head; a missing or corrupt file is a one-line AblateError."""
    directory = Path(directory)
    meta_path, weights_path = directory / "kept.json", directory / "kept.safetensors"
    for path in (meta_path, weights_path):
        if not path.exists():
            raise InputError(f"not a checkpoint: {path} is missing")
    try:
        meta = json.loads(meta_path.read_text())
        tensors = load_file(str(weights_path))
    except (json.JSONDecodeError, SafetensorError, OSError) as exc:
        raise InputError(f"corrupt checkpoint {directory}: {exc}") from exc
    cfg = BackboneConfig.model_validate(meta["backbone"])
    encoder = Encoder(cfg)
    head: torch.nn.Module
    if meta["role"] == "discriminator":
        head = TokenBinaryHead(cfg)
    else:
        head = MLMHead(cfg, cfg.embedding_size)
    try:
        encoder.load_state_dict({k[8:]: v for k, v in tensors.items() if k.startswith("encoder.")})
        head.load_state_dict({k[5:]: v for k, v in tensors.items() if k.startswith("head.")})
    except RuntimeError as exc:
        raise InputError(f"corrupt checkpoint {directory}: weights do not match kept.json") from exc
    return LoadedKept(KeptModel(encoder, meta["role"], head), meta, directory)
