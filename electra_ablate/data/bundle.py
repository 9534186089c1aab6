"""Data bundles, read: a study's prepared data in one relocatable folder, for offline nodes.

``ablate data prepare SPEC --bundle DIR`` (``electra_ablate.scaleout.bundle``) writes, for every
data setting of the spec (each variant's corpus, tokenizer and sequence length):

- ``tokenizers/<key>/`` and ``pretraining/<key>/``: the tokenizer and the packed sequences,
  copied from the cache as they are, under the same names, so ``DIR`` is laid out as a data
  cache and ``ABLATE_CACHE=DIR`` finds them;
- ``<family>/<task folder>/``: the data of every evaluated task, copied byte for byte (a GLUE
  task's parquet or tsv folder), so its fingerprint, a hash of the folder's file names and
  contents, is the one the raw data gives;
- ``bundle.json``: which data settings the bundle holds and where, all paths relative to it.

A run pointed at the bundle (``ABLATE_CACHE=DIR`` or ``ablate run --data-bundle DIR``) uses the
raw data where it is present, as usual; where it is not (a node with no corpus, no GLUE folder,
``ABLATE_DATA_DIR`` unset or pointing nowhere) it reads the bundle. Nothing is recomputed from
the bundle's copies that could differ from the raw data's: the tokenizer folder's name (a hash
of the corpus and tokenizer settings), the packing summary and the task files are the same
bytes, so run ids, fine-tune job ids and task fingerprints equal those of a run on the raw data.

A bundle holds no paths of the machine that made it; it matches a data setting by everything
the spec says of it except where its files live (``corpus.paths``, ``glue``, ``cache_dir``,
``tokenizer.vocab_file``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from electra_ablate.infra.errors import DataError, InputError

BUNDLE_FILE = "bundle.json"
BUNDLE_FORMAT = "electra-ablate data bundle"
BUNDLE_VERSION = 1
CACHE_VARIABLE = "ABLATE_CACHE"
GLUE_FOLDER = "glue"
WHERE_FILES_LIVE = (("corpus", "paths"), ("glue",), ("cache_dir",), ("tokenizer", "vocab_file"))
"""Data spec fields that say where files are on one machine, not what the data is."""


def read_bundle(root: Path) -> dict[str, Any]:
    """``bundle.json`` of the bundle at ``root``, or one line saying why it is not one."""
    root = Path(root)
    manifest = root / BUNDLE_FILE
    make = "make one with `ablate data prepare SPEC --bundle DIR`"
    if not root.is_dir():
        raise InputError(f"data bundle {root} does not exist ({make})")
    if not manifest.is_file():
        raise InputError(f"{root} is not a data bundle: it has no {BUNDLE_FILE} ({make})")
    try:
        bundle = json.loads(manifest.read_text(encoding="utf-8"))
        if bundle.get("format") != BUNDLE_FORMAT or not isinstance(bundle.get("data"), list):
            raise ValueError("not a bundle manifest")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise InputError(f"{manifest} is not a data bundle manifest ({exc})") from None
    if bundle.get("version") != BUNDLE_VERSION:
        raise InputError(
            f"{root}: bundle version {bundle.get('version')} (this toolkit reads version "
            f"{BUNDLE_VERSION}): prepare it again with this version"
        )
    return bundle


def use_bundle(root: Path) -> Path:
    """Point this process and every process it starts (workers, local jobs) at the bundle."""
    read_bundle(root)
    root = Path(root).resolve()
    os.environ[CACHE_VARIABLE] = str(root)
    return root


def active_bundle() -> Path | None:
    """The bundle ``ABLATE_CACHE`` names, if it names one (else None: a plain cache)."""
    raw = os.environ.get(CACHE_VARIABLE)
    if not raw or not (Path(raw).expanduser() / BUNDLE_FILE).is_file():
        return None
    return Path(raw).expanduser()


def data_settings(data: Any, max_seq_len: int, packing: dict[str, Any]) -> dict[str, Any]:
    """What a bundle knows a data setting by: the data spec without where its files live."""
    settings = json.loads(json.dumps(data.model_dump(mode="json")))
    for path in WHERE_FILES_LIVE:
        node = settings
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    return {"data": settings, "max_seq_len": max_seq_len, "packing": packing}


def bundled_pretraining(
    data: Any, max_seq_len: int, packing: dict[str, Any]
) -> tuple[Path, Path] | None:
    """The active bundle's tokenizer and packed-sequence folders for this data setting, or
    None where no bundle is active or it lacks the setting."""
    root = active_bundle()
    if root is None:
        return None
    wanted = data_settings(data, max_seq_len, packing)
    found = [e for e in read_bundle(root)["data"] if e.get("settings") == wanted]
    if not found:
        return None
    if len(found) > 1:
        raise DataError(
            f"the data bundle {root} holds {len(found)} corpora with these settings (they differ "
            "only in their files): make one bundle per corpus"
        )
    tokenizer, packed = root / found[0]["tokenizer"], root / found[0]["packed"]
    for folder in (tokenizer, packed):
        if not folder.is_dir():
            raise DataError(f"the data bundle {root} is incomplete: {folder} is missing")
    return tokenizer, packed


def not_in_bundle(root: Path, raw: str) -> str:
    """Why the data at the spec path ``raw`` cannot be read on a node that relies on the bundle
    at ``root``: the bundle does not hold it (it was made for another spec), and ``raw`` names
    a variable that is not set here, so there is no raw data to fall back on."""
    try:
        study = read_bundle(root).get("study")
    except InputError:  # checked when the bundle was chosen; said plainly if it broke since
        study = None
    made_for = f" (made for study {study!r})" if study else ""
    unset = re.search(r"\$\{(\w+)\}", raw)
    variable = unset.group(1) if unset else "the variable it names"
    return (
        f"the data bundle {root}{made_for} does not hold this spec's data at {raw!r}: make "
        f"one for this spec with `ablate data prepare SPEC --bundle DIR`, or set {variable} "
        "to read the raw data"
    )


def bundled_task_folder(family: str) -> Path | None:
    """Where the active bundle keeps a task family's data, if it does."""
    root = active_bundle()
    if root is None or not (root / family).is_dir():
        return None
    return root / family
