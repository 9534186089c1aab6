"""Running a study: a spec becomes units of work, executed, cached, resumable, tabulated.

- ``units``: what a study is made of (pre-training runs, baselines) and their identities; their
  evaluations are ``electra_ablate.evaluation.run.EvaluationJob``s;
- ``context``: the spec resolved into units, with the data each needs;
- ``execute``: doing one unit or job, recording its outcome;
- ``workers``: sharing units out to processes, with one progress line for the study;
- ``tables`` and ``provenance``: the tidy tables and ``study.json``;
- ``estimate``: the dry-run's plan and time estimate;
- ``runner``: ``run_study``, the whole job top to bottom.
"""

from electra_ablate.study.context import Study, resolve_device
from electra_ablate.study.estimate import StudyEstimate, estimate_study
from electra_ablate.study.runner import run_study
from electra_ablate.study.units import BaselineUnit, RunUnit, config_hash

__all__ = [
    "BaselineUnit",
    "RunUnit",
    "Study",
    "StudyEstimate",
    "config_hash",
    "estimate_study",
    "resolve_device",
    "run_study",
]
