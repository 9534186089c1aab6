"""The objective contract (``electra_ablate.pretraining.objective``) as executable checks.

The engine, the FLOPs budget, checkpoints, fine-tuning and export all trust an objective to keep
the contract, and a broken promise rarely crashes: it trains an encoder nobody keeps, gives one
objective more compute than its rivals, or resumes from a state that is not the one saved. So
each promise is a small check here that fails loudly instead, usable from a plugin's pytest
suite and from ``ablate check NAME``:

    from electra_ablate.plugin import check_objective

    def test_my_objective_keeps_the_contract():
        check_objective("my_objective")  # or the class itself

The rules, in the order they run (``RULES``): ``params-validate``, ``step-output``,
``kept-encoder-gradient``, ``kept-model``, ``flops-plan``, ``stage-parameters``,
``checkpoint-roundtrip``, ``finetune`` and ``export-hf``; each ``check_*`` function's docstring
says what it enforces and why. A broken rule raises ``ContractError``, whose one-line message
starts with the rule's name; an exception the objective itself raises inside a rule becomes that
rule's ``ContractError`` (chained to the original).

Everything runs on the ``micro`` backbone (small vocabulary, short sequences, dropout 0) with
synthetic, seeded batches, so a whole check takes seconds on a CPU. ``check_objective`` leaves
the caller's RNG state as it was; the individual checks, called on their own, reseed torch's
global RNG.

Shared with the task contract (``conformance.task``): ``ContractError``, ``RuleOutcome`` and
the micro backbone, from ``conformance.common``.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError
from safetensors.torch import load_model, save_model
from torch import nn

from electra_ablate.backbone.config import BackboneConfig
from electra_ablate.backbone.model import Encoder
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.checkpoints.export import ARCHITECTURES, EXPORTED_FILES, export_hf
from electra_ablate.checkpoints.kept import load_kept, save_kept
from electra_ablate.conformance.common import (
    CONTRACT_SEQ_LEN,
    ContractError,
    RuleOutcome,
    contract_backbone,
    enforces,
    first_error,
    one_thread,
    write_contract_tokenizer,
)
from electra_ablate.evaluation.finetune.loop import finetune_task
from electra_ablate.evaluation.finetune.recipe import FinetuneRecipe
from electra_ablate.pretraining.flops import measure_step_flops, step_flops
from electra_ablate.pretraining.metric_names import metric_kind
from electra_ablate.pretraining.objective import (
    HEAD_KINDS,
    KEPT_ROLES,
    Batch,
    KeptModel,
    ModelPass,
    Objective,
    ObjectiveParams,
    StepOutput,
)
from electra_ablate.pretraining.registry import get_objective

PARAMS_VALIDATE = "params-validate"
STEP_OUTPUT = "step-output"
KEPT_ENCODER_GRADIENT = "kept-encoder-gradient"
KEPT_MODEL = "kept-model"
FLOPS_PLAN = "flops-plan"
STAGE_PARAMETERS = "stage-parameters"
CHECKPOINT_ROUNDTRIP = "checkpoint-roundtrip"
FINETUNE = "finetune"
EXPORT_HF = "export-hf"
RULES: tuple[str, ...] = (
    PARAMS_VALIDATE,
    STEP_OUTPUT,
    KEPT_ENCODER_GRADIENT,
    KEPT_MODEL,
    FLOPS_PLAN,
    STAGE_PARAMETERS,
    CHECKPOINT_ROUNDTRIP,
    FINETUNE,
    EXPORT_HF,
)
"""Every rule, in the order ``check_objective`` runs them (cheap and fundamental first)."""

CONTRACT_BATCH_SIZE = 4
FLOPS_TOLERANCE = 0.05
"""The built-in objectives' plans agree with torch's count to about 0.01%; 5% leaves room for a
plugin's small unpriced extras (a baseline head) while catching a missing or doubled pass."""
LEARNING_RATE = 1e-3
NAMES_SHOWN = 1  # a failure names this many parameters, then counts the rest


