"""The pre-flight check: what a study's settings make its likely outcome, said before compute is
spent on it.

A fine-tuning task capped to a few hundred examples for one epoch gave the majority class for
every model, the no-pre-training baseline included (issue 69: SST-2 and MRPC at 256 × 1), and
only the report said so, after the compute. Each task says through its hook
(``electra_ablate.evaluation.task.Task.majority_risk``) whether these settings put it there, from
what its family measured (GLUE: ``electra_ablate.evaluation.glue.floors``); this module asks
every task of every evaluation block and variant, and words what would lift it from the spec's
own keys. The dry run warns every such task (``estimate.estimate_plan``); ``ablate run`` warns
those with evaluations still to do, after planning and before anything trains
(``electra_ablate.scaleout.runner``). Never an error: a study may mean to show the floor.
"""

from __future__ import annotations

from collections.abc import Sequence

from electra_ablate.evaluation.task import get_task
from electra_ablate.infra.progress import warn
from electra_ablate.spec import StudySpec, task_settings
from electra_ablate.study.context import Study
from electra_ablate.study.plan import variant_note
from electra_ablate.study.reuse import finished_record
from electra_ablate.study.units import ReferenceUnit, Unit

BLOCKS = ("finetune", "evaluation")
"""The spec's evaluation blocks by key (``StudySpec.evaluation_blocks``), to name a task's keys."""


def task_risks(spec: StudySpec) -> list[tuple[str | None, str, str]]:
    """``(variant, task, line)`` for each task of each variant and evaluation block whose
    settings make the majority class its likely outcome; the line names the task, why, and the
    spec's keys that would lift it."""
    found = []
    for variant, resolved in spec.variant_specs():
        for key in BLOCKS:
            block = getattr(resolved, key)
            if block is None:
                continue
            for name in block.tasks:
                risk = get_task(name).majority_risk(task_settings(resolved, block, name))
                if risk:
                    lift = (
                        f"raise {key}.caps.{name} or {key}.recipe.task_epochs.{name}, or drop "
                        "the task"
                    )
                    found.append((variant, name, variant_note(variant, f"{name}: {risk}; {lift}")))
    return found


def majority_risks(spec: StudySpec) -> list[str]:
    """One line per task at risk (``task_risks``), each once: what the dry run warns."""
    return list(dict.fromkeys(line for _, _, line in task_risks(spec)))


def warn_dry_run(spec: StudySpec) -> None:
    """Each task at risk as one ``warning:`` line on stderr."""
    for line in majority_risks(spec):
        warn(line)


def warn_before_run(study: Study, units: Sequence[Unit]) -> None:
    """The tasks at risk that ``units`` still have evaluations of (no record here, nor one
    beside to reuse: ``reuse.finished_record``), one ``warning:`` line each: finished work
    spends nothing more, so a study run again, or one reusing another's, is not told again."""
    risks = task_risks(study.spec)
    if not risks:  # the common case: no job is looked at
        return
    at_risk = {(variant, task) for variant, task, _ in risks}
    pending = {
        (getattr(unit, "variant", None), job.task)
        for unit in units
        if not isinstance(unit, ReferenceUnit)
        for job in study.jobs(unit, ready_only=False)
        if (getattr(unit, "variant", None), job.task) in at_risk
        and not study.layout.finetune_record(job.job_id).exists()
        and not (study.reuse and finished_record(study, job.job_id))
    }
    for line in dict.fromkeys(line for variant, task, line in risks if (variant, task) in pending):
        warn(line)
