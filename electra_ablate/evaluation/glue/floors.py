"""Where each GLUE task's majority class is the likely outcome: measured, not assumed.

For each classification task, the fewest fine-tuning examples seen (training examples after the
cap × epochs) at which a model of a committed study under ``reports/`` predicted more than one
class on the dev set: its dev accuracy at some checkpoint differed from every constant
prediction's (each class's share of the dev set: CoLA 30.87/69.13, SST-2 49.08/50.92, MRPC
31.62/68.38, RTE 47.29/52.71). Under that number no committed model, the no-pre-training
baseline included, ever did, so a study's pre-flight check
(``electra_ablate.study.preflight``) warns before it spends compute there. Counted from the
reports' ``results.parquet`` (``train_examples``) and their specs' epochs:

- CoLA: at 3,000 (1,000 × 3 epochs; ``reports/objectives``, ``reports/long_budget``,
  ``reports/weight_tying_gdes``) all 72 models predicted one class; at 25,653 (all 8,551 × 3;
  ``reports/gpu_session-1e16``, ``reports/gpu_session-3e15``) 1 of 3 each did not.
- SST-2: at 4,500 (1,500 × 3) 21 of 48 models in ``reports/objectives``, 11 of 15 in
  ``reports/long_budget``; no committed study saw fewer.
- MRPC: at 1,200 (400 × 3) 2 of 48 models in ``reports/objectives``, 2 of 15 in
  ``reports/long_budget``, 0 of 9 in ``reports/weight_tying_gdes``: at that size most still
  predict one class.
- RTE: at 1,200 (120 × 10) 17 of 48 in ``reports/objectives``; no committed study saw fewer.

STS-B is a regression (no majority class); QQP, MNLI, QNLI and WNLI have no committed
measurement, so nothing is said of them. A new committed study that moves a number moves it here.
"""

from __future__ import annotations

from electra_ablate.evaluation.task import MajorityFloor

MAJORITY_FLOORS: dict[str, MajorityFloor] = {
    "cola": MajorityFloor(
        25_653, "reports/gpu_session-1e16 at 8,551 × 3; at 1,000 × 3 all 72 models predicted one"
    ),
    "sst2": MajorityFloor(4_500, "reports/objectives at 1,500 × 3: 21 of 48 models"),
    "mrpc": MajorityFloor(1_200, "reports/objectives at 400 × 3: 2 of 48 models"),
    "rte": MajorityFloor(1_200, "reports/objectives at 120 × 10: 17 of 48 models"),
}
"""By task: the measured floor (see the module docstring for the counts behind each)."""
