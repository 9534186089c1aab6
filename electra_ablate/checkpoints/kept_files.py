"""The files of a kept-encoder folder, and how to check them without loading them.

Torch-free, so that ``ablate status`` and ``ablate report`` can say which kept encoders are
missing or damaged at once; ``kept.py`` saves and loads them.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from electra_ablate.infra.manifest import read_manifest, verify_manifest

WEIGHTS_FILE = "kept.safetensors"
META_FILE = "kept.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")


def weights_elsewhere(directory: Path) -> bool:
    """A kept folder that arrived in a result pack: its ``kept.json`` alone, which says which
    checkpoint a fine-tune used. Packs carry no weights, by design; they stay on the machine
    that trained them, so this is no damage."""
    directory = Path(directory)
    return directory.is_dir() and [p.name for p in directory.iterdir()] == [META_FILE]


def kept_problem(directory: Path) -> str | None:
    """What is wrong with a kept folder, or None: ``missing``, a file failing the manifest's
    checksum, or (no manifest) a file that cannot be read. Reads, never writes, and is cheap for
    a folder without a manifest: its weights file is checked against its own header."""
    directory = Path(directory)
    if not (directory / META_FILE).exists() and not (directory / WEIGHTS_FILE).exists():
        return "missing"
    try:
        has_manifest = read_manifest(directory) is not None
    except ValueError as exc:
        return str(exc)
    if has_manifest:
        return verify_manifest(directory)
    for name in (META_FILE, WEIGHTS_FILE):
        if not (directory / name).is_file():
            return f"{name} is missing"
    try:
        meta = json.loads((directory / META_FILE).read_text())
        if not isinstance(meta, dict) or "backbone" not in meta or "role" not in meta:
            return f"{META_FILE} is incomplete"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"{META_FILE} is not valid JSON"
    return safetensors_problem(directory / WEIGHTS_FILE)


def safetensors_problem(path: Path) -> str | None:
    """None if the file's header parses and its size is what the header says (a truncated or
    overwritten file is not); the tensors themselves are only covered by a checksum."""
    try:
        with Path(path).open("rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if length > 100_000_000:
                return f"{path.name} has no valid header"
            header = json.loads(f.read(length))
        end = max(
            (v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0
        )
    except (OSError, struct.error, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return f"{path.name} has no valid header"
    if Path(path).stat().st_size != 8 + length + end:
        return f"{path.name} is truncated or padded"
    return None
