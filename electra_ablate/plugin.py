"""The one stable face for plugin authors: everything an objective or a task needs, from here.

A third-party objective or task imports only this module, so that the project's own files can
move without breaking plugins (their old import paths warn for one minor version first, see
``electra_ablate.infra.moved``). What is here:

- the objective contract: ``Objective``, ``ObjectiveParams``, ``StepOutput``, ``Stage``,
  ``ModelPass``, ``KeptModel``, ``OutputPrior``, ``Batch`` and the helpers ``logit`` and
  ``metric_kind``;
- the components objectives are assembled from (``electra_ablate.pretraining.components``):
  masking, BERT's corruption, generators, the discriminator, the masked-LM head, the losses;
- the backbone: ``BackboneConfig``, ``Encoder``, ``MLMHead``, ``init_weights``, ``Vocab``,
  ``SpecialTokens``, ``max_predictions``;
- the task contract: ``Task``, ``TaskFamily``, ``TaskSettings``, ``FinetunedTask``, and the
  ``LoadedKept`` encoder a task scores;
- the contracts as checks: ``check_objective`` and ``check_task`` (what ``ablate check`` runs).
"""

from electra_ablate.backbone.config import BackboneConfig, max_predictions
from electra_ablate.backbone.model import Encoder, MLMHead, init_weights
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.conformance.checks import check_objective, check_task
from electra_ablate.evaluation.finetuned import FinetunedTask
from electra_ablate.evaluation.task import Task, TaskFamily, TaskSettings
from electra_ablate.pretraining.components import (
    Corruption,
    Detection,
    Discriminator,
    Generator,
    GeneratorParams,
    MaskedLM,
    MaskedSlots,
    Replacement,
    UnigramGenerator,
    bert_corruption,
    binary_entropy,
    build_generator,
    detection_metrics,
    maskable,
    masked_accuracy,
    masked_cross_entropy,
    masked_mean,
    mlm_metrics,
    non_pad,
    replace_at,
    roc_auc,
    rtd_loss,
    sample_tokens,
    sampling_log_probs,
    select_masked,
    target_log_softmax,
    without_special,
)
from electra_ablate.pretraining.objective import (
    Batch,
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    OutputPrior,
    Stage,
    StageSplit,
    StepOutput,
    logit,
    metric_kind,
)

__all__ = [
    "BackboneConfig",
    "Batch",
    "Corruption",
    "Detection",
    "Discriminator",
    "Encoder",
    "FinetunedTask",
    "Generator",
    "GeneratorParams",
    "KeptModel",
    "LoadedKept",
    "MLMHead",
    "MaskedLM",
    "MaskedSlots",
    "ModelPass",
    "Objective",
    "ObjectiveParams",
    "OutputPrior",
    "Replacement",
    "SpecialTokens",
    "Stage",
    "StageSplit",
    "StepOutput",
    "Task",
    "TaskFamily",
    "TaskSettings",
    "UnigramGenerator",
    "Vocab",
    "bert_corruption",
    "binary_entropy",
    "build_generator",
    "check_objective",
    "check_task",
    "detection_metrics",
    "init_weights",
    "logit",
    "maskable",
    "masked_accuracy",
    "masked_cross_entropy",
    "masked_mean",
    "max_predictions",
    "metric_kind",
    "mlm_metrics",
    "non_pad",
    "replace_at",
    "roc_auc",
    "rtd_loss",
    "sample_tokens",
    "sampling_log_probs",
    "select_masked",
    "target_log_softmax",
    "without_special",
]
