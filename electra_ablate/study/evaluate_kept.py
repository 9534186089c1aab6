"""Scores of one kept model outside a study, or exactly as its study got them: what ``ablate
finetune`` runs (``evaluate_kept``), the command itself only parsing options and printing.

Evaluates the checkpoint on each task with each seed (the study's own job type,
``evaluation.run``) and summarises, per task and metric, the median over seeds (the headline, as
the paper's median of 10) with the min-max spread, then each family's score (GLUE's: the mean
over its tasks of the headline metric's median, WNLI left out).

Given a study's spec (``spec``, or found in the study folder that holds a kept encoder), the
tasks, seeds, recipe, caps, evaluation caps and thread count are the study's, so the same job
ids and the same numbers come out as in the study. Options given on the command line replace
the spec's.

The checkpoint is one of our kept-model folders, or a Hugging Face ELECTRA/BERT model (a local
folder with ``config.json``, or a hub name ``org/name``) imported by
``electra_ablate.checkpoints.hf_import``, so a published encoder can be scored with exactly the
recipe our own encoders get.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import torch
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from electra_ablate.analysis.results import paper_scores
from electra_ablate.checkpoints.hf_import import is_hf_folder, is_hub_name, load_hf
from electra_ablate.checkpoints.kept import LoadedKept, load_kept
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.metrics import summarise_seeds
from electra_ablate.evaluation.run import EvaluationJob, fresh_kept, plan_job, run_job
from electra_ablate.evaluation.task import (
    RECORD_FIELDS,
    TaskSettings,
    describe_family,
    family_of,
    get_task,
)
from electra_ablate.infra.errors import AblateError, InputError
from electra_ablate.infra.threads import torch_threads
from electra_ablate.spec import (
    FinetuneSpec,
    StudySpec,
    load_spec,
    parse_spec,
    recorded_spec,
    task_settings,
)
from electra_ablate.study.integrity import repair_kept_folder

DEFAULT_TASKS = "cola,sst2,mrpc,stsb,rte"
DEFAULT_SEEDS = "0"


def evaluate_kept(
    checkpoint: str,
    spec: Path | None = None,
    tasks: str | None = None,
    seeds: str | None = None,
    glue: str | None = None,
    cap: str | None = None,
    epochs: int | None = None,
    lr: float | None = None,
    device: str | None = None,
    from_scratch: bool = False,
) -> dict[str, Any]:
    """Everything ``ablate finetune`` prints, as a JSON-ready dict: the checkpoint's scores on
    each task (median over seeds, spread, job ids) and each family's score. The options are the
    command's, as typed (``tasks``, ``seeds`` and ``cap`` comma-separated); a bad one is an
    ``InputError`` raised before anything loads."""
    _recipe_overrides(cap, epochs, lr, [])  # bad values are reported before anything loads
    if seeds is not None:
        _seeds(seeds)
    kept = load_checkpoint(checkpoint)
    study = study_spec(spec, kept)
    names = task_names(study, tasks)
    overrides = _recipe_overrides(cap, epochs, lr, names)
    jobs = plan_checkpoint(kept, study, names, seeds, glue, overrides, from_scratch)
    chosen = device or (study.device if study is not None else "auto")
    threads = study.pretrain.num_threads if study is not None else None
    with torch_threads(threads):
        report = finetune_checkpoint(kept, jobs, _device(chosen), from_scratch)
    return report | {"checkpoint": checkpoint, "spec": _spec_origin(spec, kept, study)}


# ---------------------------------------------------------------------------------- planning
def study_spec(spec: Path | None, kept: LoadedKept) -> StudySpec | None:
    """The spec to repeat: ``--spec``, else the one the kept encoder's study folder recorded
    (``<study>/pretrain/<run>/kept/<fraction>`` or ``<study>/baseline/<run>/kept/0``); the
    variant the encoder was trained under, when the study has variants."""
    if spec is not None:
        loaded = load_spec(spec, check_data=False)
    else:
        study_json = _study_json(kept)
        if study_json is None:
            return None
        try:
            recorded = json.loads(study_json.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read {study_json}: {exc}") from None
        if not isinstance(recorded.get("spec"), dict):
            return None
        spec_path = Path(recorded.get("spec_path") or study_json)
        spec_dir = spec_path.resolve().parent if spec_path.exists() else study_json.parent
        loaded = parse_spec(
            recorded_spec(recorded["spec"]), spec_dir=spec_dir, source=str(study_json)
        )
    label = str(kept.meta.get("label", ""))
    variants = dict(loaded.variant_specs())
    if None in variants:
        return variants[None]
    variant = label.rsplit("@", 1)[-1] if "@" in label else None
    if variant not in variants:
        raise InputError(
            f"the kept encoder's label {label!r} names none of the spec's variants "
            f"({', '.join(v for v in variants if v)})"
        )
    return variants[variant]


def _study_json(kept: LoadedKept) -> Path | None:
    folder = Path(kept.tokenizer_dir).resolve()
    if not (folder / "kept.json").is_file() or len(folder.parents) < 4:
        return None
    candidate = folder.parents[3] / "study.json"
    return candidate if candidate.is_file() else None


def _spec_origin(spec: Path | None, kept: LoadedKept, study: StudySpec | None) -> str | None:
    if study is None:
        return None
    return str(spec) if spec is not None else str(_study_json(kept))


def task_names(study: StudySpec | None, tasks: str | None) -> list[str]:
    """``--tasks``, else the spec's tasks (every evaluation block's), else GLUE-5."""
    if tasks is not None:
        names = _split(tasks)
        if not names:
            raise InputError("--tasks is empty")
        return names
    blocks = study.evaluation_blocks() if study is not None else []
    return [t for b in blocks for t in b.tasks] or _split(DEFAULT_TASKS)


def plan_checkpoint(
    kept: LoadedKept,
    study: StudySpec | None,
    names: list[str],
    seeds: str | None,
    glue: str | None,
    overrides: dict[str, Any],
    from_scratch: bool,
) -> list[EvaluationJob]:
    """One job per (task, seed): the study's own jobs when the study's spec is given and no
    option changes them (same ids as its ``finetune/<job id>.json`` records)."""
    blocks = study.evaluation_blocks() if study is not None else []
    run_id = str(kept.meta.get("run_id") or kept.meta.get("source") or "checkpoint")
    if from_scratch:
        run_id = f"from-scratch:{run_id}"
    fraction = float(kept.meta.get("fraction", 0.0))
    jobs = []
    for name in names:
        task = get_task(name)
        block = next((b for b in blocks if name in b.tasks), blocks[0] if blocks else None)
        settings = _settings(study, block, name, glue, overrides)
        family_of(task).check(task, settings)
        fingerprint = family_of(task).fingerprint(task, settings)
        if seeds is not None:
            task_seeds = _seeds(seeds)
        elif block is not None:
            task_seeds = block.seeds if task.seeded else block.seeds[:1]
        else:
            task_seeds = _seeds(DEFAULT_SEEDS)
        for seed in task_seeds:
            jobs.append(plan_job(run_id, fraction, None, task, seed, settings, fingerprint))
    return jobs


def _settings(
    study: StudySpec | None,
    block: FinetuneSpec | None,
    task: str,
    glue: str | None,
    overrides: dict[str, Any],
) -> TaskSettings:

    if study is not None and block is not None:
        settings = task_settings(study, block, task)
    elif study is not None:
        settings = TaskSettings(sources=study.data.model_dump(mode="json"), spec_dir=study.spec_dir)
    else:
        settings = TaskSettings(sources={"glue": _glue_source(glue)}, spec_dir=Path.cwd())
    if glue is not None:
        settings = replace(settings, sources={**settings.sources, "glue": glue})
    if overrides:
        settings = replace(settings, recipe=_recipe(settings.recipe, overrides))
    return settings


# --------------------------------------------------------------------------------- running
def finetune_checkpoint(
    kept: LoadedKept, jobs: list[EvaluationJob], device: str, from_scratch: bool = False
) -> dict[str, Any]:
    """Every job of one checkpoint, summarised per task and metric, with each family's score.

    ``from_scratch`` keeps the checkpoint's architecture and tokenizer but draws fresh weights
    (``evaluation.run.fresh_kept``, the study's baseline), so the same command measures what
    pre-training bought over none.
    """
    if from_scratch:
        fresh = fresh_kept(kept.model.encoder.cfg)
        zero = {"step": 0, "flops_paper": 0.0, "flops_standard": 0.0}
        kept = LoadedKept(fresh, {**kept.meta, **zero}, kept.tokenizer_dir)
    err = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn())
    records: dict[str, list[dict[str, Any]]] = {}
    with Progress(*columns, console=err, disable=not err.is_terminal, transient=True) as bar:
        for job in jobs:
            line = bar.add_task(f"{job.task} seed {job.seed}", total=None)

            def advance(done: int, total: int, line: Any = line) -> None:
                bar.update(line, completed=done, total=total)

            record = run_job(job, device, kept=kept, progress=advance)
            bar.remove_task(line)
            if record["status"] == "failed":
                raise AblateError(f"{job.task} seed {job.seed}: {record['message']}")
            records.setdefault(job.task, []).append(record)
    per_task = {task: _summarise(task, runs) for task, runs in records.items()}
    return {
        "source": kept.meta.get("source", str(kept.tokenizer_dir)),
        "objective": kept.meta.get("objective"),
        "seeds": sorted({job.seed for job in jobs}),
        "device": device,
        "from_scratch": from_scratch,
        "settings": {job.task: _shown(job.settings) for job in jobs},
        "tasks": per_task,
        "scores": family_scores(per_task),
    }


def load_checkpoint(checkpoint: str) -> LoadedKept:
    """Our kept folder, a Hugging Face folder (``config.json``, no ``kept.json``) or a hub name.

    A folder is never sent to the hub, and a path-like name whose first part exists locally is
    reported as a missing path, so a typo cannot turn into a confusing download failure. A
    study's kept encoder that is missing or fails its checksum is rebuilt first, as ``ablate
    export`` and ``ablate run`` do; any other kept folder must pass its checksums.
    """
    path = Path(checkpoint).expanduser()
    if path.parent.name == "kept":  # a study's kept encoder: rebuilt first if missing or damaged
        repair_kept_folder(path)
    if path.is_dir():
        if is_hf_folder(path):
            return load_hf(path)
        if not (path / "kept.json").exists():
            raise InputError(
                f"not a checkpoint: {path} has neither kept.json (a kept model) nor config.json "
                "(a Hugging Face model)"
            )
        return load_kept(path)
    if path.exists():
        raise InputError(f"not a checkpoint: {path} is a file; give the folder that holds it")
    if is_hub_name(checkpoint):
        return load_hf(checkpoint)
    raise InputError(
        f"not a checkpoint: {path} does not exist (give a kept-model folder, a Hugging Face "
        "model folder, or a hub name such as google/electra-small-discriminator)"
    )


def _summarise(task: str, records: list[dict[str, Any]]) -> dict[str, Any]:

    done = [r for r in records if r["status"] == "done"]
    if not done:
        return {"skipped": records[0]["message"], "job_ids": [r["job_id"] for r in records]}
    runs = [r["metrics"] for r in done]
    return {
        "headline": get_task(task).headline,
        **{k: runs[0][k] for k in ("train_examples", "eval_examples", "epochs") if k in runs[0]},
        **({"precision": done[0]["precision"]} if "precision" in done[0] else {}),
        "wall_seconds": sum(run.get("wall_seconds", 0.0) for run in runs),
        "job_ids": [r["job_id"] for r in done],
        "metrics": {
            metric: {
                **summarise_seeds([r[metric] for r in runs]),
                "values": [r[metric] for r in runs],
            }
            for metric in runs[0]
            if metric not in RECORD_FIELDS
        },
    }


def family_scores(per_task: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each family's score from the tasks' medians: ``electra_ablate.analysis.results``' paper
    aggregation (each task's median over seeds, then the mean), per family."""
    rows = []
    for name, summary in per_task.items():
        if "metrics" not in summary:
            continue
        task = get_task(name)
        for value in summary["metrics"][task.headline]["values"]:
            in_aggregate = family_of(task).in_aggregate(task)
            rows.append(
                {"family": task.family, "task": name, "in_aggregate": in_aggregate, "value": value}
            )
    if not rows:
        return {}
    frame = pl.DataFrame(rows).with_columns(
        pl.lit("checkpoint").alias("label"),
        pl.lit("checkpoint").alias("objective"),
        pl.lit(0.0).alias("checkpoint_fraction"),
        pl.lit(0.0).alias("flops_paper"),
        pl.lit(0.0).alias("flops_standard"),
    )
    scores = {}
    for row in paper_scores(frame).iter_rows(named=True):
        family = describe_family(row["family"])
        left_out = sorted(
            {r["task"] for r in rows if r["family"] == family.name and not r["in_aggregate"]}
        )
        scores[family.name] = {
            "name": family.aggregate,
            "value": row["score_paper"],
            "left_out": left_out,
        }
    return scores


def _shown(settings: TaskSettings) -> dict[str, Any]:
    return {
        "recipe": settings.recipe.model_dump(mode="json"),
        "eval_cap": settings.eval_cap,
        "params": dict(settings.params),
    }


# ---------------------------------------------------------------------------------- options
def _split(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def _seeds(raw: str) -> list[int]:
    try:
        seeds = [int(part) for part in _split(raw)]
    except ValueError:
        raise InputError(f"--seeds must be comma-separated integers, got {raw!r}") from None
    if not seeds:
        raise InputError("--seeds is empty")
    return seeds


def _glue_source(glue: str | None) -> str:
    if glue is not None:
        return glue
    data_dir = os.environ.get("ABLATE_DATA_DIR")
    if not data_dir:
        raise InputError("no GLUE data: pass --glue DIR (or --glue hub) or set ABLATE_DATA_DIR")
    return str(Path(data_dir) / "glue")


def _caps(raw: str, tasks: list[str]) -> dict[str, int]:
    """``--cap 1000`` caps every task; ``--cap sst2=2000,cola=1000`` caps the tasks named."""
    try:
        if "=" not in raw:
            return {task: int(raw) for task in tasks}
        pairs = (item.split("=", 1) for item in _split(raw))
        return {task.strip(): int(n) for task, n in pairs}
    except ValueError:
        raise InputError(f"--cap {raw!r}: give N or task=N,task=N with whole numbers") from None


def _recipe_overrides(
    cap: str | None, epochs: int | None, lr: float | None, tasks: list[str]
) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if cap is not None:
        overrides["train_caps"] = _caps(cap, tasks)
    if epochs is not None:
        overrides |= {"epochs": epochs, "task_epochs": {}}
    if lr is not None:
        overrides["lr"] = lr
    if overrides:
        _recipe(None, overrides)  # a bad value is the user's to fix
    return overrides


def _recipe(base: FinetuneRecipe | None, overrides: dict[str, Any]) -> FinetuneRecipe:

    values = base.model_dump() if base is not None else {}
    if "train_caps" in overrides:
        overrides = {
            **overrides,
            "train_caps": {**values.get("train_caps", {}), **overrides["train_caps"]},
        }
    try:
        return FinetuneRecipe(**{**values, **overrides})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InputError(f"--{error['loc'][0]}: {error['msg']}") from None


def _device(device: str) -> str:

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") or (device == "cuda" and not torch.cuda.is_available()):
        raise InputError(f"--device {device!r}: choose auto or cpu, or cuda when a GPU is visible")
    return device
