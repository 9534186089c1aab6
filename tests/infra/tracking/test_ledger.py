"""``electra_ablate.infra.tracking.ledger``: what each tracker run of a unit has been sent is
read back by the next process, per tracker run and per tracker, and a ledger that cannot be read
counts as empty (at worst a point is sent twice, never lost)."""

from __future__ import annotations

from electra_ablate.infra.tracking import Ledger


def test_what_was_sent_is_read_back_by_the_next_process(tmp_path):
    path = tmp_path / "tracking.json"
    ledger = Ledger(path, "run-1")
    ledger.note_step("mlflow", "train", 40)
    ledger.note_step("mlflow", "train", 20)  # an older row again: the last step stays
    ledger.note_item("mlflow", "kept-0.5")
    ledger.note_item("mlflow", "kept-0.5")
    ledger.save()
    again = Ledger(path, "run-1")
    assert again.sent_step("mlflow", "train") == 40
    assert again.has("mlflow", "kept-0.5") and not again.has("mlflow", "kept-1")
    assert again.sent_step("mlflow", "eval") == -1
    assert again.sent_step("wandb", "train") == -1 and not again.has("wandb", "kept-0.5")


def test_each_tracker_run_keeps_its_own_entries_in_one_file(tmp_path):
    path = tmp_path / "tracking.json"
    first = Ledger(path, "run-1")
    first.note_step("tensorboard", "train", 10)
    first.save()
    copied = Ledger(path, "run-of-another-study")
    assert copied.sent_step("tensorboard", "train") == -1
    copied.note_step("tensorboard", "train", 5)
    copied.save()
    assert Ledger(path, "run-1").sent_step("tensorboard", "train") == 10
    assert Ledger(path, "run-of-another-study").sent_step("tensorboard", "train") == 5


def test_a_ledger_that_cannot_be_read_counts_as_empty_and_is_written_again(tmp_path):
    path = tmp_path / "tracking.json"
    for damaged in ("{not json", "[1, 2]", '{"run-1": {"mlflow": {"curves": [], "items": 3}}}'):
        path.write_text(damaged)
        ledger = Ledger(path, "run-1")
        assert ledger.sent_step("mlflow", "train") == -1 and not ledger.has("mlflow", "x")
        ledger.note_step("mlflow", "train", 7)
        ledger.save()
        assert Ledger(path, "run-1").sent_step("mlflow", "train") == 7
