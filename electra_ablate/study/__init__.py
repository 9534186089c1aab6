"""Running a study: a spec becomes units of work, executed, cached, resumable, tabulated.

- ``spec``: the study spec (``StudySpec``), validated, with its variants;
- ``units``: what a study is made of (pre-training runs, baselines) and their identities; their
  evaluations are ``electra_ablate.evaluation.run.EvaluationJob``s;
- ``context``: the spec resolved into units, with the data each needs;
- ``building``: what a unit is built from (``run.json``, its ``PretrainRun``, a baseline's kept
  encoder), shared by doing it and by repairing it;
- ``execute``: doing one unit or job, recording its outcome;
- ``reuse``: finished runs and evaluations copied from a study beside this one, and why a near
  run there is not this run (the dry run's line);
- ``tracked``: what the spec's trackers receive of each unit, one tracker run per unit;
- ``records``: reading records back, setting damaged ones aside;
- ``integrity``: finished work checked before a run builds on it, and repaired;
- ``workers``: sharing units out to processes, with one progress line for the study;
- ``launch``: units as cluster jobs (``--launcher``); ``shards``: one machine's share
  (``--shard I/N``);
- ``tables`` and ``provenance``: the tidy tables and ``study.json``;
- ``estimate``: the dry-run's plan and time estimate;
- ``runner``: ``run_study``, the whole job top to bottom;
- ``survey``: what a study folder holds, read without changing it (``ablate status``);
- ``data_identity``: which data a folder's results were made with;
- ``bundle``: data bundles written (``ablate data prepare --bundle``);
- ``packs``, ``merge``: result packs, and packs and folders merged into one study;
- ``kit``: offline GPU-node kits; ``doctor``: what this machine offers a study.

The names below are imported on first use (``electra_ablate.infra.faces``): ``ablate status``,
``pack`` and ``clean`` read a study folder through ``survey`` and ``packs`` and need no torch.
"""

from __future__ import annotations

from electra_ablate.infra.faces import lazy_face

_EXPORTS = {
    "BaselineUnit": "units",
    "RunUnit": "units",
    "Study": "context",
    "StudyEstimate": "estimate",
    "config_hash": "units",
    "estimate_study": "estimate",
    "resolve_device": "context",
    "run_study": "runner",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_face(__name__, _EXPORTS)
