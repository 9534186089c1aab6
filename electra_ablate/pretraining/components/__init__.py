"""Reusable pieces objectives are assembled from (and what a plugin author imports):

- ``masking``: mask selection, BERT's 80/10/10 corruption, putting replacements into the input;
- ``masked_lm``: an encoder with a tied MLM head predicting at selected slots;
- ``generator``: ELECTRA's small MLM generator and the unigram generator, with sampling;
- ``discriminator``: the replaced-token detector, its loss and its metrics;
- ``losses``: masked losses and the "has it learnt anything" statistics (nats learnt, ROC-AUC);
- ``monitor``: the collapse monitor (the kept encoder's spread across positions, a binary head's
  inactive units and logit spread).
"""

from electra_ablate.pretraining.components.discriminator import (
    Detection,
    Discriminator,
    detection_metrics,
    non_pad,
    rtd_loss,
)
from electra_ablate.pretraining.components.generator import (
    Corruption,
    Generator,
    GeneratorParams,
    UnigramGenerator,
    build_generator,
    sample_tokens,
    sampling_log_probs,
    without_special,
)
from electra_ablate.pretraining.components.losses import (
    binary_entropy,
    masked_accuracy,
    masked_cross_entropy,
    masked_mean,
    mlm_metrics,
    roc_auc,
    target_log_softmax,
)
from electra_ablate.pretraining.components.masked_lm import MaskedLM
from electra_ablate.pretraining.components.masking import (
    MaskedSlots,
    Replacement,
    bert_corruption,
    maskable,
    replace_at,
    select_masked,
)
from electra_ablate.pretraining.components.monitor import (
    encoder_spread,
    head_stats,
    kept_encoder_metrics,
)

__all__ = [
    "Corruption",
    "Detection",
    "Discriminator",
    "Generator",
    "GeneratorParams",
    "MaskedLM",
    "MaskedSlots",
    "Replacement",
    "UnigramGenerator",
    "bert_corruption",
    "binary_entropy",
    "build_generator",
    "detection_metrics",
    "encoder_spread",
    "head_stats",
    "kept_encoder_metrics",
    "maskable",
    "masked_accuracy",
    "masked_cross_entropy",
    "masked_mean",
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
