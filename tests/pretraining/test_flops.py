"""The FLOPs model against the ELECTRA paper's figures and against what torch actually counts."""

from __future__ import annotations

import json

import pytest
import torch
import typer
from torch import nn
from typer.testing import CliRunner

from electra_ablate.backbone.config import PRESETS, BackboneConfig, max_predictions
from electra_ablate.backbone.model import Encoder, MLMHead, TokenBinaryHead
from electra_ablate.backbone.tokens import SpecialTokens, Vocab
from electra_ablate.commands import flops as flops_command
from electra_ablate.infra.errors import AblateError
from electra_ablate.pretraining.flops import (
    inference_flops,
    measure_step_flops,
    objective_flops,
    pass_flops,
    stage_step_flops,
    step_flops,
    training_flops,
)
from electra_ablate.pretraining.objective import ModelPass
from electra_ablate.pretraining.registry import available_objectives, build_objective

SMALL, BASE, LARGE = PRESETS["small"], PRESETS["base"], PRESETS["large"]
PAPER_TOLERANCE = 0.03
MEASURED_TOLERANCE = 0.05


def paper_predicted(seq_len: int) -> int:
    """The paper's script puts the MLM softmax at 0.15625 of the positions (20 of 128)."""
    return round(0.15625 * seq_len)


def bert_plan(cfg: BackboneConfig, seq_len: int) -> list[ModelPass]:
    return [ModelPass(cfg, "mlm", paper_predicted(seq_len))]


def electra_plan(cfg: BackboneConfig, generator_size: float, seq_len: int) -> list[ModelPass]:
    return [
        ModelPass(cfg.scaled(generator_size), "mlm", paper_predicted(seq_len)),
        ModelPass(cfg, "binary", seq_len),
    ]


# (name, plan, seq_len, batch, steps, figure): Table 1 / Table 8 of Clark et al. (2020); the
# 1/4-width ELECTRA-Small row is the paper's flops_computation.py, not a printed figure.
TRAIN_FIGURES = [
    ("BERT-Small", bert_plan(SMALL, 128), 128, 128, 1_450_000, 1.4e18),
    ("ELECTRA-Small, 1/2 generator", electra_plan(SMALL, 0.5, 128), 128, 128, 1_000_000, 1.4e18),
    (
        "ELECTRA-Small, 1/4 generator (script)",
        electra_plan(SMALL, 0.25, 128),
        128,
        128,
        1_000_000,
        1.29e18,
    ),
    ("BERT-Base", bert_plan(BASE, 512), 512, 256, 1_000_000, 6.4e19),
    ("ELECTRA-Base", electra_plan(BASE, 1 / 3, 512), 512, 256, 766_000, 6.4e19),
    ("BERT-Large", bert_plan(LARGE, 512), 512, 256, 1_000_000, 1.9e20),
    ("ELECTRA-400K", electra_plan(LARGE, 0.25, 512), 512, 2048, 400_000, 7.1e20),
    ("ELECTRA-1.75M", electra_plan(LARGE, 0.25, 512), 512, 2048, 1_750_000, 3.1e21),
]


@pytest.mark.parametrize(
    ("plan", "seq_len", "batch", "steps", "figure"),
    [case[1:] for case in TRAIN_FIGURES],
    ids=[c[0] for c in TRAIN_FIGURES],
)
def test_paper_convention_reproduces_train_figures(plan, seq_len, batch, steps, figure):
    total = steps * step_flops(plan, seq_len, batch, "paper")
    assert total == pytest.approx(figure, rel=PAPER_TOLERANCE)


def test_quarter_width_generator_does_not_give_the_printed_electra_small_figure():
    quarter = 1_000_000 * step_flops(electra_plan(SMALL, 0.25, 128), 128, 128, "paper")
    assert abs(quarter / 1.4e18 - 1) > PAPER_TOLERANCE


@pytest.mark.parametrize(("cfg", "figure"), [(SMALL, 3.7e9), (BASE, 2.9e10)], ids=["Small", "Base"])
def test_paper_convention_reproduces_inference_figures(cfg, figure):
    assert inference_flops(cfg, 128, "paper") == pytest.approx(figure, rel=PAPER_TOLERANCE)


def test_bert_small_with_our_19_prediction_slots_is_still_the_paper_figure():
    vocab = Vocab.uniform(SMALL.vocab_size)
    with torch.device("meta"):
        objective = build_objective("bert_mlm", SMALL, {}, vocab)
    assert objective.flops_plan(128)[0].predicted == 19
    total = training_flops(objective, 128, 128, 1_450_000, "paper")
    assert total == pytest.approx(1.4e18, rel=PAPER_TOLERANCE)


