"""The pre-training engine: plan a FLOPs budget into steps, train any objective for them,
checkpoint the kept encoder along the way, resume exactly after a crash, scale out with DDP.

- ``plan``: budget -> steps per stage and checkpoint steps;
- ``optim``: AdamW and the learning-rate schedule;
- ``precision``: mixed precision (autocast, gradient scaling);
- ``compiling``: ``torch.compile`` of a training step's forward;
- ``trainer``: the training loop (``Trainer``, ``PretrainRun``);
- ``state``: checksummed, atomic training state;
- ``distributed``: DistributedDataParallel under ``torchrun``;
- ``metrics_log``: what a run logs while it runs (``metrics.jsonl``, the spec's trackers), and
  whether a log on disk can be trusted.
"""

from electra_ablate.pretraining.engine.distributed import Distributed
from electra_ablate.pretraining.engine.optim import learning_rate, make_optimizer
from electra_ablate.pretraining.engine.plan import RunPlan, plan_run
from electra_ablate.pretraining.engine.precision import autocast
from electra_ablate.pretraining.engine.trainer import MetricMeans, PretrainRun, Trainer

__all__ = [
    "Distributed",
    "MetricMeans",
    "PretrainRun",
    "RunPlan",
    "Trainer",
    "autocast",
    "learning_rate",
    "make_optimizer",
    "plan_run",
]
