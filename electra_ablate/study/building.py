"""What a unit is built from, shared by doing it and by repairing it.

``electra_ablate.study.execute`` does a unit for the first time and
``electra_ablate.study.integrity`` rebuilds what of it is damaged (a kept encoder, a curve); both
build a run's ``run.json``, its ``PretrainRun`` and its kept encoders' metadata, and a baseline's
kept encoder, the same way, and both ask which of a unit's jobs have no record yet: here, once.
"""

from __future__ import annotations

import json
from typing import Any

from electra_ablate.checkpoints.kept import save_kept
from electra_ablate.data.batches import PackedBatches
from electra_ablate.evaluation.run import EvaluationJob, fresh_kept
from electra_ablate.infra.layout import RunLayout
from electra_ablate.infra.storage import atomic_write_text
from electra_ablate.infra.tracking import Tracking
from electra_ablate.pretraining.engine.distributed import Distributed
from electra_ablate.pretraining.engine.trainer import PretrainRun
from electra_ablate.pretraining.objective import Objective
from electra_ablate.study.context import Study
from electra_ablate.study.units import BASELINE_FRACTION, BaselineUnit, RunUnit, prepared


def write_run_json(unit: RunUnit) -> None:
    """``run.json``: the config the run's id is a hash of."""
    atomic_write_text(unit.layout.run_json, json.dumps(unit.config, indent=2, default=str))


def pretrain_run(
    study: Study,
    unit: RunUnit,
    objective: Objective,
    layout: RunLayout,
    dist: Distributed | None = None,
    tracking: Tracking | None = None,
) -> PretrainRun:
    """What the trainer needs to train ``unit`` into ``layout`` (its own folder, or a scratch
    folder where a damaged kept encoder or curve is rebuilt, in one process: ``dist``), with
    the unit's open trackers where it trains for the study (a rebuild sends nothing)."""
    data, spec = prepared(unit).data, unit.spec
    dist = dist or study.dist
    per_rank = spec.pretrain.batch_size // dist.world_size
    return PretrainRun(
        spec=spec.pretrain,
        plan=unit.plan,
        layout=layout,
        seed=unit.seed,
        train_batches=PackedBatches(data.train, per_rank, unit.seed, dist.rank, dist.world_size),
        heldout_batches=PackedBatches(data.heldout, per_rank, 0, dist.rank, dist.world_size),
        tokenizer_dir=data.tokenizer_dir,
        meta=run_meta(unit, objective),
        tracking=tracking,
    )


def run_meta(unit: RunUnit, objective: Objective) -> dict[str, Any]:
    """What every kept encoder of the run records about it (``kept.json``)."""
    return {
        "objective": unit.objective,
        "label": unit.label,
        "params": objective.params.model_dump(),
        "run_id": unit.run_id,
        "seed": unit.seed,
    }


def write_baseline_kept(unit: BaselineUnit) -> None:
    """The baseline's kept encoder: seeded, so writing it again gives the same bytes."""
    kept = fresh_kept(unit.backbone, unit.seed)
    meta = {
        "objective": unit.objective,
        "label": unit.label,
        "run_id": unit.run_id,
        "fraction": BASELINE_FRACTION,
        "step": 0,
        "flops_paper": 0.0,
        "flops_standard": 0.0,
    }
    save_kept(unit.kept_dir(BASELINE_FRACTION), kept, prepared(unit).data.tokenizer_dir, meta)


def unfinished_jobs(study: Study, jobs: list[EvaluationJob]) -> list[EvaluationJob]:
    """The jobs with no record yet (done, skipped and failed evaluations all leave one)."""
    return [j for j in jobs if not study.layout.finetune_record(j.job_id).exists()]