def linear_weights(module: nn.Module) -> int:
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


@pytest.mark.parametrize(
    ("preset_name", "vocab_size", "expected"),
    [
        ("small", 30522, {"paper": 1554331856896.0, "standard": 1530788118528.0}),
        ("tiny", 4096, {"paper": 180425687040.0, "standard": 159523012608.0}),
    ],
)
def test_all_tokens_mlm_step_is_priced_as_before(preset_name, vocab_size, expected):
    """All-Tokens MLM's head (a vocabulary softmax at every position plus a one-logit copy gate)
    priced exactly as the FLOPs model priced it when the head was a built-in kind: the budgets
    and checkpoints of committed studies depend on it."""
    cfg = PRESETS[preset_name].with_overrides(vocab_size=vocab_size)
    counts = torch.arange(vocab_size, 0, -1, dtype=torch.float64)
    vocab = Vocab(counts, SpecialTokens())
    with torch.device("meta"):
        objective = build_objective("all_tokens_mlm", cfg, {"generator_size": 0.25}, vocab)
    assert objective_flops(objective, 128, 128) == expected


def test_standard_forward_is_two_flops_per_linear_weight_plus_attention():
    cfg = PRESETS["micro"].with_overrides(vocab_size=300, embedding_size=16)
    seq_len = 40
    encoder = Encoder(cfg)
    attention = cfg.num_layers * 2 * (2 * seq_len * seq_len * cfg.hidden_size)
    expected = 2 * linear_weights(encoder) * seq_len + attention
    assert inference_flops(cfg, seq_len, "standard") == expected

    mlm_head = 2 * (linear_weights(MLMHead(cfg, cfg.embedding_size)) + cfg.embedding_size * 300)
    assert pass_flops(ModelPass(cfg, "mlm", 7, trained=False), seq_len, "standard") == (
        expected + 7 * mlm_head
    )
    binary_head = 2 * linear_weights(TokenBinaryHead(cfg))
    assert pass_flops(ModelPass(cfg, "binary", seq_len, trained=False), seq_len, "standard") == (
        expected + seq_len * binary_head
    )


@pytest.mark.parametrize(("convention", "multiplier"), [("paper", 2), ("standard", 3)])
def test_training_adds_the_conventions_backward_and_frozen_passes_do_not(convention, multiplier):
    frozen = ModelPass(SMALL, "mlm", 19, trained=False)
    trained = ModelPass(SMALL, "mlm", 19, trained=True)
    assert pass_flops(trained, 128, convention) == multiplier * pass_flops(frozen, 128, convention)
    assert step_flops([frozen, trained], 128, 4, convention) == 4 * (1 + multiplier) * pass_flops(
        frozen, 128, convention
    )


def micro_objective(name: str, cfg: BackboneConfig | None = None):
    torch.manual_seed(0)
    cfg = cfg or PRESETS["micro"].with_overrides(vocab_size=1000)
    return build_objective(name, cfg, {}, Vocab.uniform(cfg.vocab_size))