@dataclass(frozen=True)
class ContractCase:
    """One objective class with validated params, a backbone, a vocabulary and a batch: every
    check builds and feeds its objectives from this, so they all see the same thing."""

    objective_class: type[Objective]
    params: ObjectiveParams
    backbone: BackboneConfig
    vocab: Vocab
    batch: Batch
    seed: int = 0

    @property
    def name(self) -> str:
        return str(getattr(self.objective_class, "name", self.objective_class.__name__))

    @property
    def seq_len(self) -> int:
        return int(self.batch["input_ids"].shape[1])

    @property
    def batch_size(self) -> int:
        return int(self.batch["input_ids"].shape[0])

    def build(self, seed_offset: int = 0) -> Objective:
        """A fresh objective in train mode; a different ``seed_offset`` gives different weights."""
        torch.manual_seed(self.seed + seed_offset)
        objective = self.objective_class(self.backbone, self.params, self.vocab)
        objective.train()
        return objective

    def step(self, objective: Objective) -> StepOutput:
        """The objective's output on the batch, with the masks and samples drawn the same way
        every time (comparisons between two objectives rely on it)."""
        torch.manual_seed(self.seed + 1)
        return objective(self.batch)


# ---------------------------------------------------------------------------- the fixtures
def contract_vocab(size: int, seed: int = 0) -> Vocab:
    """Uneven token frequencies, so that objectives using the unigram distribution do not
    pass only because every token is equally likely."""
    counts = torch.randint(1, 50, (size,), generator=torch.Generator().manual_seed(seed))
    return Vocab(counts.float())


def contract_batch(
    vocab_size: int,
    batch_size: int = CONTRACT_BATCH_SIZE,
    seq_len: int = CONTRACT_SEQ_LEN,
    seed: int = 0,
    special: SpecialTokens = SpecialTokens(),
) -> Batch:
    """Packed ``[CLS] A [SEP] B [SEP]`` rows of ordinary tokens; the second row is padded, since
    padding is where masks, losses and attention most often go wrong."""
    generator = torch.Generator().manual_seed(seed)
    first_ordinary = max(special.ids) + 1
    ids = torch.randint(first_ordinary, vocab_size, (batch_size, seq_len), generator=generator)
    middle = seq_len // 2
    ids[:, 0], ids[:, middle], ids[:, -1] = special.cls, special.sep, special.sep
    types = torch.zeros_like(ids)
    types[:, middle + 1 :] = 1
    padded_row, padding_from = min(1, batch_size - 1), seq_len * 5 // 8
    if padding_from > middle + 1:
        ids[padded_row, padding_from - 1] = special.sep
        ids[padded_row, padding_from:] = special.pad
        types[padded_row, padding_from:] = 0
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": ids != special.pad}


def resolve_objective(name_or_class: str | type[Objective]) -> type[Objective]:
    """An entry-point name or ``package.module:Class`` (``pretraining.registry.get_objective``:
    an unknown one is an ``InputError`` with a did-you-mean), or the class itself."""
    if isinstance(name_or_class, str):
        return get_objective(name_or_class)
    if not (isinstance(name_or_class, type) and issubclass(name_or_class, Objective)):
        raise TypeError(f"{name_or_class!r} is neither an objective name nor an Objective class")
    return name_or_class


def contract_case(
    name_or_class: str | type[Objective],
    params: dict[str, Any] | None = None,
    *,
    backbone: BackboneConfig | None = None,
    seed: int = 0,
) -> ContractCase:
    """The case every check runs on; validating the params is the first rule."""
    objective_class = resolve_objective(name_or_class)
    validated = check_params_validate(objective_class, params)
    backbone = backbone or contract_backbone()
    seq_len = min(CONTRACT_SEQ_LEN, backbone.max_seq_len)
    return ContractCase(
        objective_class,
        validated,
        backbone,
        contract_vocab(backbone.vocab_size, seed),
        contract_batch(backbone.vocab_size, seq_len=seq_len, seed=seed),
        seed,
    )


