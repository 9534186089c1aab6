"""Checksum manifests: ``manifest.json`` maps each file of a folder to its sha256, written
atomically with the folder, so a training state or a kept encoder is either verified whole or
named as damaged (a truncated copy, a flipped bit, a half-synced folder) before anything uses it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from electra_ablate.infra.storage import atomic_write_text

MANIFEST = "manifest.json"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def folder_digests(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` (not its manifest) with its sha256, by name."""
    return {
        p.name: sha256(p)
        for p in sorted(Path(folder).iterdir())
        if p.is_file() and p.name != MANIFEST
    }


def write_manifest(folder: Path) -> dict[str, str]:
    digests = folder_digests(folder)
    atomic_write_text(Path(folder) / MANIFEST, json.dumps(digests, indent=1, sort_keys=True))
    return digests


def read_manifest(folder: Path) -> dict[str, str] | None:
    """The manifest's digests; None if there is none; ValueError if it is unreadable."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return None
    try:
        digests = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{MANIFEST} is corrupt") from exc
    if not isinstance(digests, dict) or not all(isinstance(v, str) for v in digests.values()):
        raise ValueError(f"{MANIFEST} is corrupt")
    return digests


def verify_manifest(folder: Path) -> str | None:
    """None if ``folder`` has a manifest and every file in it matches; else what is wrong."""
    try:
        expected = read_manifest(folder)
    except ValueError as exc:
        return str(exc)
    if expected is None:
        return f"no {MANIFEST}"
    for name, digest in expected.items():
        path = Path(folder) / name
        if not path.is_file():
            return f"{name} is missing"
        if sha256(path) != digest:
            return f"{name} fails its checksum"
    return None
