"""The dry-run's wall-time model packs work the way ``--workers`` hands it out."""

from __future__ import annotations

from electra_ablate.study.estimate import makespan


def test_runs_go_first_longest_first_then_fine_tunes_fill_whichever_worker_frees_up():
    # three 10-minute runs on two workers: one worker runs two of them (20), the other one (10)
    # and then takes fine-tunes until both are busy to the same point
    assert makespan([10.0, 10.0, 10.0], [], 2) == 20.0
    assert makespan([10.0, 10.0, 10.0], [3.0] * 9, 2) == 29.0  # 30 + 27 = 57 minutes of work
    # whole units (a run with its own nine fine-tunes) could not share the last run's fine-tunes
    # and would take 2 * (10 + 27) = 74


def test_one_worker_does_everything_in_turn():
    assert makespan([5.0, 1.0], [2.0, 2.0], 1) == 10.0
    assert makespan([], [], 3) == 0.0
