"""One evaluation job: a kept encoder x a task x a seed, and the record it leaves.

``ablate run`` plans a job per (checkpoint, task, seed) of a study and ``ablate finetune`` one
per (task, seed) of the checkpoint it is given; both plan and run them here, so the same
checkpoint, task, seed and settings give the same job id and the same numbers from either.
A job id is a hash of everything that changes the result: the kept encoder's run and budget
fraction, the task, the seed, the task's own identity (``Task.identity``: for a fine-tuned task
the recipe and caps) and the task data's fingerprint under its family's name. The GLUE jobs of
every study made before the evaluation seam keep their ids
(``tests/study/test_pinned_identities.py``).

Also here: ``fresh_kept``, the one builder of a freshly initialised encoder, which is the
no-pre-training baseline of a study, ``ablate finetune --from-scratch`` and the dry-run's timing
model alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.model import Encoder, MLMHead
from electra_ablate.checkpoints.kept import KeptModel, LoadedKept, load_kept
from electra_ablate.evaluation.task import Progress, Task, TaskSettings, get_task
from electra_ablate.infra.errors import AblateError
from electra_ablate.infra.identity import config_hash

BASELINE_INIT_SEED = 0
"""The seed of the freshly initialised encoder in every no-pre-training row."""


@dataclass(frozen=True)
class EvaluationJob:
    """One evaluation. ``kept_dir`` is the kept encoder's folder; a reference job (``reference``
    set: a scorer that needs no encoder) has none and reads ``tokenizer_dir`` instead."""

    job_id: str
    run_id: str
    fraction: float
    task: str
    seed: int
    settings: TaskSettings
    kept_dir: Path | None = None
    reference: str | None = None
    tokenizer_dir: Path | None = None


def job_identity(
    run_id: str, fraction: float, task: Task, seed: int, settings: TaskSettings, fingerprint: str
) -> dict[str, Any]:
    """Everything a job's result depends on besides the weights its run id stands for."""
    return {
        "run_id": run_id,
        "fraction": fraction,
        "task": task.name,
        "seed": seed,
        **task.identity(settings),
        task.family: fingerprint,
    }


def plan_job(
    run_id: str,
    fraction: float,
    kept_dir: Path | None,
    task: Task,
    seed: int,
    settings: TaskSettings,
    fingerprint: str,
) -> EvaluationJob:
    """The job that evaluates the kept encoder of ``run_id`` at ``fraction``."""
    identity = job_identity(run_id, fraction, task, seed, settings, fingerprint)
    return EvaluationJob(
        config_hash(identity), run_id, fraction, task.name, seed, settings, kept_dir
    )


def reference_run_id(reference: str, data: str) -> str:
    """What a reference's rows are named by: the reference on one data setting (``data``, its
    fingerprint, which covers the tokenizer)."""
    return config_hash({"reference": reference, "data": data})


def plan_reference_job(
    reference: str,
    data: str,
    task: Task,
    seed: int,
    settings: TaskSettings,
    fingerprint: str,
    tokenizer_dir: Path,
) -> EvaluationJob:
    """The job that scores ``task``'s reference ``reference`` on one data setting (``data``: its
    fingerprint, which covers the tokenizer)."""
    run_id = reference_run_id(reference, data)
    identity = {
        **job_identity(run_id, 0.0, task, seed, settings, fingerprint),
        "reference": reference,
    }
    return EvaluationJob(
        config_hash(identity),
        run_id,
        0.0,
        task.name,
        seed,
        settings,
        reference=reference,
        tokenizer_dir=tokenizer_dir,
    )


def run_job(
    job: EvaluationJob,
    device: Any = "cpu",
    kept: LoadedKept | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Evaluate and return the job's record: ``status`` done (with ``metrics``), skipped (the
    task does not apply to this encoder) or failed (with the one-line ``message``).

    ``kept`` is the loaded encoder when the caller has it (``ablate finetune`` with a Hugging
    Face model or ``--from-scratch``); otherwise it is read from ``job.kept_dir``.
    """
    task = get_task(job.task)
    record: dict[str, Any] = {
        "job_id": job.job_id,
        "run_id": job.run_id,
        "fraction": job.fraction,
        "task": job.task,
        "seed": job.seed,
    }
    if job.reference is not None:
        record |= {"reference": job.reference, "step": 0, "flops_paper": 0.0, "flops_standard": 0.0}
    else:
        if kept is None:
            kept = load_kept(job.kept_dir)
        record |= {
            "step": kept.meta.get("step", 0),
            "flops_paper": kept.meta.get("flops_paper", 0.0),
            "flops_standard": kept.meta.get("flops_standard", 0.0),
        }
        reason = task.skip_reason(kept)
        if reason is not None:
            return record | {"status": "skipped", "message": reason}
        precision = task.precision(job.settings, device)
        if precision is not None:  # how it ran, like the device: reported, never in the job id
            record["precision"] = precision
    try:
        if job.reference is not None:
            metrics = task.evaluate_reference(
                job.reference, job.settings, job.seed, Path(job.tokenizer_dir)
            )
        else:
            metrics = task.evaluate(kept, job.settings, job.seed, device, progress)
        record |= {"status": "done", "metrics": metrics}
    except AblateError as exc:
        record |= {"status": "failed", "message": str(exc)}
    return record


def fresh_kept(backbone: BackboneConfig, seed: int = BASELINE_INIT_SEED) -> KeptModel:
    """A freshly initialised encoder (and an MLM head, so that it saves and exports like any
    kept encoder): the same weights for the same backbone and seed, wherever it is built."""
    import torch

    torch.manual_seed(seed)
    return KeptModel(Encoder(backbone), "mlm", MLMHead(backbone, backbone.embedding_size))
