"""MLflow: one experiment per study (named as the study), one MLflow run per unit, found again
by the tag ``electra-ablate.key`` (the unit's tracker key) and created only when no run has it:
a resumed pre-training run and the unit's later evaluations continue the same MLflow run.

The server is MLflow's own choice: ``$MLFLOW_TRACKING_URI``, else its default. A ``file:`` URI
(or a plain folder) is a local store, which MLflow 3 refuses unless ``MLFLOW_ALLOW_FILE_STORE``
is set: naming one is asking for it, so it is set for this process. Unless set, HTTP retries are
cut to ``HTTP_RETRIES`` and a request's timeout to ``HTTP_TIMEOUT_S``: a server that is down
costs a run seconds before the tracker turns itself off, not MLflow's minutes of back-off.

A logged row is one ``log_batch`` call. It holds each metric twice: as itself at the
pre-training step, and under ``by_flops/`` at the pre-training FLOPs (the paper's convention,
rounded to an integer: MLflow's step is one), so that two objectives, whose steps cost
differently, line up at equal compute on the UI's step axis; ``pretrain_flops`` itself is a
metric at the step too (for a chart whose x-axis is set to a metric).

The configuration becomes the run's params (flattened to dotted keys) when the run is created; a
resumed run gets only keys it lacks, since MLflow refuses to change a param.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlparse

from electra_ablate.infra.tracking.protocol import TrackedUnit, by_flops, event_metrics

KEY_TAG = "electra-ablate.key"
NOT_IN_A_NAME = re.compile(r"[^/\w.\- :]")  # what MLflow refuses in a param's or metric's name
HTTP_RETRIES = "2"
HTTP_TIMEOUT_S = "20"
PARAM_VALUE_MAX = 6000  # MLflow's limit on a param's value
PARAMS_PER_BATCH = 100  # MLflow's limits on one log_batch
METRICS_PER_BATCH = 1000


class MLflow:
    name: ClassVar[str] = "mlflow"
    package: ClassVar[str | None] = "mlflow"
    extra: ClassVar[str | None] = "mlflow"

    def open(self, unit: TrackedUnit) -> MLflowRun:
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", HTTP_RETRIES)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", HTTP_TIMEOUT_S)
        logging.getLogger("mlflow").setLevel(logging.ERROR)  # its INFO lines are not the study's
        import mlflow
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = mlflow.get_tracking_uri()
        if urlparse(uri).scheme in ("", "file"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        client = MlflowClient(uri)
        experiment = experiment_id(client, unit.study)
        found = client.search_runs(
            [experiment], filter_string=f"tags.`{KEY_TAG}` = '{unit.key}'", max_results=1
        )
        params = flat_params(unit.config)
        if found:
            run_id = found[0].info.run_id
            have = found[0].data.params
            params = {k: v for k, v in params.items() if k not in have}
            client.update_run(run_id, status="RUNNING")
        else:
            tags = {KEY_TAG: unit.key, "electra-ablate.study": unit.study}
            run_id = client.create_run(experiment, tags=tags, run_name=unit.label).info.run_id
        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), PARAMS_PER_BATCH):
            client.log_batch(run_id, params=items[start : start + PARAMS_PER_BATCH])
        return MLflowRun(client, run_id)


def experiment_id(client: Any, name: str) -> str:
    """The experiment named ``name``, created if absent (by whichever process gets there first:
    workers of one study open their units at the same time)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as MLflow params: dotted keys, lists and other values as JSON text."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = mlflow_name(f"{prefix}{key}")
        if isinstance(value, Mapping) and value:
            out |= flat_params(value, f"{name}.")
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            out[name] = text[:PARAM_VALUE_MAX]
    return out


def mlflow_name(name: str) -> str:
    """``name`` with what MLflow refuses in a param's or metric's name (``[``, ``=``, ``@``...)
    as ``_``: a task or key of a plugin's may hold any of it."""
    return NOT_IN_A_NAME.sub("_", name)


class MLflowRun:
    def __init__(self, client: Any, run_id: str) -> None:  # mlflow.tracking.MlflowClient
        self.client, self.run_id = client, run_id

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(mlflow_name(key), value, now, step) for key, value in metrics.items()]
        series = by_flops(metrics)
        if series is not None:
            named, flops = series
            batch += [Metric(mlflow_name(key), value, now, flops) for key, value in named.items()]
        for start in range(0, len(batch), METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=batch[start : start + METRICS_PER_BATCH])

    def event(self, name: str, step: int, data: Mapping[str, Any]) -> None:
        self.log(event_metrics(name, data), step)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)
