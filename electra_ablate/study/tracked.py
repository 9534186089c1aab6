"""What a study sends the trackers its spec names (``tracking``): one tracker run per unit, the
same run however often the study is resumed or evaluated again.

A unit's tracker run is keyed by a hash of the study's name and the unit's id
(``tracker_key``): not the unit's id alone, since an identical unit reused into another study
(``reuse.reuse_identical``) must get a run of its own there. It records the unit's
configuration: its id and label, its objective, what its id is a hash of (objective params,
backbone, recipe, budget, data), the variant's resolved spec, and its deviations from the paper
(``analysis.deviations``, what the report lists).

Two moments open a unit's trackers, each once: its pre-training (``execute.pretrain`` hands the
open ``Tracking`` to the trainer, which sends each logged row and kept checkpoint as it goes),
and its evaluations (``track_unit`` after the unit's jobs, in the one process that collects
them). The second catches the trackers up with everything of the unit on disk: curve rows and
kept checkpoints they missed (a run reused from another study, trained before ``tracking`` was
set, or while a tracker was down) and every finished evaluation, as
``<family>/<task>/<metric>/seed<n>`` at its checkpoint's pre-training step and FLOPs (the
paper's convention, ``metrics_log.TRACKED_FLOPS``: the axis at which two objectives line up).
The unit's ledger (``infra.tracking.ledger``) says what each tracker already has, so a record
read back again by every ``ablate run`` is sent once, and a unit that is up to date opens no
tracker at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from electra_ablate.analysis.deviations import deviations
from electra_ablate.evaluation.task import RECORD_FIELDS, get_task
from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.identity import config_hash
from electra_ablate.infra.layout import KEPT_META
from electra_ablate.infra.tracking import Ledger, TrackedUnit, Tracking
from electra_ablate.pretraining.engine.metrics_log import (
    TRACKED_FLOPS,
    kept_event_item,
    logged_rows,
    tracked_metrics,
)
from electra_ablate.study.context import Study
from electra_ablate.study.records import FINETUNE_KEYS, record_problem
from electra_ablate.study.units import RunUnit, Unit


def tracker_key(study: Study, unit: Unit) -> str:
    """The name of the unit's run in every tracker: the study's name and the unit's id, hashed."""
    return config_hash({"study": study.spec.name, "unit": unit.run_id})


def tracked_unit(study: Study, unit: Unit) -> TrackedUnit:
    """The unit as its trackers see it, with the configuration its runs record."""
    spec = unit.spec.model_dump(mode="json")
    kind = "run" if isinstance(unit, RunUnit) else "baseline"
    identity = getattr(unit, "config", None)
    if identity is None:  # a reference scorer: its name and the data are its identity
        kind, identity = "reference", {"reference": unit.objective}
    config: dict[str, Any] = {
        "study": study.spec.name,
        "run_id": unit.run_id,
        "label": unit.label,
        "kind": kind,
        "objective": unit.objective,
        "variant": unit.variant,
        "seed": unit.seed,
        "identity": identity,
        "spec": spec,
        "deviations": deviations(spec),
    }
    return TrackedUnit(
        tracker_key(study, unit),
        study.spec.name,
        unit.label,
        config,
        unit.layout.root,
        study.layout.root,
    )


def open_tracking(study: Study, unit: Unit) -> Tracking | None:
    """The unit's trackers (None when the spec names none, or on a rank other than the main
    one: under ``torchrun`` rank 0 speaks for all). Nothing connects until something is sent."""
    names = unit.spec.tracking
    if not names or not study.dist.is_main:
        return None
    tracked = tracked_unit(study, unit)
    return Tracking(names, tracked, Ledger(unit.layout.tracking, tracked.key))


def track_unit(study: Study, unit: Unit, records: Iterable[dict[str, Any]]) -> None:
    """Catch the unit's trackers up with what of it is on disk (its curves and kept checkpoints
    when it pre-trained) and with its finished evaluations ``records``; then close them."""
    tracking = open_tracking(study, unit)
    if tracking is None:
        return
    with tracking, tracking.catching_up():
        if isinstance(unit, RunUnit):
            for row in logged_rows(unit.layout.metrics):
                split = str(row.get("split", "train"))
                flops = row.get(TRACKED_FLOPS)
                tracking.curve(split, row["step"], tracked_metrics(row), flops)
            for fraction, _ in unit.plan.checkpoints:
                meta, _ = record_problem(unit.layout.kept(fraction) / KEPT_META, ("step",))
                if meta is not None and isinstance(meta["step"], int):  # integrity sees damage
                    flops = {k: meta[k] for k in ("flops_paper", "flops_standard") if k in meta}
                    data = {"fraction": fraction, "step": meta["step"], **flops}
                    item, step = kept_event_item(fraction), meta["step"]
                    tracking.event(item, "kept", step, data, meta.get(TRACKED_FLOPS))
        for record in records:
            if record.get("status") == "done" and isinstance(record.get("step"), int):
                item = f"job:{record['job_id']}"
                flops = record.get(TRACKED_FLOPS)
                tracking.record(item, record["step"], evaluation_metrics(record), flops)


def evaluation_metrics(record: dict[str, Any]) -> dict[str, float]:
    """A finished evaluation's metrics as a tracker plots them, at its checkpoint's step:
    ``<family>/<task>/<metric>/seed<n>`` (bookkeeping such as timings left out), so GLUE's or any
    family's scores sit beside the pre-training curves."""
    task = record["task"]
    try:
        family = get_task(task).family
    except AblateError:  # a plugin's task no longer installed: its scores still go
        family = "tasks"
    return {
        f"{family}/{task}/{metric}/seed{record['seed']}": float(value)
        for metric, value in (record.get("metrics") or {}).items()
        if metric not in RECORD_FIELDS
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    }


def track_finished(study: Study, unit: Unit) -> None:
    """``track_unit`` with the unit's evaluations read from disk: after cluster jobs, whose
    processes each did a few of a unit's jobs (a tracker run is opened here, once per unit)."""
    if not unit.spec.tracking:
        return
    records = []
    for job in study.jobs(unit):
        record, _ = record_problem(study.layout.finetune_record(job.job_id), FINETUNE_KEYS)
        if record is not None:
            records.append(record)
    track_unit(study, unit, records)
