"""The objective contract kit (``electra_ablate.conformance.objective``, ``ablate check``):
every built-in objective keeps the contract, and objectives that break one rule are rejected
naming it."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
import torch
from ablate_cli import ablate, one_line_error
from electra_ablate.objectives.bert_mlm import BertMLM
from electra_ablate.objectives.electra import Electra
from objective_names import BUILT_IN

from electra_ablate.backbone.model import Encoder
from electra_ablate.cli import run_cli
from electra_ablate.conformance import (
    CHECKPOINT_ROUNDTRIP,
    EXPORT_HF,
    FLOPS_PLAN,
    KEPT_ENCODER_GRADIENT,
    KEPT_MODEL,
    PARAMS_VALIDATE,
    RULES,
    STAGE_PARAMETERS,
    STEP_OUTPUT,
    ContractError,
    check_kept_encoder_gradient,
    check_objective,
    contract_backbone,
    contract_case,
    run_contract,
)
from electra_ablate.infra.errors import AblateError, InputError
from electra_ablate.pretraining.objective import KeptModel, ObjectiveParams, StepOutput
from electra_ablate.pretraining.registry import available_objectives

pytestmark = pytest.mark.usefixtures("one_thread")


# --------------------------------------------------------------------- broken objectives
class FreshKeptEncoder(BertMLM):
    """kept_model() hands over a brand-new encoder that the loss never used."""

    name = "fresh_kept_encoder"
    description = "broken: keeps an encoder it never trains"

    def kept_model(self) -> KeptModel:
        return KeptModel(Encoder(self.backbone), "mlm", self.mlm.head)


class SpareKeptEncoder(BertMLM):
    """Owns a second encoder and keeps it, but trains the first."""

    name = "spare_kept_encoder"
    description = "broken: keeps an owned encoder the loss never reaches"

    def __init__(self, backbone, params, vocab):
        super().__init__(backbone, params, vocab)
        self.spare = Encoder(backbone)

    def kept_model(self) -> KeptModel:
        return KeptModel(self.spare, "mlm", self.mlm.head)


class DetachedEmbeddings(BertMLM):
    """Cuts the gradient at the embeddings' output, so only the tied word embeddings learn
    (through the MLM head) and the position, token-type and LayerNorm parameters never do."""

    name = "detached_embeddings"
    description = "broken: part of the kept encoder gets no gradient"

    def __init__(self, backbone, params, vocab):
        super().__init__(backbone, params, vocab)
        self.mlm.encoder.embeddings.register_forward_hook(lambda module, args, out: out.detach())


class AttachedMetric(BertMLM):
    """Logs the loss itself as a metric, graph and all."""

    name = "attached_metric"
    description = "broken: a metric that requires grad"

    def forward(self, batch):
        out = super().forward(batch)
        return StepOutput(out.loss, {**out.metrics, "raw_loss": out.loss})


class UnderCountedFlops(BertMLM):
    """Runs the MLM twice per step but declares one pass: the plan prices half the step."""

    name = "under_counted_flops"
    description = "broken: flops_plan misses a pass"

    def forward(self, batch):
        first, second = super().forward(batch), super().forward(batch)
        return StepOutput((first.loss + second.loss) / 2, first.metrics)


class UnlistedBias(Electra):
    """trainable_parameters() forgets the detection head's bias, which still requires grad."""

    name = "unlisted_bias"
    description = "broken: the optimizer would never update a trainable parameter"

    def trainable_parameters(self):
        bias = self.discriminator.head.logit.bias
        return ((n, p) for n, p in super().trainable_parameters() if p is not bias)


class StepCounter(BertMLM):
    """Scales its loss by a step counter kept outside the state dict: a resumed run differs."""

    name = "step_counter"
    description = "broken: state that is not checkpointed"

    def __init__(self, backbone, params, vocab):
        super().__init__(backbone, params, vocab)
        self.steps_seen = 0

    def forward(self, batch):
        out = super().forward(batch)
        self.steps_seen += 1
        return StepOutput(out.loss * (1.0 + 0.01 * self.steps_seen), out.metrics)


class LaxParams(ObjectiveParams):
    model_config = {**ObjectiveParams.model_config, "extra": "ignore"}


