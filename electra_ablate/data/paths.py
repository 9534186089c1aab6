"""Where data comes from and where derived data is cached."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from electra_ablate.data.bundle import active_bundle, not_in_bundle
from electra_ablate.infra.errors import DataError

_UNSET_DATA_DIR = "${ABLATE_DATA_DIR}"


def resolve_path(raw: str, spec_dir: Path | None) -> Path:
    """A data path of the spec made absolute relative to the spec's folder.

    With a data bundle in use (``ABLATE_CACHE``, ``--data-bundle``), a path that names an unset
    variable is looked up only after the bundle was found not to hold its data (the bundle
    stands in for the raw data on a node without it): then the bundle is the cause to name,
    not the variable.
    """
    if "${" in raw and (bundle := active_bundle()) is not None:
        raise DataError(not_in_bundle(bundle, raw))
    return local_path(raw, spec_dir)


def local_path(raw: str, spec_dir: Path | None) -> Path:
    """A spec path made absolute relative to the spec's folder.

    The spec loader expands ``${VAR}``; an unset variable is left as written, which would
    otherwise surface later as a baffling "file not found" deep inside a folder called
    ``${ABLATE_DATA_DIR}``.
    """
    if _UNSET_DATA_DIR in raw:
        raise DataError(
            f"data path {raw!r} uses ABLATE_DATA_DIR, which is not set: set ABLATE_DATA_DIR "
            "to the folder holding corpus/ and glue/ (e.g. ../shared/data)"
        )
    if "${" in raw:
        raise DataError(f"data path {raw!r} names an environment variable that is not set")
    path = Path(raw).expanduser()
    if not path.is_absolute() and spec_dir is not None:
        path = Path(spec_dir) / path
    return path


def cache_root(cache_dir: str | None, spec_dir: Path | None) -> Path:
    """``data.cache_dir``, else ``$ABLATE_CACHE``, else ``~/.cache/electra-ablate``."""
    if cache_dir is not None:  # where the cache is, never what a bundle holds
        return local_path(cache_dir, spec_dir)
    if os.environ.get("ABLATE_CACHE"):
        return Path(os.environ["ABLATE_CACHE"]).expanduser()
    return Path.home() / ".cache" / "electra-ablate"


def settings_hash(settings: dict) -> str:
    """A short, stable name for a cache entry built from exactly these settings."""
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.blake2b(blob, digest_size=10).hexdigest()


def file_hash(path: Path) -> str:
    """Content hash, so a cache survives moving the data and notices any edit to it."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
