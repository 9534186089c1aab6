"""Which data a study folder's results were made with, so results on other data never join them.

A unit's id includes the data fingerprint (``data.pretraining.data_fingerprint``), so a unit
trained on other data is another unit. What ids alone cannot stop is a *folder* holding both:
a study resumed under another cache or bundle whose data differ, or shards merged from two
machines. So the folder records, per data setting (the spec's data section without where its
files live, the sequence length and the packing rules), the fingerprint it was made with, in
``data.json``, written by the first ``ablate run`` that plans it. A later run, shard or
``--collect`` whose data for the same setting has another fingerprint stops with one line naming
both; a changed data setting (an edit of the spec) is simply another entry.
``study.json`` carries the fingerprints too (``data.fingerprint``, ``data_fingerprints``), for
packs, merges and the report.
"""

from __future__ import annotations

import json
from pathlib import Path

from electra_ablate.data.bundle import data_settings
from electra_ablate.data.packing import PackingConfig
from electra_ablate.data.paths import settings_hash
from electra_ablate.infra.errors import InputError, MixedData
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.study.context import Study

DATA_FILE = "data.json"


def current_fingerprints(study: Study) -> dict[str, str]:
    """Per data setting of the spec (a short hash of it), the fingerprint of its data here."""
    found = {}
    for _, spec in study.spec.variant_specs():
        seq_len = spec.backbone_config().max_seq_len
        key = settings_hash(data_settings(spec.data, seq_len, PackingConfig().as_dict()))
        found[key] = study.data(spec).fingerprint
    return found


def check_study_data(study: Study, record: bool = True) -> None:
    """Stop (``MixedData``) where the folder's results were made with other data for the same
    data setting; with ``record``, note the current data for settings not seen before."""
    path = study.layout.root / DATA_FILE
    recorded = read_recorded(path)
    current = current_fingerprints(study)
    for key, fingerprint in current.items():
        if recorded.get(key, fingerprint) != fingerprint:
            raise MixedData(
                f"{study.layout.root} holds results made with data {recorded[key]}, but this "
                f"cache's data for the same settings is {fingerprint} (another corpus, tokenizer "
                "build or cache): use the cache or data bundle the study was made with "
                "(ABLATE_CACHE / --data-bundle), or run into a new --out"
            )
    if record and not current.items() <= recorded.items():
        study.layout.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({**recorded, **current}, indent=2, sort_keys=True))


def read_recorded(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path} is damaged ({exc}): delete it to record the data again") from None
    if not isinstance(recorded, dict):
        raise InputError(f"{path} is damaged (not a mapping): delete it to record the data again")
    return recorded