class IgnoresUnknownParams(BertMLM):
    name = "ignores_unknown_params"
    description = "broken: a misspelt param is silently dropped"
    Params = LaxParams


def rejected(objective_class, **kwargs) -> ContractError:
    with pytest.raises(ContractError) as caught:
        check_objective(objective_class, **kwargs)
    error = caught.value
    assert str(error) == f"{error.rule}: {error.detail}"
    assert "\n" not in str(error)
    return error


# ------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_objective_keeps_the_contract(name):
    assert check_objective(name) == list(RULES)


# the built-ins whose params take ``tying`` (a generator sharing the main encoder's embeddings)
TIED = [name for name in BUILT_IN if "tying" in available_objectives()[name].Params.model_fields]


def test_some_built_ins_tie_a_generator():
    assert "electra" in TIED


@pytest.mark.parametrize("name", TIED)
def test_every_built_in_with_a_generator_keeps_the_contract_under_gdes_tying(name):
    """``tying: gdes`` rebuilds the main encoder's embeddings (docs/design.md): every objective
    whose params take ``tying`` keeps the contract with it."""
    assert check_objective(name, {"tying": "gdes", "generator_size": 1.0}) == list(RULES)


def test_a_kept_encoder_the_loss_never_used_is_rejected_by_the_gradient_rule():
    error = rejected(FreshKeptEncoder)
    assert error.rule == KEPT_ENCODER_GRADIENT
    assert "kept encoder gets no gradient in stage 'main'" in error.detail
    assert "not part of the objective" in error.detail


def test_an_owned_but_unused_kept_encoder_is_named_by_its_parameters():
    error = rejected(SpareKeptEncoder)
    assert error.rule == KEPT_ENCODER_GRADIENT
    n_parameters = len(list(Encoder(contract_backbone()).parameters()))
    assert f"spare.embeddings.word.weight (and {n_parameters - 1} more)" in error.detail


def test_a_partly_untrained_kept_encoder_names_the_missed_parameter():
    with pytest.raises(ContractError) as caught:
        check_kept_encoder_gradient(contract_case(DetachedEmbeddings))
    assert caught.value.rule == KEPT_ENCODER_GRADIENT
    # the word embeddings still learn through the tied MLM output matrix; the rest do not
    assert caught.value.detail.endswith(": mlm.encoder.embeddings.position.weight (and 3 more)")


def test_metrics_that_require_grad_are_rejected():
    error = rejected(AttachedMetric)
    assert error.rule == STEP_OUTPUT
    assert "metric 'raw_loss' requires grad" in error.detail


def test_a_plan_that_under_counts_by_half_is_rejected():
    error = rejected(UnderCountedFlops)
    assert error.rule == FLOPS_PLAN
    assert "0.5x" in error.detail


def test_a_trainable_parameter_missing_from_the_optimizer_is_rejected():
    error = rejected(UnlistedBias)
    assert error.rule == STAGE_PARAMETERS
    assert "missing from trainable_parameters()" in error.detail
    assert "discriminator.head.logit.bias" in error.detail


def test_state_outside_the_state_dict_breaks_the_checkpoint_roundtrip():
    error = rejected(StepCounter)
    assert error.rule == CHECKPOINT_ROUNDTRIP
    assert "differs" in error.detail


@pytest.mark.parametrize(
    ("objective", "params", "expected"),
    [
        ("electra", {"generator_sise": 0.5}, "generator_sise: Extra inputs are not permitted"),
        ("electra", {"tying": "all"}, "generator_size 1.0"),
        (IgnoresUnknownParams, None, "accepts unknown keys"),
    ],
)
def test_params_that_do_not_validate_are_rejected(objective, params, expected):
    error = rejected(objective, params=params)
    assert error.rule == PARAMS_VALIDATE
    assert expected in error.detail


def test_an_objective_crashing_inside_a_rule_is_that_rules_failure():
    class CrashingKeptModel(BertMLM):
        name = "crashing"
        description = "broken: kept_model raises"

        def kept_model(self):
            raise RuntimeError("no encoder here")

    error = rejected(CrashingKeptModel)
    assert error.rule == KEPT_ENCODER_GRADIENT
    assert error.detail == "RuntimeError: no encoder here"
    assert isinstance(error.__cause__, RuntimeError)


