"""Evaluation: the counterpart of ``electra_ablate.pretraining.objective`` and ``objectives/``.

- ``task``: the contract (``Task``, ``TaskFamily``, ``TaskSettings``) and the registry
  (entry-point group ``electra_ablate.tasks``);
- ``finetuned``: tasks scored by fine-tuning the kept encoder (``FinetunedTask``);
- ``finetune``: the fine-tuning itself (recipe, classifier, dynamic padding, training loop);
- ``metrics``: the metric functions tasks score with, and the spread over seeds;
- ``glue``: GLUE, one family, every GLUE fact in one place (its tasks and data, its published
  scores);
- ``probes``: linear probes of a frozen encoder (GLUE probes, replaced-token detection);
- ``run``: one evaluation job (kept encoder x task x seed -> record), for ``ablate run`` and
  ``ablate finetune`` alike, and the one builder of a freshly initialised encoder.

This package imports nothing, so that naming a task in a spec stays instant.
"""
