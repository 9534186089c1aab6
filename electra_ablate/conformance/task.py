"""The task contract (``electra_ablate.evaluation.task``) as executable checks.

A study trusts a task to declare itself (its name, family, metrics and what it needs from a kept
encoder), to give every declared metric as a finite number, the same for the same seed, and to
skip an encoder it cannot score with a reason instead of crashing. Each promise is a check here,
usable from a plugin's pytest suite and from ``ablate check --task NAME``:

    from electra_ablate.plugin import check_task

    def test_my_task_keeps_the_contract():
        check_task("my_task")

The rules, in the order they run (``TASK_RULES``): ``task-declares``, ``task-family``,
``task-evaluate``, ``task-deterministic``, ``task-skip`` and ``task-references``. A broken rule
raises ``ContractError`` (``conformance.common``), whose one-line message starts with the
rule's name. Tasks are scored on fresh micro kept encoders (a discriminator and an MLM one);
tasks that read a study's own corpus get a generated one (``write_contract_corpus``).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ValidationError
from torch import nn

from electra_ablate.backbone.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.backbone.tokens import SPECIAL_TOKENS
from electra_ablate.checkpoints.kept import load_kept, save_kept
from electra_ablate.conformance.common import (
    CONTRACT_SEQ_LEN,
    CONTRACT_VOCAB_SIZE,
    ContractError,
    RuleOutcome,
    contract_backbone,
    enforces,
    first_error,
    one_thread,
    write_contract_tokenizer,
)
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.evaluation.task import (
    NEEDS,
    PREDICTION_FACTS,
    RECORD_FIELDS,
    TaskSettings,
    family_of,
    get_task,
)
from electra_ablate.infra.errors import InputError
from electra_ablate.pretraining.objective import KeptModel

TASK_DECLARES = "task-declares"
TASK_FAMILY = "task-family"
TASK_EVALUATE = "task-evaluate"
TASK_DETERMINISTIC = "task-deterministic"
TASK_SKIP = "task-skip"
TASK_REFERENCES = "task-references"
TASK_RULES: tuple[str, ...] = (
    TASK_DECLARES,
    TASK_FAMILY,
    TASK_EVALUATE,
    TASK_DETERMINISTIC,
    TASK_SKIP,
    TASK_REFERENCES,
)
"""Every rule of the evaluation contract (``electra_ablate.evaluation.task``), in the order
``check_task`` runs them."""

CHECK_EXAMPLES = 32
"""Training and evaluation examples a fine-tuned task is capped at in the check."""


def contract_settings(
    task: Any, sources: dict[str, Any] | None = None, workdir: Path | None = None
) -> Any:
    """Settings for checking ``task`` in seconds: its data where ``sources`` (default:
    ``$ABLATE_DATA_DIR``'s ``glue``) points, a short recipe (one epoch of ``CHECK_EXAMPLES``
    examples) and its ``Params`` defaults. With ``workdir``, also pre-training text for tasks
    that read a study's own corpus: a generated one (``write_contract_corpus``) in the check
    encoders' vocabulary, packed to ``CONTRACT_SEQ_LEN``."""
    if sources is None:
        data_dir = os.environ.get("ABLATE_DATA_DIR")
        sources = {"glue": str(Path(data_dir) / "glue")} if data_dir else {}
    if workdir is not None:
        tokenizer_dir = write_contract_tokenizer(workdir / "tokenizer", CONTRACT_VOCAB_SIZE)
        corpus = write_contract_corpus(workdir / "corpus.txt", CONTRACT_VOCAB_SIZE)
        sources = {
            "corpus": {"paths": [str(corpus)], "heldout_fraction": 0.25},
            "tokenizer": {"vocab_file": str(tokenizer_dir / "vocab.txt")},
            "cache_dir": str(workdir / "cache"),
            **sources,
        }
    recipe = FinetuneRecipe(
        epochs=1,
        task_epochs={},
        batch_size=8,
        eval_batch_size=16,
        max_len=CONTRACT_SEQ_LEN,
        train_caps={task.name: CHECK_EXAMPLES},
    )
    return TaskSettings(
        sources=sources, recipe=recipe, eval_cap=CHECK_EXAMPLES, max_seq_len=CONTRACT_SEQ_LEN
    )


