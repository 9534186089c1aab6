"""``mask_token_share``: the original code's generator input (``pretrain_helpers.mask``: 85% of
the selected slots [MASK], 15% their original token) as an option. Unset, the generator reads
[MASK] at every selected slot as before: no random draw, no change to an ELECTRA run's id; either
way the generator is scored and the main model corrupted at every selected slot."""

from __future__ import annotations

import pytest
import torch
from engine_helpers import CFG, UNIFORM, SyntheticBatches

from electra_ablate.pretraining.components.generator import generator_input
from electra_ablate.pretraining.components.masking import select_masked
from electra_ablate.pretraining.departures import params_departures
from electra_ablate.pretraining.registry import available_objectives, build_objective


def generator_objectives() -> list[str]:
    """Every installed objective whose params carry the option (derived, not listed)."""
    return sorted(
        name
        for name, cls in available_objectives().items()
        if "mask_token_share" in cls.Params.model_fields
    )


def seen_by_generator(share: float | None, seed: int = 0):
    """One seeded ELECTRA corruption, and the input its generator read."""
    torch.manual_seed(0)
    params = {} if share is None else {"mask_token_share": share}
    objective = build_objective("electra", CFG, params, UNIFORM)
    seen = {}

    def record(module: torch.nn.Module, args: tuple) -> None:
        seen["input"] = args[1].clone()

    objective.generator.register_forward_pre_hook(record)
    batch = SyntheticBatches(64).batch(seed)
    torch.manual_seed(seed)
    corruption = objective.generator.corrupt(batch, objective.vocab, 0.15, 1.0)
    return batch["input_ids"], seen["input"], corruption


def test_the_generator_reads_mask_at_85_percent_of_the_selected_slots_and_the_rest_unchanged():
    ids, seen, c = seen_by_generator(0.85)
    selected = c.slots.mask_of(ids)
    assert torch.equal(seen[~selected], ids[~selected])  # outside the slots: the input
    at_slots = seen[selected]
    masked = at_slots == UNIFORM.special.mask
    assert torch.equal(at_slots[~masked], ids[selected][~masked])  # kept: the original token
    share = masked.float().mean().item()
    assert 0.80 < share < 0.90 and share < 1.0  # 85% in expectation, seeded
    # the generator is scored at every selected slot, and the main model's input is corrupted
    # there (and only there), whatever it read
    assert int(c.slots.valid.sum()) == int(selected.sum())
    assert torch.equal(c.corrupted[~selected], ids[~selected])


def test_unset_the_generator_reads_mask_at_every_selected_slot_and_draws_nothing_more():
    ids, seen, c = seen_by_generator(None)
    selected = c.slots.mask_of(ids)
    assert (seen[selected] == UNIFORM.special.mask).all()
    slots = select_masked(ids, UNIFORM, 0.15)
    before = torch.get_rng_state()
    generator_input(slots, UNIFORM, None)
    assert torch.equal(torch.get_rng_state(), before)  # the random stream of earlier runs


def test_the_option_is_out_of_the_params_dump_while_unset_and_its_departure_is_named():
    names = generator_objectives()
    assert "electra" in names
    for name in names:
        params = available_objectives()[name].Params
        assert "mask_token_share" not in params().model_dump()  # a run's id: unchanged
        assert params(mask_token_share=0.85).model_dump()["mask_token_share"] == 0.85
        assert any("[MASK] at every selected slot" in d for d in params_departures(name, {}))
        assert not any("[MASK]" in d for d in params_departures(name, {"mask_token_share": 0.85}))


def test_a_unigram_generator_states_no_input_departure_and_refuses_the_option():
    """A unigram generator reads no input: its reports state no [MASK] departure, and setting
    the option (which would do nothing) is refused."""
    checked = []
    for name in generator_objectives():
        params = available_objectives()[name].Params
        try:
            params(generator="unigram")
        except ValueError:  # needs a trained generator (adversarial): nothing to state
            continue
        checked.append(name)
        assert not any("[MASK]" in d for d in params_departures(name, {"generator": "unigram"})), (
            name
        )
        with pytest.raises(ValueError, match="does nothing"):
            params(generator="unigram", mask_token_share=0.85)
    assert "electra" in checked