# ------------------------------------------------------------------------------- the rules
@enforces(PARAMS_VALIDATE)
def check_params_validate(
    objective_class: type[Objective], params: dict[str, Any] | None = None
) -> ObjectiveParams:
    """``name`` and ``description`` are set, ``Params()`` validates with its defaults, and so do
    the given params.

    A study spec may name an objective with no params at all, so the defaults must make a valid
    configuration; ``ablate objectives`` lists name and description. ``Params`` must keep
    ``extra="forbid"``, or a misspelt knob in a spec would be silently ignored.
    """
    label = objective_class.__name__
    for attribute in ("name", "description"):
        value = getattr(objective_class, attribute, None)
        if not isinstance(value, str) or not value.strip():
            raise ContractError(PARAMS_VALIDATE, f"{label}.{attribute} is not a non-empty string")
    params_model = getattr(objective_class, "Params", None)
    if not (isinstance(params_model, type) and issubclass(params_model, ObjectiveParams)):
        raise ContractError(PARAMS_VALIDATE, f"{label}.Params is not an ObjectiveParams subclass")
    if params_model.model_config.get("extra") != "forbid":
        raise ContractError(
            PARAMS_VALIDATE,
            f"{label}.Params accepts unknown keys (model_config extra must stay 'forbid')",
        )
    try:
        params_model()
    except ValidationError as exc:
        raise ContractError(
            PARAMS_VALIDATE, f"{label}.Params() does not validate: {first_error(exc)}"
        ) from None
    try:
        return params_model.model_validate(params or {})
    except ValidationError as exc:
        raise ContractError(
            PARAMS_VALIDATE, f"params {params} do not validate: {first_error(exc)}"
        ) from None


@enforces(STEP_OUTPUT)
def check_step_output(case: ContractCase) -> None:
    """In every stage ``forward`` returns a ``StepOutput`` with a finite scalar loss that requires
    grad, and scalar metrics that do not, each of a kind (``objective.metric_kind``).

    The engine back-propagates the loss and calls ``.item()`` on every metric each step; a metric
    still attached to the graph keeps the step's activations alive and hints at a loss term that
    was meant to be detached. Reports draw a metric by its kind; a metric of none never appears.
    """
    objective = case.build()
    for index, stage in enumerate(objective.stages()):
        objective.enter_stage(index)
        out = case.step(objective)
        where = f"in stage {stage.name!r}"
        if not isinstance(out, StepOutput):
            raise ContractError(STEP_OUTPUT, f"forward returned {type(out).__name__} {where}")
        loss = out.loss
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise ContractError(STEP_OUTPUT, f"the loss is not a scalar tensor {where}")
        if not loss.is_floating_point() or not torch.isfinite(loss):
            raise ContractError(STEP_OUTPUT, f"the loss is {loss.item()!r} {where}")
        if not loss.requires_grad:
            raise ContractError(STEP_OUTPUT, f"the loss does not require grad {where}")
        if not isinstance(out.metrics, dict):
            raise ContractError(STEP_OUTPUT, f"metrics are a {type(out.metrics).__name__} {where}")
        for key, value in out.metrics.items():
            if not isinstance(key, str):
                raise ContractError(STEP_OUTPUT, f"metric key {key!r} is not a string {where}")
            if not isinstance(value, torch.Tensor) or value.dim() != 0:
                raise ContractError(STEP_OUTPUT, f"metric {key!r} is not a scalar tensor {where}")
            if value.requires_grad:
                raise ContractError(
                    STEP_OUTPUT, f"metric {key!r} requires grad (detach it) {where}"
                )
            if metric_kind(key, case.objective_class.metric_kinds) is None:
                raise ContractError(
                    STEP_OUTPUT,
                    f"metric {key!r} has no kind: name it by the convention (objective."
                    f"METRIC_NAMING: *_loss, *_nats_learnt, *_auc, *_acc, ...) or declare it in "
                    f"metric_kinds {where}",
                )


