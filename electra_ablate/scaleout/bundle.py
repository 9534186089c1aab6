"""Data bundles, written: every data setting of a study, prepared and copied into one folder.

``ablate data prepare SPEC --bundle DIR`` and ``ablate kit`` call ``write_bundle``; the layout
of a bundle and how a run reads it are ``electra_ablate.data.bundle``. Writing needs the whole
spec (its variants, its evaluation blocks), so it lives with the study; the task files a bundle
carries are each family's to say (``TaskFamily.bundle_folders``), so nothing here knows GLUE.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

from electra_ablate.data.bundle import (
    BUNDLE_FILE,
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    data_settings,
)
from electra_ablate.data.packing import PackingConfig
from electra_ablate.data.pretraining import prepare_pretraining
from electra_ablate.evaluation.task import family_of, get_task
from electra_ablate.infra.errors import InputError
from electra_ablate.infra.storage import atomic_dir, atomic_write_text
from electra_ablate.spec import StudySpec, task_settings


def write_bundle(spec: StudySpec, out: Path, log: Any = print) -> dict[str, Any]:
    """Prepare every data setting of ``spec`` (from the raw data, through the cache) and copy
    it, with its tasks' data, into the bundle folder ``out``. Returns the manifest."""
    out = Path(out)
    check_bundle_target(out)
    entries: list[dict[str, Any]] = []
    tasks: dict[str, str] = {}
    for _, variant in spec.variant_specs():
        seq_len = variant.backbone_config().max_seq_len
        prepared = prepare_pretraining(variant.data, seq_len, spec_dir=variant.spec_dir)
        settings = data_settings(variant.data, seq_len, PackingConfig().as_dict())
        entry = {
            "settings": settings,
            "tokenizer": f"tokenizers/{prepared.tokenizer_dir.name}",
            "packed": f"pretraining/{prepared.packed_dir.name}",
            "fingerprint": prepared.summary["fingerprint"],
        }
        if entry not in entries:
            copy_folder(prepared.tokenizer_dir, out / entry["tokenizer"])
            copy_folder(prepared.packed_dir, out / entry["packed"])
            entries.append(entry)
        for block in variant.evaluation_blocks():
            for name in block.tasks:
                task = get_task(name)
                told = task_settings(variant, block, name)
                for target, folder in family_of(task).bundle_folders(task, told).items():
                    if tasks.setdefault(name, target) != target:
                        raise InputError(
                            f"task {name}: two data folders in one study cannot bundle"
                        )
                    copy_folder(folder, out / target, replace=True)
    manifest = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "study": spec.name,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "data": entries,
        "tasks": tasks,
    }
    atomic_write_text(out / BUNDLE_FILE, json.dumps(manifest, indent=2))
    return manifest


def check_bundle_target(out: Path) -> None:
    """A bundle is written into a new or empty folder, or over an earlier bundle."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--bundle {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / BUNDLE_FILE).is_file():
        raise InputError(f"--bundle {out} is a folder that is not a data bundle: choose another")


def copy_folder(source: Path, target: Path, replace: bool = False) -> None:
    """``source`` copied whole into ``target``. A cache entry already there is kept (it is named
    by what it was built from: same name, same contents); ``replace``: copied again."""
    if target.is_dir() and not replace:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(target) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)


def folder_size(root: Path) -> int:
    """Bytes of every file under ``root``: what a bundle (or a kit) costs to carry."""
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())