def test_export_is_skipped_with_its_reason_for_a_pre_ln_backbone():
    passed = check_objective("electra", backbone=contract_backbone(layer_norm="pre"))
    assert passed[:-1] == list(RULES[:-1])
    assert (
        passed[-1] == f"{EXPORT_HF} (skipped: pre-LN encoder; Hugging Face ELECTRA is post-LN only)"
    )


def test_the_contract_leaves_the_callers_rng_and_threads_alone():
    torch.set_num_threads(2)  # the module's fixture puts back what was there before
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    outcomes = run_contract("bert_mlm", {"mask_rate": 0.2})
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == 2
    assert [o.rule for o in outcomes] == list(RULES)


def test_unknown_names_are_input_errors_with_a_suggestion():
    with pytest.raises(InputError, match="did you mean 'electra'"):
        check_objective("electrum")


# ------------------------------------------------------------------------------- the CLI
def test_cli_json_report_and_params(capsys):
    args = ["check", "electra", "--param", "generator_size=0.5", "-p", "tying=none", "--json"]
    assert run_cli(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["params"] == {"generator_size": 0.5, "tying": "none"}
    assert [row["rule"] for row in report["rules"]] == list(RULES)
    assert {row["status"] for row in report["rules"]} == {"ok"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "electra", "-p", "generator_sise=0.5"], "did you mean 'generator_size'?"),
        (["check", "electra", "-p", "generator_size"], "is not key=value"),
        (["check", "electra", "-p", "generator_size=big"], "generator_size"),
    ],
)
def test_cli_bad_params_are_input_errors(capsys, args, message):
    assert run_cli(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


BROKEN_PLUGIN = textwrap.dedent("""
    from electra_ablate.pretraining.objective import StepOutput
    from electra_ablate.objectives.bert_mlm import BertMLM


    class AttachedMetricPlugin(BertMLM):
        name = "attached_metric_plugin_test"
        description = "broken test plugin"

        def forward(self, batch):
            out = super().forward(batch)
            return StepOutput(out.loss, {**out.metrics, "raw_loss": out.loss})
""")


@pytest.fixture
def broken_plugin(tmp_path, monkeypatch):
    """A broken objective installed the way pip leaves a plugin: a dist-info entry point."""
    (tmp_path / "attached_metric_plugin_test.py").write_text(BROKEN_PLUGIN)
    dist = tmp_path / "attached_metric_plugin_test-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: attached-metric-plugin-test\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[electra_ablate.objectives]\n"
        "attached_metric_plugin_test = attached_metric_plugin_test:AttachedMetricPlugin\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "attached_metric_plugin_test"
    sys.modules.pop("attached_metric_plugin_test", None)


@pytest.mark.parametrize("as_json", [False, True], ids=["lines", "json"])
def test_cli_reports_a_broken_rule_in_one_line_and_exits_1(broken_plugin, capsys, as_json):
    assert run_cli(["check", broken_plugin, *(["--json"] if as_json else [])]) == 1
    out, err = capsys.readouterr()
    assert (
        err == "error: step-output: metric 'raw_loss' requires grad (detach it) in stage 'main'\n"
    )
    if as_json:
        report = json.loads(out)
        assert report["ok"] is False
        assert report["rules"] == [
            {"rule": PARAMS_VALIDATE, "status": "ok", "detail": None},
            {
                "rule": STEP_OUTPUT,
                "status": "failed",
                "detail": err[len("error: step-output: ") :].strip(),
            },
        ]
    else:
        assert out == f"ok  {PARAMS_VALIDATE}\n"


def test_contract_error_is_an_ablate_error_exiting_1():
    error = ContractError(KEPT_MODEL, "a\n  b")
    assert isinstance(error, AblateError) and error.exit_code == 1
    assert str(error) == f"{KEPT_MODEL}: a b"


def test_ablate_check_passes_electra():
    """Through the CLI's entry function, as the console script runs it (``ablate_cli.ablate``)."""
    result = ablate("check", "electra")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"ok  {rule}" for rule in RULES]


def test_ablate_check_of_an_unknown_name_is_one_line_exit_2():
    result = ablate("check", "electrum")
    one_line_error(result, 2, "did you mean 'electra'")
    assert "Traceback" not in result.stdout