@enforces(KEPT_ENCODER_GRADIENT)
def check_kept_encoder_gradient(case: ContractCase) -> None:
    """In every stage the loss reaches every trainable parameter of ``kept_model().encoder``
    (a gradient that is missing or all zero counts as not reaching it).

    The kept encoder is what fine-tuning and export take; a part of it the loss never touches
    stays at its random initialisation, and the comparison between objectives is then about an
    encoder that was not (fully) pre-trained.
    """
    objective = case.build()
    names = _parameter_names(objective)
    for index, stage in enumerate(objective.stages()):
        objective.enter_stage(index)
        objective.zero_grad(set_to_none=True)
        case.step(objective).loss.backward()
        encoder = objective.kept_model().encoder
        untouched = [
            names.get(id(p), f"kept_model().encoder.{name}")
            for name, p in encoder.named_parameters()
            if p.requires_grad and (p.grad is None or not p.grad.any())
        ]
        if untouched:
            owned = any(id(p) in names for p in encoder.parameters())
            hint = "" if owned else " (the kept encoder is not part of the objective)"
            raise ContractError(
                KEPT_ENCODER_GRADIENT,
                f"kept encoder gets no gradient in stage {stage.name!r}: {_some(untouched)}{hint}",
            )


@enforces(KEPT_MODEL)
def check_kept_model(case: ContractCase) -> None:
    """In every stage ``kept_model()`` is a ``KeptModel`` whose encoder (an ``Encoder``) and head
    are modules of the objective, whose role is one of ``KEPT_ROLES``, and whose encoder is one
    the loss trains in that stage.

    Only the objective's own modules are optimised and checkpointed, ``load_kept`` rebuilds an
    ``Encoder`` and a head of the role, and a checkpoint may be kept in any stage: an encoder
    the current stage does not train (a frozen one) is the wrong one to keep.
    """
    objective = case.build()
    for index, stage in enumerate(objective.stages()):
        objective.enter_stage(index)
        objective.zero_grad(set_to_none=True)
        case.step(objective).loss.backward()
        kept = objective.kept_model()
        where = f"in stage {stage.name!r}"
        if not isinstance(kept, KeptModel):
            raise ContractError(KEPT_MODEL, f"kept_model() returned {type(kept).__name__} {where}")
        if kept.role not in KEPT_ROLES:
            raise ContractError(KEPT_MODEL, f"role {kept.role!r} is not one of {KEPT_ROLES}")
        if not isinstance(kept.encoder, Encoder):
            raise ContractError(
                KEPT_MODEL,
                f"the kept encoder is a {type(kept.encoder).__name__}, not the Encoder that "
                f"fine-tuning and export rebuild {where}",
            )
        modules = {id(m) for m in objective.modules()}
        for part, module in (("encoder", kept.encoder), ("head", kept.head)):
            if id(module) not in modules:
                raise ContractError(
                    KEPT_MODEL,
                    f"the kept {part} is not one of objective.modules() {where}, so it is "
                    "neither trained nor checkpointed with the objective",
                )
        if not any(p.grad is not None and p.grad.any() for p in kept.encoder.parameters()):
            raise ContractError(
                KEPT_MODEL, f"the loss trains none of the kept encoder's parameters {where}"
            )


