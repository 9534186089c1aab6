"""The one stable face for plugin authors: everything an objective or a task needs, from here.

A third-party objective or task imports only this module, so that the project's own files can
move without breaking plugins: a module's path may change between minor versions (the old one
then fails to import), the names here stay. Every name is imported eagerly. What is here:

- the objective contract (``electra_ablate.pretraining.objective``): ``Objective``,
  ``ObjectiveParams``, ``StepOutput``, ``Stage``, ``StageSplit``, ``ModelPass``, ``KeptModel``,
  ``OutputPrior``, ``Batch``, the kinds ``HEAD_KINDS`` and ``KEPT_ROLES``, and the helper
  ``logit``; the metric-naming convention (``electra_ablate.pretraining.metric_names``):
  ``METRIC_NAMING`` and ``metric_kind``; the registry (``electra_ablate.pretraining.registry``):
  ``available_objectives`` and ``get_objective`` (which also takes ``package.module:Class``);
- the components objectives are assembled from (``electra_ablate.pretraining.components``):
  masking, BERT's corruption, generators, the discriminator, the masked-LM head, the losses;
- the backbone: ``BackboneConfig``, ``Encoder``, ``MLMHead``, ``init_weights``, ``Vocab``,
  ``SpecialTokens``, ``max_predictions``;
- the task contract: ``Task``, ``TaskFamily``, ``TaskSettings``, ``FinetunedTask`` (and the
  ``EncodedSplits`` its ``encode`` returns), ``Needs``, ``NEEDS``, ``Progress``,
  ``RECORD_FIELDS``, and the ``LoadedKept`` encoder a task scores; the registry:
  ``available_tasks`` and ``get_task``;
- the contracts as checks: ``check_objective`` and ``check_task`` (what ``ablate check`` runs),
  the rules they run (``RULES``, ``TASK_RULES``) and the ``ContractError`` a broken one raises;
- the tracker contract, for a package that adds an experiment tracker through the
  ``electra_ablate.trackers`` entry-point group: ``Tracker``, ``TrackerRun``, the
  ``TrackedUnit`` a tracker opens a run for and the ``TrackerProblem`` it raises to say, in one
  line, why it cannot write (its rows stay unsent and a later run catches them up);
- the errors a plugin raises so that the CLI prints one ``error:`` line with the right exit
  code: ``InputError`` and ``DataError`` (the user's to fix: exit 2), ``AblateError`` (a
  failure while running: exit 1).

The built-in objectives (``electra_ablate.objectives``, the repository's ``objectives/``)
import only from here too.
"""

from electra_ablate.backbone.config import BackboneConfig, max_predictions
from electra_ablate.backbone.model import Encoder, MLMHead, init_weights
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.checkpoints.kept import LoadedKept
from electra_ablate.conformance import (
    RULES,
    TASK_RULES,
    ContractError,
    check_objective,
    check_task,
)
from electra_ablate.evaluation.finetuned import EncodedSplits, FinetunedTask
from electra_ablate.evaluation.task import (
    NEEDS,
    RECORD_FIELDS,
    Needs,
    Progress,
    Task,
    TaskFamily,
    TaskSettings,
    available_tasks,
    get_task,
)
from electra_ablate.infra.errors import AblateError, DataError, InputError
from electra_ablate.infra.tracking.protocol import TrackedUnit, Tracker, TrackerProblem, TrackerRun
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
    encoder_spread,
    head_stats,
    kept_encoder_metrics,
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
from electra_ablate.pretraining.metric_names import METRIC_NAMING, metric_kind
from electra_ablate.pretraining.objective import (
    HEAD_KINDS,
    KEPT_ROLES,
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
)
from electra_ablate.pretraining.registry import available_objectives, get_objective

__all__ = [
    "HEAD_KINDS",
    "KEPT_ROLES",
    "METRIC_NAMING",
    "NEEDS",
    "RECORD_FIELDS",
    "RULES",
    "TASK_RULES",
    "AblateError",
    "BackboneConfig",
    "Batch",
    "ContractError",
    "Corruption",
    "DataError",
    "Detection",
    "Discriminator",
    "EncodedSplits",
    "Encoder",
    "FinetunedTask",
    "Generator",
    "GeneratorParams",
    "InputError",
    "KeptModel",
    "LoadedKept",
    "MLMHead",
    "MaskedLM",
    "MaskedSlots",
    "ModelPass",
    "Needs",
    "Objective",
    "ObjectiveParams",
    "OutputPrior",
    "Progress",
    "Replacement",
    "SpecialTokens",
    "Stage",
    "StageSplit",
    "StepOutput",
    "Task",
    "TaskFamily",
    "TaskSettings",
    "TrackedUnit",
    "Tracker",
    "TrackerProblem",
    "TrackerRun",
    "UnigramGenerator",
    "Vocab",
    "available_objectives",
    "available_tasks",
    "bert_corruption",
    "binary_entropy",
    "build_generator",
    "check_objective",
    "check_task",
    "detection_metrics",
    "encoder_spread",
    "get_objective",
    "get_task",
    "head_stats",
    "init_weights",
    "kept_encoder_metrics",
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
