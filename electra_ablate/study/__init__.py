"""One study on one machine: a spec planned into units, each done, checked and tabulated.

- ``plan``: ``plan_study``, the one step that prepares every variant's data and plans every unit
  (``StudyPlan``) before anything trains;
- ``units``: what a study is made of (pre-training runs, baselines, references) and their
  identities; their evaluations are ``electra_ablate.evaluation.run.EvaluationJob``s;
- ``context``: ``Study``, the open study: its spec, folder and device, and a planned unit's
  evaluation jobs and objective;
- ``building``: what a unit is built from (``run.json``, its ``PretrainRun``, a baseline's kept
  encoder), shared by doing it and by repairing it;
- ``execute``: doing one unit or evaluation job, recording its outcome;
- ``reuse``: finished runs and evaluations copied from a study beside this one, and why a near
  run there is not this run (the dry run's line);
- ``tracked``: what the spec's trackers receive of each unit, one tracker run per unit;
- ``code_change``: finished work whose recorded code differs from the code importable now,
  moved aside to be redone (or kept, with ``--keep-code-changes``, and named);
- ``records``: reading records back, setting damaged ones aside;
- ``integrity``: finished work checked before a run builds on it, and repaired;
- ``tables`` and ``provenance``: the tidy tables and ``study.json``;
- ``estimate``: the dry-run's plan and time estimate;
- ``preflight``: the warning, before compute is spent, that a task's settings make the
  majority class every model's likely outcome;
- ``schedule``: the rule a study's workers start their work by (the pool's order, or one card's),
  which the GPU session's replay follows too;
- ``survey``: what a study folder holds, read without changing it (``ablate status``);
- ``data_identity``: which data a folder's results were made with;
- ``prepare``: a spec's data prepared ahead of a run (``ablate data prepare``);
- ``clean``: the disk a finished study no longer needs, freed (``ablate clean --states``);
- ``evaluate_kept``: one kept model evaluated outside a study, or as its study did
  (``ablate finetune``).

A study spread over processes, machines or a cluster, and the whole ``run_study``, are the
``electra_ablate.scaleout`` wing above this one.
"""
