"""Evaluation: the counterpart of ``electra_ablate.pretraining.objective`` and ``objectives/``.

- ``task``: the contract (``Task``, ``TaskFamily``, ``TaskSettings``) and the registry
  (entry-point group ``electra_ablate.tasks``);
- ``finetuned``: tasks scored by fine-tuning the kept encoder (``FinetunedTask``);
- ``glue``: GLUE, one family, every GLUE fact in one place;
- ``run``: one evaluation job (kept encoder x task x seed -> record), for ``ablate run`` and
  ``ablate finetune`` alike, and the one builder of a freshly initialised encoder.

Modules are imported where they are used; this package imports nothing, so that naming a task
in a spec stays instant.
"""
