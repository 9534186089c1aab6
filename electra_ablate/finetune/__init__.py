"""GLUE fine-tuning of a kept encoder: recipe, classifier, dynamic padding, training loop."""

from electra_ablate.finetune.batching import Examples, as_examples
from electra_ablate.finetune.classifier import GlueClassifier, layerwise_param_groups
from electra_ablate.finetune.loop import TaskInfo, finetune_task, predict, supported_max_len
from electra_ablate.finetune.recipe import FinetuneRecipe
from electra_ablate.metrics import glue_score, summarise_seeds

__all__ = [
    "Examples",
    "FinetuneRecipe",
    "GlueClassifier",
    "TaskInfo",
    "as_examples",
    "finetune_task",
    "glue_score",
    "layerwise_param_groups",
    "predict",
    "summarise_seeds",
    "supported_max_len",
]
