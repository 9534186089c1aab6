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

The evaluation data is an input of every result as much as the corpus, so ``study.json`` also
records, per evaluated task, what its results were read from (``evaluation_fingerprints``:
{task: fingerprint}, :func:`current_evaluation_fingerprints`), and a merge refuses sources whose
fingerprints for one task differ (``packs.check_same_evaluation_data``). It is a separate record,
not a part of any id: the ids of studies made before it stay what they were.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from electra_ablate.data.bundle import data_settings
from electra_ablate.data.packing import PackingConfig
from electra_ablate.data.paths import settings_hash
from electra_ablate.infra.errors import InputError, MixedData
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.spec import task_settings
from electra_ablate.study.context import Study
from electra_ablate.study.plan import StudyPlan

DATA_FILE = "data.json"


def current_fingerprints(plan: StudyPlan) -> dict[str, str]:
    """Per data setting of the spec (a short hash of it), the fingerprint of its data here."""
    found = {}
    for _, spec, data in plan.variants:
        seq_len = data.backbone.max_seq_len
        key = settings_hash(data_settings(spec.data, seq_len, PackingConfig().as_dict()))
        found[key] = data.fingerprint
    return found


def current_evaluation_fingerprints(plan: StudyPlan) -> dict[str, str]:
    """Per evaluated task, a short hash of the data its results were read from here: the task
    family's fingerprint of the task's files (``TaskFamily.fingerprint``: their contents, the
    value every job id of the task holds, computed once per data setting and reused) with the
    training and evaluation caps that pick the rows a job reads. A task evaluated with several
    (variants moving data.glue, two evaluation blocks) gets one hash of them all."""
    read: dict[str, set[str]] = {}
    for _, spec, data in plan.variants:
        for block in spec.evaluation_blocks():
            for name in block.tasks:
                settings = task_settings(spec, block, name)
                used = {
                    "data": data.task_fingerprints[name],
                    "train_cap": settings.recipe.cap_for(name),
                    "eval_cap": settings.eval_cap,
                }
                read.setdefault(name, set()).add(json.dumps(used, sort_keys=True))
    return {
        name: hashlib.sha256(json.dumps(sorted(entries)).encode()).hexdigest()[:16]
        for name, entries in sorted(read.items())
    }


def check_study_data(study: Study, plan: StudyPlan, record: bool = True) -> None:
    """Stop (``MixedData``) where the folder's results were made with other data for the same
    data setting; with ``record``, note the current data for settings not seen before."""
    path = study.layout.root / DATA_FILE
    recorded = read_recorded(path)
    current = current_fingerprints(plan)
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
