"""``rng.pt`` is read with ``torch.load(..., weights_only=True)``: a state's checksums are its
maker's own, so a state from elsewhere whose ``rng.pt`` is a pickle that runs code used to run
it at the next resume. Now such a file is refused as unreadable (the state is skipped, never
run), and states written before the rule, tensors already, read back as they were."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_model

from electra_ablate.infra.manifest import write_manifest
from electra_ablate.pretraining.engine.state import load_latest_state, read_rng, restore_rng


def a_pickle_that_runs(marker) -> bytes:
    """A pickle whose loading creates ``marker`` (protocol 0: ``exec(...)``)."""
    return f"cbuiltins\nexec\n(Vopen({str(marker)!r}, 'w').close()\ntR.".encode()


def test_a_state_written_as_before_reads_back_with_weights_only(tmp_path):
    """What ``save_state`` wrote before and writes now: one dict of uint8 tensors per rank."""
    torch.manual_seed(3)
    cuda = [torch.full((16,), i, dtype=torch.uint8) for i in range(2)]
    saved = [{"cpu": torch.get_rng_state()}, {"cpu": torch.get_rng_state(), "cuda": cuda}]
    torch.save(saved, tmp_path / "rng.pt")
    states = read_rng(tmp_path / "rng.pt")
    assert torch.equal(states[0]["cpu"], saved[0]["cpu"])
    assert [torch.equal(a, b) for a, b in zip(states[1]["cuda"], cuda, strict=True)] == [1, 1]
    draws = torch.rand(3)
    torch.manual_seed(0)
    restore_rng(tmp_path / "rng.pt", rank=0, world_size=2, seed=9)
    assert torch.equal(torch.rand(3), draws), "the saved state restored"


def test_an_rng_file_that_is_a_pickle_never_runs(tmp_path):
    ran = tmp_path / "ran"
    (tmp_path / "rng.pt").write_bytes(a_pickle_that_runs(ran))
    with pytest.raises(Exception):  # noqa: B017 - torch's UnpicklingError, whichever its type
        restore_rng(tmp_path / "rng.pt", rank=0, world_size=1, seed=0)
    assert not ran.exists()


@pytest.mark.parametrize(
    "content", [{"cpu": torch.zeros(3)}, [{"cpu": torch.zeros(3, dtype=torch.uint8), "x": 1}]]
)
def test_an_rng_file_of_another_shape_is_refused(tmp_path, content):
    torch.save(content, tmp_path / "rng.pt")
    with pytest.raises(ValueError, match="one random state per rank"):
        read_rng(tmp_path / "rng.pt")


def test_a_crafted_state_is_skipped_as_unreadable_and_its_pickle_never_runs(tmp_path, capsys):
    """A state that verifies (its manifest is the crafter's) but whose rng.pt is code: the
    resume skips it with the usual line and starts from the state before, or from step 0."""
    ran = tmp_path / "ran"
    state = tmp_path / "states" / "step-000000009"
    state.mkdir(parents=True)
    model = torch.nn.Linear(2, 2)
    save_model(model, str(state / "model.safetensors"))
    (state / "trainer.json").write_text(json.dumps({"step": 9}))
    (state / "rng.pt").write_bytes(a_pickle_that_runs(ran))
    write_manifest(state)

    def restore(folder, counters):
        restore_rng(folder / "rng.pt", rank=0, world_size=1, seed=0)

    assert load_latest_state(tmp_path / "states", model, restore, torch.device("cpu")) is None
    assert not ran.exists()
    err = capsys.readouterr().err
    assert f"warning: skipping checkpoint {state}: unreadable" in err
