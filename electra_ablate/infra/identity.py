"""What enters a run id and a job id: one hash, and the spec fields left out of it.

A pre-training run's id is ``config_hash`` of its config: objective, params, backbone, data,
budget, seed and the spec's ``pretrain`` section less ``IDENTITY_EXCLUDED`` and unset options
(``electra_ablate.study.context``). An evaluation job's id is ``config_hash`` of its identity:
the run, the fraction, the task and its own identity, the seed, the data's fingerprint
(``electra_ablate.evaluation.run``). Both hash names and values, never module paths, so moving
code never changes an id; ``tests/study/test_pinned_identities.py`` pins them. The code that
computed a unit is recorded beside its id instead (``electra_ablate.infra.code_identity``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

REPORTING_FIELDS = frozenset(
    {"seeds", "log_every", "eval_batches", "resume_every", "num_threads", "tensorboard"}
)
"""``pretrain`` fields that say how a run reports (or on how many threads), not what it learns:
left out of its id and of a report's recipe (``electra_ablate.report.header``). ``tensorboard``
is retired (the spec's top-level ``tracking`` names the trackers, in no id at all), but the
``study.json`` of a study run before still holds it."""

RUNNING_FIELDS = frozenset({"deterministic", "precision", "compile"})
"""``pretrain`` fields that say how a run runs, not what it learns: left out of its id, but a
report's recipe shows them, as they change rounding and speed. ``precision`` is here as the
device is (``auto`` already meant bf16 on CUDA and fp32 on the CPU): each run records the
precision it trained in (its summary, ``precision``)."""

ALLOWING_FIELDS = frozenset({"warmup_beyond_run"})
"""``pretrain`` fields that only allow a setting otherwise refused (``warmup_beyond_run``: a
warm-up longer than the run): what the run computes is in its other fields, so these enter no
id, and a run planned with one has the id it would have had without it."""

IDENTITY_EXCLUDED = REPORTING_FIELDS | RUNNING_FIELDS | ALLOWING_FIELDS
"""Every ``pretrain`` field that does not enter a run's id."""


def config_hash(config: dict[str, Any]) -> str:
    """The 12-hex-digit id of a config: the sha256 of its JSON, keys sorted."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
