"""``electra_ablate.infra.threads``: torch's thread count is process-wide, so a block that sets
it for its own work gives the caller's count back, however the block ends."""

from __future__ import annotations

import pytest
import torch

from electra_ablate.infra.threads import torch_threads

pytestmark = pytest.mark.usefixtures("one_thread")  # each test starts at one thread (conftest)


def test_the_block_runs_at_the_count_asked_for_and_the_count_comes_back():
    with torch_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 1


def test_the_count_comes_back_when_the_block_fails():
    with pytest.raises(RuntimeError, match="inside"), torch_threads(2):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == 1


def test_none_leaves_the_count_as_it_is_and_puts_back_a_change_made_inside():
    with torch_threads(None):
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)  # a library call that changes it for its own work
    assert torch.get_num_threads() == 1
