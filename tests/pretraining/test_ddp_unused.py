"""DDP's ``find_unused_parameters`` is set only where an objective's stage leaves a trainable
parameter without a gradient (adversarial's baseline head), instead of always: elsewhere it
costs a search of the autograd graph at every step. The contract (``ablate check``) fails an
objective that leaves a parameter unused without saying so, since DDP would then fail.

A one-process gloo group is enough for DDP to be built and to step."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from engine_helpers import CFG, UNIFORM, DeterministicMLM, SyntheticBatches
from objective_names import BUILT_IN

from electra_ablate.conformance import ContractError, check_stage_parameters, contract_case
from electra_ablate.pretraining.engine import Distributed
from electra_ablate.pretraining.registry import build_objective


@pytest.fixture
def gloo_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield Distributed(rank=0, world_size=2, local_rank=0, backend="gloo")  # wraps as if 2
    dist.destroy_process_group()


def wrapped(ranks: Distributed, name: str, params: dict, stage: int = 0):
    torch.manual_seed(0)
    objective = build_objective(name, CFG, params, UNIFORM)
    objective.enter_stage(stage)
    return ranks.wrap(objective, torch.device("cpu"))


@pytest.mark.parametrize("name", BUILT_IN)
def test_only_a_stage_with_unused_parameters_makes_ddp_search_for_them(gloo_group, name):
    objective = build_objective(name, CFG, {}, UNIFORM)
    for stage in range(len(objective.stages())):
        model = wrapped(gloo_group, name, {}, stage)
        expected = name == "adversarial" and objective.stages()[stage].name == "mle_warmup"
        assert model.find_unused_parameters is expected, objective.stages()[stage].name


def test_adversarial_without_a_baseline_still_trains_under_ddp(gloo_group):
    model = wrapped(gloo_group, "adversarial", {"baseline": False, "mle_warmup": 0.0})
    assert model.find_unused_parameters
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    batches = SyntheticBatches(4)
    for step in range(2):  # DDP fails at the 2nd step if an unused parameter went unsearched
        optimizer.zero_grad(set_to_none=True)
        model(batches.batch(step)).loss.backward()
        optimizer.step()
    assert model.module.baseline_head.weight.grad is None


class SilentlyUnused(DeterministicMLM):
    """A head that no loss reaches, not declared."""

    name = "silently_unused_test"

    def __init__(self, backbone, params, vocab):
        super().__init__(backbone, params, vocab)
        self.spare = torch.nn.Linear(backbone.hidden_size, 1)


class DeclaredUnused(SilentlyUnused):
    name = "declared_unused_test"

    def leaves_parameters_unused(self) -> bool:
        return True


def test_the_contract_fails_an_objective_that_leaves_a_parameter_unused_silently():
    with pytest.raises(ContractError, match=r"no gradient.*spare\.weight"):
        check_stage_parameters(contract_case(SilentlyUnused))
    check_stage_parameters(contract_case(DeclaredUnused))