def random_batch(vocab: int, batch: int, length: int, padded: int = 0) -> dict[str, torch.Tensor]:
    """[CLS] A [SEP] B [SEP] rows of ordinary ids; the first row padded by ``padded`` tokens."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab, (batch, length), generator=generator)
    special = SpecialTokens()
    ids[:, 0], ids[:, length // 2], ids[:, -1] = special.cls, special.sep, special.sep
    mask = torch.ones_like(ids)
    if padded:
        ids[0, -padded - 1] = special.sep
        ids[0, -padded:], mask[0, -padded:] = special.pad, 0
    types = torch.zeros_like(ids)
    types[:, length // 2 + 1 :] = 1
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}


def assert_measured_matches_standard(objective, batch) -> None:
    batch_size, seq_len = batch["input_ids"].shape
    measured = measure_step_flops(objective, batch)
    analytic = step_flops(objective.flops_plan(seq_len), seq_len, batch_size, "standard")
    assert measured == pytest.approx(analytic, rel=MEASURED_TOLERANCE)


@pytest.mark.parametrize("name", sorted(available_objectives()))
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_measured_step_flops_match_standard_in_every_stage(name, mode):
    """Train mode uses attention dropout, so SDPA takes the math path (plain bmm); eval mode
    takes the fused CPU flash kernel, counted by our registered formulas."""
    objective = micro_objective(name)
    batch = random_batch(1000, batch=3, length=64)
    for index in range(len(objective.stages())):
        objective.enter_stage(index)
        objective.train(mode == "train")
        assert_measured_matches_standard(objective, batch)


def test_measured_flops_with_padding_and_a_tiny_config():
    tiny = PRESETS["tiny"].with_overrides(vocab_size=1000)
    for objective, length in [
        (micro_objective("electra"), 64),
        (micro_objective("electra", tiny), 64),
    ]:
        objective.eval()
        assert_measured_matches_standard(objective, random_batch(1000, 2, length, padded=9))


def test_measuring_leaves_no_gradients_behind():
    objective = micro_objective("bert_mlm")
    measure_step_flops(objective, random_batch(1000, 2, 32))
    assert all(p.grad is None for p in objective.parameters())


def test_stages_are_priced_without_entering_them():
    objective = micro_objective("two_stage")
    before = {k: v.clone() for k, v in objective.discriminator.state_dict().items()}
    priced = stage_step_flops(objective, 64, 8, "standard")
    assert objective.stage_index == 0
    assert all(torch.equal(v, objective.discriminator.state_dict()[k]) for k, v in before.items())

    expected = []
    for index in range(len(objective.stages())):
        objective.enter_stage(index)
        expected.append(objective_flops(objective, 64, 8)["standard"])
    assert [flops for _, flops in priced] == expected
    assert expected[1] > expected[0]  # stage 2 adds a discriminator to the frozen generator
    fractions = [stage.fraction for stage, _ in priced]
    assert training_flops(objective, 64, 8, 1000, "standard") == pytest.approx(
        1000 * sum(f * e for f, e in zip(fractions, expected, strict=True))
    )


def run_flops_cli(*args: str) -> dict:
    app = typer.Typer()
    flops_command.register(app)
    app.command("noop")(lambda: None)  # a second command keeps "flops" a subcommand
    result = CliRunner().invoke(app, ["flops", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_cli_reports_bert_small_train_flops_of_the_paper():
    report = run_flops_cli(
        "--model",
        "small",
        "--objective",
        "bert_mlm",
        "--steps",
        "1450000",
        "--batch",
        "128",
        "--seq",
        "128",
        "--convention",
        "paper",
    )
    assert report["train_flops"] == pytest.approx(1.4e18, rel=PAPER_TOLERANCE)
    assert report["infer_flops"] == pytest.approx(3.7e9, rel=PAPER_TOLERANCE)
    assert report["per_step_flops"] * 1450000 == pytest.approx(report["train_flops"])
    assert report["convention"] == "paper"


def test_cli_passes_generator_size_and_prices_the_discriminator_for_inference():
    common = (
        "--model",
        "small",
        "--objective",
        "electra",
        "--steps",
        "1000000",
        "--batch",
        "128",
        "--seq",
        "128",
    )
    half = run_flops_cli(*common, "--generator-size", "0.5")
    quarter = run_flops_cli(*common)
    assert half["params"]["generator_size"] == 0.5
    assert half["train_flops"] == pytest.approx(1.4e18, rel=PAPER_TOLERANCE)
    assert quarter["train_flops"] == pytest.approx(1.29e18, rel=PAPER_TOLERANCE)
    assert half["infer_flops"] == quarter["infer_flops"] == inference_flops(SMALL, 128, "paper")


def test_cli_splits_steps_between_stages():
    report = run_flops_cli(
        "--model",
        "micro",
        "--objective",
        "two_stage",
        "--steps",
        "100",
        "--batch",
        "4",
        "--seq",
        "64",
        "--vocab",
        "1000",
        "--convention",
        "standard",
    )
    cfg = PRESETS["micro"].with_overrides(vocab_size=1000)
    slots = max_predictions(0.15, 64)
    stage_costs = [
        step_flops([ModelPass(cfg, "mlm", slots)], 64, 4, "standard"),
        step_flops(
            [ModelPass(cfg, "mlm", slots, trained=False), ModelPass(cfg, "binary", 64)],
            64,
            4,
            "standard",
        ),
    ]
    assert [s["per_step_flops"] for s in report["stages"]] == stage_costs
    assert report["train_flops"] == pytest.approx(50 * sum(stage_costs))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--objective", "two_stage", "--generator-size", "0.5"), "no generator_size parameter"),
        (("--objective", "electra", "--generator-size", "1.5"), "generator_size"),
        (("--objective", "electra", "--model", "huge"), "unknown model preset 'huge'"),
    ],
)
def test_cli_user_errors_are_one_line_ablate_errors(args, message):
    app = typer.Typer()
    flops_command.register(app)
    app.command("noop")(lambda: None)
    base = {"--model": "micro", "--steps": "1", "--batch": "1", "--seq": "16"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = ["flops", *[part for item in base.items() for part in item]]
    with pytest.raises(AblateError, match=message):
        app(argv, standalone_mode=False)
