"""``electra_ablate.infra.errors``: the exit code an error carries is the one the CLI exits with
(2 for the user's input, 1 for a failure while running), an interruption is not an error any
``except Exception`` swallows, and a near miss is named."""

from __future__ import annotations

import pytest

from electra_ablate.infra.errors import (
    AblateError,
    DataError,
    InputError,
    Interrupted,
    MixedData,
    SpecError,
    TrainingDiverged,
    WriteFailed,
    did_you_mean,
)


@pytest.mark.parametrize(
    "error, code",
    [
        (InputError, 2),
        (SpecError, 2),
        (DataError, 2),
        (MixedData, 2),
        (AblateError, 1),
        (WriteFailed, 1),
        (TrainingDiverged, 1),
    ],
)
def test_each_kind_carries_its_exit_code_and_its_one_line(error, code):
    raised = error("the spec names no objective")
    assert isinstance(raised, AblateError)
    assert raised.exit_code == code and str(raised) == "the spec names no objective"


def test_an_explicit_exit_code_wins_for_that_error_only():
    assert AblateError("stale lock", exit_code=3).exit_code == 3
    assert AblateError("stale lock").exit_code == 1


def test_an_interruption_passes_through_except_exception_with_its_signal():
    with pytest.raises(Interrupted) as caught:
        try:
            raise Interrupted(15)
        except Exception:  # what a library's clean-up catches
            pytest.fail("an interruption was caught as an error")
    assert caught.value.signum == 15


def test_did_you_mean_names_the_closest_choice_or_nothing():
    choices = ["electra", "electra_15", "bert_mlm"]
    assert did_you_mean("electar", choices) == " (did you mean 'electra'?)"
    assert did_you_mean("bert", choices) == " (did you mean 'bert_mlm'?)"
    assert did_you_mean("xlnet", choices) == ""
