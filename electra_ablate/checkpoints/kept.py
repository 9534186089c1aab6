"""Save and load the encoder an objective keeps for fine-tuning, self-contained.

A kept-model directory holds ``kept.safetensors`` (``encoder.*`` and ``head.*`` tensors),
``kept.json`` (backbone config of the encoder, its role, objective name and params), the
tokenizer files (``tokenizer.json``, ``vocab.txt``), so fine-tuning and export need nothing else,
and ``manifest.json``: the sha256 of every other file, written atomically with them.

Every load verifies the manifest, so a truncated, flipped or half-copied kept encoder is named,
never fine-tuned or exported. A folder written before manifests existed is trusted on first use:
if its files load cleanly, its manifest is written then.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.checkpoints.kept_files import META_FILE, TOKENIZER_FILES, WEIGHTS_FILE
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.manifest import MANIFEST, verify_manifest, write_manifest
from electra_ablate.infra.storage import atomic_dir, atomic_write_text

KeptRole = Literal["discriminator", "mlm"]
"""What the kept head is: fine-tuning drops it, export writes ``ElectraForPreTraining`` for a
discriminator and ``ElectraForMaskedLM`` for an MLM encoder."""
KEPT_ROLES: tuple[str, ...] = get_args(KeptRole)


@dataclass
class KeptModel:
    """What fine-tuning and export take from a pre-trained objective."""

    encoder: Encoder
    role: KeptRole
    head: nn.Module

    def __post_init__(self) -> None:
        if self.role not in KEPT_ROLES:
            raise ValueError(f"KeptModel role {self.role!r} is not one of {KEPT_ROLES}")


@dataclass
class LoadedKept:
    model: KeptModel
    meta: dict[str, Any]
    tokenizer_dir: Path


def save_kept(directory: Path, kept: KeptModel, tokenizer_dir: Path, meta: dict[str, Any]) -> None:
    """Write the kept model atomically (a half-written directory is never visible).

    The encoder is saved as the ordinary ``Encoder`` it computes as (``plain_state_dict``):
    under ``tying: gdes`` each embedding table is the generator's plus the residual, one
    table that fine-tuning, ``load_kept`` and export read like any other."""
    with atomic_dir(Path(directory)) as tmp:
        tensors = {f"encoder.{k}": v for k, v in kept.encoder.plain_state_dict().items()}
        tensors |= {f"head.{k}": v for k, v in kept.head.state_dict().items()}
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in tensors.items()},
            str(tmp / WEIGHTS_FILE),
        )
        info = {"backbone": kept.encoder.cfg.model_dump(), "role": kept.role, **meta}
        atomic_write_text(tmp / META_FILE, json.dumps(info, indent=2, sort_keys=True))
        for name in TOKENIZER_FILES:
            if (Path(tokenizer_dir) / name).exists():
                shutil.copy2(Path(tokenizer_dir) / name, tmp / name)
        write_manifest(tmp)


def load_kept(directory: Path, seal: bool = True) -> LoadedKept:
    """Rebuild the kept encoder + head; a missing or corrupt file is a one-line InputError.

    A folder with a manifest must match it. One without (written before manifests) that loads
    cleanly gets its manifest now (``seal``), so that from here on a change to it is caught.
    """
    directory = Path(directory)
    require_kept_fraction(directory)  # an absent folder the run never kept: say so first
    meta_path, weights_path = directory / META_FILE, directory / WEIGHTS_FILE
    for path in (meta_path, weights_path):
        if not path.exists():
            raise InputError(f"not a checkpoint: {path} is missing")
    legacy = not (directory / MANIFEST).exists()
    if not legacy and (problem := verify_manifest(directory)) is not None:
        raise InputError(f"corrupt checkpoint {directory}: {problem}")
    try:
        meta = json.loads(meta_path.read_text())
        tensors = load_file(str(weights_path))
    except (json.JSONDecodeError, UnicodeDecodeError, SafetensorError, OSError) as exc:
        raise InputError(f"corrupt checkpoint {directory}: {exc}") from exc
    try:
        cfg = BackboneConfig.model_validate(meta["backbone"])
        role = meta["role"]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"corrupt checkpoint {directory}: {META_FILE} is incomplete") from exc
    encoder = Encoder(cfg)
    head: torch.nn.Module
    head = TokenBinaryHead(cfg) if role == "discriminator" else MLMHead(cfg, cfg.embedding_size)
    try:
        encoder.load_state_dict({k[8:]: v for k, v in tensors.items() if k.startswith("encoder.")})
        head.load_state_dict({k[5:]: v for k, v in tensors.items() if k.startswith("head.")})
    except RuntimeError as exc:
        raise InputError(f"corrupt checkpoint {directory}: weights do not match kept.json") from exc
    if legacy and seal:
        seal_kept(directory)
    return LoadedKept(KeptModel(encoder, role, head), meta, directory)


def require_kept_fraction(directory: Path) -> None:
    """A one-line error for ``RUN/kept/<fraction>`` where the run never kept that fraction,
    naming those it keeps, before anything calls the absent folder a missing or corrupt
    checkpoint. A folder that exists (damaged or not), or that the run keeps but that is not on
    disk (deleted: a study rebuilds it), is left to the loader and the study's repair."""
    directory = Path(directory)
    if directory.exists() or directory.parent.name != "kept":
        return
    run = RunLayout(directory.parent.parent)
    on_disk = [run.kept(f).name for f in run.kept_on_disk()]
    planned = planned_fraction_names(run)
    keeps = planned if planned is not None else on_disk
    if not keeps or directory.name in keeps:
        return  # nothing says what the run keeps, or it keeps this one: not this error
    listed = [name for name in keeps if name in on_disk]
    absent = [name for name in keeps if name not in on_disk]
    found = f"kept fractions: {', '.join(listed) or 'none yet'}"
    if absent:
        found += f" (planned, not on disk: {', '.join(absent)})"
    same = [name for name in keeps if same_fraction(name, directory.name)]
    hint = f" (did you mean {run.kept_root / same[0]}?)" if same else ""
    raise InputError(f"{run.root} kept no checkpoint at fraction {directory.name}; {found}{hint}")


def planned_fraction_names(run: RunLayout) -> list[str] | None:
    """The kept folders the run's ``run.json`` says it keeps, or None where it says nothing (a
    baseline, which has no ``run.json``, or an unreadable one)."""
    try:
        fractions = json.loads(run.run_json.read_text(encoding="utf-8"))["checkpoints"]
        return [run.kept(float(f)).name for f in sorted(fractions)]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None


def same_fraction(kept: str, asked: str) -> bool:
    """``1.0`` asked where the folder is ``1``: the same fraction spelt otherwise."""
    try:
        return float(kept) == float(asked)
    except ValueError:
        return False


def seal_kept(directory: Path) -> bool:
    """Write the manifest of a kept folder that has none (trust on first use); False where the
    folder cannot be written (someone else's, or read-only), which is not an error."""
    try:
        write_manifest(Path(directory))
    except OSError:
        return False
    return True
