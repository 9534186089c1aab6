"""Fine-tuning of a kept encoder on one task: recipe, classifier, dynamic padding, training loop.

- ``recipe``: ``FinetuneRecipe``, ELECTRA-Small's GLUE hyper-parameters, every one overridable;
- ``batching``: encoded examples (``Examples``, ``as_examples``) and dynamic padding;
- ``classifier``: ``GlueClassifier`` and its layer-wise learning rates
  (``layerwise_param_groups``);
- ``loop``: ``finetune_task``, one task with one seed (``TaskInfo``, ``predict``,
  ``supported_max_len``).

This package imports nothing: import a name from its module. The spec and the CLI import the
light ``recipe`` without torch; the other three need it.
"""