@enforces(FLOPS_PLAN)
def check_flops_plan(case: ContractCase, tolerance: float = FLOPS_TOLERANCE) -> None:
    """In every stage ``flops_plan(seq_len)`` is a non-empty list of ``ModelPass`` with known
    heads, and its ``standard``-convention price of a step agrees with what torch counts.

    Budgets, checkpoints and plot axes are in FLOPs computed from the plan; a plan that misses
    a pass gives the objective free compute over its rivals, which is exactly the unfairness
    an equal-FLOPs comparison exists to rule out.
    """
    objective = case.build()
    seq_len, batch_size = case.seq_len, case.batch_size
    for index, stage in enumerate(objective.stages()):
        objective.enter_stage(index)
        objective.train()
        where = f"in stage {stage.name!r}"
        plan = objective.flops_plan(seq_len)
        if not isinstance(plan, list) or not plan:
            raise ContractError(FLOPS_PLAN, f"flops_plan({seq_len}) is empty {where}")
        for model_pass in plan:
            if not isinstance(model_pass, ModelPass):
                raise ContractError(
                    FLOPS_PLAN, f"flops_plan holds a {type(model_pass).__name__} {where}"
                )
            if model_pass.head not in HEAD_KINDS:
                raise ContractError(FLOPS_PLAN, f"head {model_pass.head!r} is not in {HEAD_KINDS}")
            if not 0 <= model_pass.predicted <= seq_len:
                raise ContractError(
                    FLOPS_PLAN,
                    f"a pass predicts at {model_pass.predicted} of {seq_len} positions {where}",
                )
        priced = step_flops(plan, seq_len, batch_size, "standard")
        torch.manual_seed(case.seed + 1)
        measured = measure_step_flops(objective, case.batch)
        if measured <= 0 or abs(priced - measured) > tolerance * measured:
            ratio = priced / measured if measured > 0 else math.inf
            raise ContractError(
                FLOPS_PLAN,
                f"flops_plan prices a step at {priced:.4g} FLOPs (standard convention) but torch "
                f"counts {measured:.4g}, {ratio:.3g}x, beyond the {tolerance:.0%} tolerance "
                f"{where}",
            )


@enforces(STAGE_PARAMETERS)
def check_stage_parameters(case: ContractCase) -> None:
    """After each ``enter_stage`` the parameters with ``requires_grad`` are exactly
    ``trainable_parameters()`` (each once, each the objective's own), a step gives each of them
    a gradient unless ``leaves_parameters_unused()`` says otherwise, and a step of an optimizer
    over them leaves every frozen parameter unchanged.

    The engine builds each stage's optimizer from ``trainable_parameters()``: a parameter that
    requires grad but is not listed is computed for and never updated, one listed but frozen or
    not owned is stepped behind the engine's back, and a frozen one that changes anyway (an
    in-place update in ``forward``) breaks what freezing promises (two-stage's fixed generator).
    """
    objective = case.build()
    names = _parameter_names(objective)
    for index, stage in enumerate(objective.stages()):
        objective.enter_stage(index)
        objective.train()
        where = f"in stage {stage.name!r}"
        listed = [p for _, p in objective.trainable_parameters()]
        listed_ids = [id(p) for p in listed]
        problems = [
            ("listed twice by trainable_parameters()", _duplicates(listed, names)),
            (
                "yielded by trainable_parameters() but not the objective's",
                ["a parameter" for p in listed if id(p) not in names],
            ),
            (
                "frozen but yielded by trainable_parameters()",
                [names[id(p)] for p in listed if id(p) in names and not p.requires_grad],
            ),
            (
                "requires grad but is missing from trainable_parameters()",
                [
                    name
                    for name, p in objective.named_parameters()
                    if p.requires_grad and id(p) not in set(listed_ids)
                ],
            ),
        ]
        for what, offenders in problems:
            if offenders:
                raise ContractError(STAGE_PARAMETERS, f"{what} {where}: {_some(offenders)}")
        if not listed:
            raise ContractError(STAGE_PARAMETERS, f"no parameter is trainable {where}")
        frozen = {
            name: p.detach().clone()
            for name, p in objective.named_parameters()
            if not p.requires_grad
        }
        _train_step(case, objective)
        unused = [name for name, p in objective.trainable_parameters() if p.grad is None]
        if unused and not objective.leaves_parameters_unused():
            raise ContractError(
                STAGE_PARAMETERS,
                f"trainable but given no gradient by a step {where}, and "
                f"leaves_parameters_unused() is False (DDP would fail): {_some(unused)}",
            )
        current = dict(objective.named_parameters())
        changed = [
            name for name, before in frozen.items() if not torch.equal(before, current[name])
        ]
        if changed:
            raise ContractError(
                STAGE_PARAMETERS, f"a frozen parameter changed in a step {where}: {_some(changed)}"
            )