def write_contract_corpus(path: Path, vocab_size: int, documents: int = 48, seed: int = 0) -> Path:
    """A generated corpus in the contract tokenizer's words (``word5`` ...), as Wikipedia-style
    ``<doc>`` blocks: each word drawn from a fixed sparse continuation of the one before (a
    first-order Markov chain), so neighbouring tokens carry signal the way text does."""
    rng = np.random.default_rng(seed)
    first = len(SPECIAL_TOKENS)
    words = np.arange(first, vocab_size)
    follows = {int(w): rng.choice(words, size=4, replace=False) for w in words}
    lines = []
    for d in range(documents):
        word = int(rng.choice(words))
        text = []
        for _ in range(120):
            text.append(f"word{word}")
            word = int(rng.choice(follows[word]))
        lines += [f'<doc id="{d}" title="d{d}">', f"d{d}", " ".join(text), "</doc>"]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _contract_kept(workdir: Path, role: str) -> Any:
    """A fresh micro encoder with a kept head of ``role`` and a tokenizer, as ``load_kept`` reads
    it back: what every task is evaluated on in the check."""
    backbone = contract_backbone()
    torch.manual_seed(0)
    encoder = Encoder(backbone)
    head: nn.Module = (
        TokenBinaryHead(backbone)
        if role == "discriminator"
        else MLMHead(backbone, backbone.embedding_size)
    )
    tokenizer_dir = write_contract_tokenizer(workdir / "tokenizer", backbone.vocab_size)
    meta = {"objective": "contract", "run_id": "contract", "fraction": 1.0, "step": 0}
    save_kept(workdir / role, KeptModel(encoder, role, head), tokenizer_dir, meta)
    return load_kept(workdir / role)


@enforces(TASK_DECLARES)
def check_task_declares(task: Any, settings: Any) -> None:
    """``name``, ``family`` and ``needs`` are set, ``metrics`` names at least the headline,
    ``Params`` (if any) validates with its defaults and ``identity`` is JSON.

    A spec names the task; the results table keys its rows by task and metric; the headline is
    what its family averages; the identity is hashed into every job id.
    """
    for attribute in ("name", "family"):
        value = getattr(task, attribute, None)
        if not isinstance(value, str) or not value.strip():
            raise ContractError(TASK_DECLARES, f"task {attribute} is not a non-empty string")
    if task.needs not in NEEDS:
        raise ContractError(TASK_DECLARES, f"needs {task.needs!r} is not one of {NEEDS}")
    metrics = getattr(task, "metrics", None)
    if (
        not isinstance(metrics, tuple)
        or not metrics
        or not all(isinstance(m, str) for m in metrics)
    ):
        raise ContractError(TASK_DECLARES, "metrics is not a non-empty tuple of names")
    if task.Params is not None:
        if not (isinstance(task.Params, type) and issubclass(task.Params, BaseModel)):
            raise ContractError(TASK_DECLARES, "Params is not a pydantic model")
        try:
            task.Params()
        except ValidationError as exc:
            raise ContractError(
                TASK_DECLARES, f"Params() does not validate: {first_error(exc)}"
            ) from None
    try:
        json.dumps(task.identity(settings), sort_keys=True)
    except TypeError as exc:
        raise ContractError(TASK_DECLARES, f"identity(settings) is not JSON: {exc}") from None


@enforces(TASK_FAMILY)
def check_task_family(task: Any, settings: Any) -> None:
    """The task's family is registered, lists the task, says whether it enters its aggregate
    and fingerprints its data as a string (a job id hashes it)."""
    family = family_of(task)
    if task.name not in [t.name for t in family.tasks()]:
        raise ContractError(TASK_FAMILY, f"family {family.name!r} does not list {task.name!r}")
    if not isinstance(family.in_aggregate(task), bool):
        raise ContractError(TASK_FAMILY, "in_aggregate(task) is not a bool")
    if family.aggregate is not None and not isinstance(family.aggregate, str):
        raise ContractError(TASK_FAMILY, "the family's aggregate is neither a name nor None")
    family.check(task, settings)
    if not isinstance(family.fingerprint(task, settings), str):
        raise ContractError(TASK_FAMILY, "fingerprint(task, settings) is not a string")


def _scored(task: Any, metrics: Any, rule: str, where: str) -> dict[str, float]:

    if not isinstance(metrics, dict):
        raise ContractError(rule, f"{where} returned a {type(metrics).__name__}, not a dict")
    missing = [m for m in task.metrics if m not in metrics]
    if missing:
        raise ContractError(rule, f"{where} lacks the declared metric(s) {', '.join(missing)}")
    beside = (*RECORD_FIELDS, *PREDICTION_FACTS)  # bookkeeping, what predictions are made of
    extra = [m for m in metrics if m not in task.metrics and m not in beside]
    if extra:
        raise ContractError(rule, f"{where} reports undeclared metric(s) {', '.join(extra)}")
    for name in task.metrics:
        value = metrics[name]
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ContractError(rule, f"{where}: metric {name!r} is {value!r}, not a finite number")
    return {m: float(metrics[m]) for m in task.metrics}


