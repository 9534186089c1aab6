"""GLUE fine-tuning of a kept encoder: recipe, classifier, dynamic padding, training loop.

Names are loaded on first use (PEP 562), so that importing the light ``recipe`` module (as the
spec and the CLI do) does not pull in torch and scipy.
"""

from __future__ import annotations

from electra_ablate.infra.faces import lazy_face

_EXPORTS = {
    "Examples": "batching",
    "as_examples": "batching",
    "GlueClassifier": "classifier",
    "layerwise_param_groups": "classifier",
    "TaskInfo": "loop",
    "finetune_task": "loop",
    "predict": "loop",
    "supported_max_len": "loop",
    "FinetuneRecipe": "recipe",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_face(__name__, _EXPORTS)