@enforces(CHECKPOINT_ROUNDTRIP)
def check_checkpoint_roundtrip(case: ContractCase, workdir: Path) -> None:
    """State saved with ``safetensors.torch.save_model`` after training through every stage,
    loaded into a freshly built objective that entered the last stage, gives bit for bit the
    same loss under the same seed.

    This is exactly how the engine resumes (enter the saved stage, then load the weights); state
    kept outside the state dict (a plain tensor attribute, a non-persistent buffer that
    changes) would make a resumed run silently differ from an uninterrupted one.
    """
    trained = case.build()
    last = len(trained.stages()) - 1
    for index in range(last + 1):
        trained.enter_stage(index)
        trained.train()
        _train_step(case, trained)
    path = Path(workdir) / "model.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(trained, str(path))
    fresh = case.build(seed_offset=1)  # other initial weights: matching proves the load worked
    fresh.enter_stage(last)
    fresh.train()
    try:
        load_model(fresh, str(path))
    except RuntimeError as exc:
        raise ContractError(
            CHECKPOINT_ROUNDTRIP, f"the saved state does not load into a fresh objective: {exc}"
        ) from exc
    saved_state, loaded_state = trained.state_dict(), fresh.state_dict()
    differing = [k for k, v in saved_state.items() if not torch.equal(v, loaded_state[k])]
    if differing:
        raise ContractError(
            CHECKPOINT_ROUNDTRIP, f"tensors differ after loading: {_some(differing)}"
        )
    with torch.no_grad():
        saved_loss, loaded_loss = case.step(trained).loss, case.step(fresh).loss
    if not torch.equal(saved_loss, loaded_loss):
        raise ContractError(
            CHECKPOINT_ROUNDTRIP,
            f"the reloaded objective's loss {loaded_loss.item()!r} differs from the saved one's "
            f"{saved_loss.item()!r}: some state lives outside the state dict",
        )


@dataclass(frozen=True)
class _ContractTask:
    """A two-class task shaped like a GLUE task, for fine-tuning on synthetic examples."""

    name: str = "contract"
    num_labels: int = 2
    is_regression: bool = False

    def score(self, predictions: Any, labels: Any) -> dict[str, float]:
        """Plain accuracy (x100), not ``evaluation.metrics``' (which brings scikit-learn and
        scipy into every process that loads an objective, through ``electra_ablate.plugin``)."""
        matches = np.asarray(predictions) == np.asarray(labels)
        return {"accuracy": 100.0 * float(matches.mean())}

    def prediction_facts(self, predictions: Any, labels: Any) -> dict[str, float]:
        """None: the contract checks that fine-tuning runs, not what its predictions are made
        of (``FinetunedTask.prediction_facts`` does that for real tasks)."""
        return {}


@enforces(FINETUNE)
def check_finetune(case: ContractCase, workdir: Path) -> None:
    """The kept model (of the last stage) saved with ``save_kept`` and read back with
    ``load_kept`` computes what it computed before, and ``finetune_task`` trains it for an epoch
    on a few synthetic examples.

    Fine-tuning is how every objective is scored; an encoder that does not survive the kept
    format, or that fine-tuning cannot take, leaves an objective with no result at all.
    """
    kept, kept_dir = _save_kept_model(case, Path(workdir))
    loaded = load_kept(kept_dir)
    _assert_same_kept(case, kept, loaded.model)
    rows = _classification_rows(case)
    recipe = FinetuneRecipe(
        epochs=1,
        task_epochs={},
        batch_size=4,
        eval_batch_size=8,
        max_len=case.backbone.max_seq_len,
        sort_chunk_batches=1,
    )
    metrics = finetune_task(loaded, _ContractTask(), rows, rows, recipe, seed=case.seed)
    if not math.isfinite(metrics.get("accuracy", math.nan)):
        raise ContractError(FINETUNE, f"fine-tuning gave no finite accuracy: {metrics}")