@enforces(TASK_EVALUATE)
def check_task_evaluate(task: Any, settings: Any, kept: Any) -> dict[str, float]:
    """``evaluate`` on a micro kept encoder returns every declared metric as a finite number
    and nothing undeclared besides the bookkeeping in ``RECORD_FIELDS``; the encoder is left as
    it was.

    The results table keeps every metric a task reports: an undeclared or missing one would
    give rows a report cannot place, a non-finite one a NaN score."""
    before = {k: v.clone() for k, v in kept.model.encoder.state_dict().items()}
    metrics = task.evaluate(kept, settings, 0, "cpu")
    scored = _scored(task, metrics, TASK_EVALUATE, "evaluate")
    after = kept.model.encoder.state_dict()
    if any(not torch.equal(v, after[k]) for k, v in before.items()):
        raise ContractError(TASK_EVALUATE, "evaluate changed the kept encoder's weights")
    return scored


@enforces(TASK_DETERMINISTIC)
def check_task_deterministic(task: Any, settings: Any, kept: Any, first: dict[str, float]) -> None:
    """The same encoder, settings and seed give the same metrics again.

    A job's record is cached under its id and ``ablate finetune`` must give a study's numbers
    exactly: a result that moves between two runs of one job is not one result."""
    again = _scored(task, task.evaluate(kept, settings, 0, "cpu"), TASK_DETERMINISTIC, "evaluate")
    if again != first:
        raise ContractError(TASK_DETERMINISTIC, f"seed 0 gave {first}, then {again}")


@enforces(TASK_SKIP)
def check_task_skip(task: Any, discriminator: Any, mlm: Any) -> None:
    """A task that needs the detection head skips an MLM encoder with a reason and takes a
    discriminator's; any other task takes both."""
    for kept in (discriminator, mlm):
        reason = task.skip_reason(kept)
        expected = task.needs == "detection_head" and kept.model.role != "discriminator"
        if expected and not (isinstance(reason, str) and reason):
            raise ContractError(TASK_SKIP, f"no reason to skip a kept {kept.model.role} encoder")
        if not expected and reason is not None:
            raise ContractError(TASK_SKIP, f"skips a kept {kept.model.role} encoder: {reason}")


@enforces(TASK_REFERENCES)
def check_task_references(task: Any, settings: Any, tokenizer_dir: Path) -> None:
    """Every declared reference scores the task's metrics without an encoder, the same twice."""
    for reference in task.references:
        where = f"evaluate_reference({reference!r})"
        first = _scored(
            task,
            task.evaluate_reference(reference, settings, 0, tokenizer_dir),
            TASK_REFERENCES,
            where,
        )
        again = task.evaluate_reference(reference, settings, 0, tokenizer_dir)
        if _scored(task, again, TASK_REFERENCES, where) != first:
            raise ContractError(TASK_REFERENCES, f"{where} is not the same twice")


def run_task_contract(
    name_or_task: Any,
    settings: Any = None,
    *,
    on_outcome: Callable[[RuleOutcome], None] | None = None,
) -> list[RuleOutcome]:
    """Every rule in ``TASK_RULES`` order on a task (a registered name, or a ``Task``); the
    caller's RNG state and thread count are left as they were."""
    task = get_task(name_or_task) if isinstance(name_or_task, str) else name_or_task
    outcomes: list[RuleOutcome] = []

    def record(rule: str, skipped: str | None = None) -> None:
        outcomes.append(RuleOutcome(rule, skipped))
        if on_outcome is not None:
            on_outcome(outcomes[-1])

    with (
        torch.random.fork_rng(devices=[]),
        one_thread(),
        tempfile.TemporaryDirectory(prefix="ablate-check-task-") as tmp,
    ):
        workdir = Path(tmp)
        settings = settings if settings is not None else contract_settings(task, workdir=workdir)
        try:  # missing data is the user's to fix (exit 2), not a broken rule
            family_of(task).check(task, settings)
        except InputError as exc:
            raise InputError(f"{exc} (the check reads GLUE from $ABLATE_DATA_DIR/glue)") from None
        check_task_declares(task, settings)
        record(TASK_DECLARES)
        check_task_family(task, settings)
        record(TASK_FAMILY)
        discriminator = _contract_kept(workdir, "discriminator")
        mlm = _contract_kept(workdir, "mlm")
        kept = discriminator if task.needs == "detection_head" else mlm
        first = check_task_evaluate(task, settings, kept)
        record(TASK_EVALUATE)
        check_task_deterministic(task, settings, kept, first)
        record(TASK_DETERMINISTIC)
        check_task_skip(task, discriminator, mlm)
        record(TASK_SKIP)
        if task.references:
            check_task_references(task, settings, workdir / "tokenizer")
            record(TASK_REFERENCES)
        else:
            record(TASK_REFERENCES, "the task declares no reference")
    return outcomes


def check_task(name_or_task: Any, settings: Any = None) -> list[str]:
    """Run the whole evaluation contract; returns the rules that held (a skipped one with its
    reason) and raises ``ContractError`` on the first broken one. For a plugin's own tests::


        def test_my_task_keeps_the_contract():
            check_task("my_task")
    """
    return [outcome.label for outcome in run_task_contract(name_or_task, settings)]