@enforces(EXPORT_HF)
def check_export_hf(case: ContractCase, workdir: Path) -> str | None:
    """``export_hf`` writes a Hugging Face ELECTRA folder from the kept model (of the last
    stage). Returns why the rule was skipped: a pre-LN encoder, which export refuses by design
    (Hugging Face ELECTRA is post-LN only); None when it ran.

    Export is how a pre-trained encoder leaves this project; an objective whose kept model has
    tensors export cannot map would fail only at the end of a study. Loading the folder with
    ``transformers`` is left to the export tests (``transformers`` is optional).
    """
    workdir = Path(workdir)
    kept, kept_dir = _save_kept_model(case, workdir)
    if kept.encoder.cfg.layer_norm != "post":
        return "pre-LN encoder; Hugging Face ELECTRA is post-LN only"
    out = export_hf(kept_dir, workdir / "hf")
    written = sorted(p.name for p in out.iterdir())
    if written != sorted(EXPORTED_FILES):
        raise ContractError(EXPORT_HF, f"the export folder holds {written}")
    architectures = json.loads((out / "config.json").read_text())["architectures"]
    if architectures != [ARCHITECTURES[kept.role]]:
        raise ContractError(
            EXPORT_HF, f"exported as {architectures} for a kept model of role {kept.role!r}"
        )
    return None


# ------------------------------------------------------------------------------ the runner
def run_contract(
    name_or_class: str | type[Objective],
    params: dict[str, Any] | None = None,
    *,
    backbone: BackboneConfig | None = None,
    seed: int = 0,
    on_outcome: Callable[[RuleOutcome], None] | None = None,
) -> list[RuleOutcome]:
    """Every rule in ``RULES`` order; ``on_outcome`` hears of each rule as it holds, so the CLI
    can print progress. Raises ``ContractError`` on the first broken rule.

    The caller's torch RNG state and thread count are left as they were, and files go to a
    temporary folder.
    """
    outcomes: list[RuleOutcome] = []

    def record(rule: str, skipped: str | None = None) -> None:
        outcomes.append(RuleOutcome(rule, skipped))
        if on_outcome is not None:
            on_outcome(outcomes[-1])

    with (
        torch.random.fork_rng(devices=[]),
        torch.enable_grad(),
        one_thread(),
        tempfile.TemporaryDirectory(prefix="ablate-check-") as tmp,
    ):
        workdir = Path(tmp)
        case = contract_case(name_or_class, params, backbone=backbone, seed=seed)
        record(PARAMS_VALIDATE)
        for rule, check in (
            (STEP_OUTPUT, check_step_output),
            (KEPT_ENCODER_GRADIENT, check_kept_encoder_gradient),
            (KEPT_MODEL, check_kept_model),
            (FLOPS_PLAN, check_flops_plan),
            (STAGE_PARAMETERS, check_stage_parameters),
        ):
            check(case)
            record(rule)
        check_checkpoint_roundtrip(case, workdir / "state")
        record(CHECKPOINT_ROUNDTRIP)
        check_finetune(case, workdir / "finetune")
        record(FINETUNE)
        record(EXPORT_HF, check_export_hf(case, workdir / "export"))
    return outcomes


def check_objective(
    name_or_class: str | type[Objective],
    params: dict[str, Any] | None = None,
    *,
    backbone: BackboneConfig | None = None,
    seed: int = 0,
) -> list[str]:
    """Run the whole contract; returns the rules that held (a skipped one with its reason in
    parentheses) and raises ``ContractError`` on the first broken one."""
    outcomes = run_contract(name_or_class, params, backbone=backbone, seed=seed)
    return [outcome.label for outcome in outcomes]


# ------------------------------------------------------------------------------- helpers
def _parameter_names(module: nn.Module) -> dict[int, str]:
    """Parameter id -> the name the objective's state dict gives it (shared ones: the first)."""
    return {id(p): name for name, p in module.named_parameters()}


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    rest = len(names) - NAMES_SHOWN
    return f"{shown} (and {rest} more)" if rest > 0 else shown


def _duplicates(params: list[nn.Parameter], names: dict[int, str]) -> list[str]:
    seen: set[int] = set()
    repeated = []
    for p in params:
        if id(p) in seen:
            repeated.append(names.get(id(p), "a parameter"))
        seen.add(id(p))
    return repeated


def _train_step(case: ContractCase, objective: Objective) -> None:
    """One AdamW step over ``trainable_parameters()``, as the engine takes it."""
    optimizer = torch.optim.AdamW(
        [p for _, p in objective.trainable_parameters()], lr=LEARNING_RATE
    )
    out = case.step(objective)
    optimizer.zero_grad(set_to_none=True)
    out.loss.backward()
    optimizer.step()


def _save_kept_model(case: ContractCase, workdir: Path) -> tuple[KeptModel, Path]:
    """The kept model of a fresh objective in its last stage (the encoder a study keeps at the
    end), written with ``save_kept`` next to a tokenizer of the backbone's vocabulary size."""
    objective = case.build()
    objective.enter_stage(len(objective.stages()) - 1)
    kept = objective.kept_model()
    tokenizer_dir = write_contract_tokenizer(workdir / "tokenizer", kept.encoder.cfg.vocab_size)
    kept_dir = workdir / "kept"
    meta = {"objective": case.name, "params": case.params.model_dump(mode="json")}
    save_kept(kept_dir, kept, tokenizer_dir, meta)
    return kept, kept_dir


@torch.no_grad()
def _assert_same_kept(case: ContractCase, kept: KeptModel, loaded: KeptModel) -> None:
    """The kept model read back holds the same head tensors and computes the same hidden states
    (a subclassed encoder whose forward differs from ``Encoder``'s would not)."""
    if loaded.role != kept.role:
        raise ContractError(FINETUNE, f"saved as role {kept.role!r}, loaded as {loaded.role!r}")
    loaded_head = loaded.head.state_dict()
    differing = [k for k, v in kept.head.state_dict().items() if not torch.equal(v, loaded_head[k])]
    if differing:
        raise ContractError(FINETUNE, f"head tensors differ after load_kept: {_some(differing)}")
    kept.encoder.eval()
    loaded.encoder.eval()
    inputs = (
        case.batch["input_ids"],
        case.batch["token_type_ids"],
        case.batch.get("attention_mask"),
    )
    before, after = kept.encoder(*inputs), loaded.encoder(*inputs)
    if not torch.allclose(before, after, rtol=1e-5, atol=1e-6):
        gap = (before - after).abs().max().item()
        raise ContractError(
            FINETUNE,
            "the encoder read back by load_kept computes different hidden states "
            f"(max gap {gap:.3g})",
        )


def _classification_rows(case: ContractCase, count: int = 8) -> list[dict[str, Any]]:
    """Short single-sentence examples of ordinary tokens with alternating labels."""
    generator = torch.Generator().manual_seed(case.seed)
    special = case.vocab.special
    first_ordinary = max(special.ids) + 1
    longest = min(case.backbone.max_seq_len, 16)
    rows = []
    for i in range(count):
        length = int(torch.randint(1, longest - 1, (), generator=generator))
        body = torch.randint(
            first_ordinary, case.backbone.vocab_size, (length,), generator=generator
        )
        ids = [special.cls, *body.tolist(), special.sep]
        rows.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "label": i % 2})
    return rows
