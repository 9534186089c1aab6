"""``ablate doctor``: one screen on any machine (CPU here), every check a row, exit 0."""

from __future__ import annotations

import json
import os

import pytest
import torch
from ablate_cli import ablate

from electra_ablate.pretraining.doctor import SDPA_KERNELS, attempt, sdpa_kernels


def test_a_failing_check_becomes_a_row_not_an_exception():
    def broken() -> str:
        raise RuntimeError("no kernel image is available\nsecond line")

    check = attempt("torch.compile", broken)
    assert not check.ok and check.detail == "RuntimeError: no kernel image is available"
    assert attempt("fine", lambda: "42 steps/s").ok


def test_the_attention_kernel_is_named_for_both_mask_cases():
    found = sdpa_kernels(torch.device("cpu"))
    kernels = {label for _, label in SDPA_KERNELS}
    cases = dict(part.split(": ") for part in found.split(": ", 1)[1].split("; "))
    assert set(cases) == {"full rows", "a padded row"}
    assert all(kernel in kernels for kernel in cases.values()), found


@pytest.mark.slow  # the report's processor name: platform.processor() runs `uname -p`
def test_doctor_through_the_cli_on_cpu(tmp_path):
    """Through the CLI's entry function, as the console script runs it (``ablate_cli.ablate``)."""
    out = tmp_path / "doctor.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = ablate("doctor", "--steps", "3", "--no-compile", "--json", out, env=env)
    assert result.returncode == 0, result.stderr
    assert "attention (SDPA)" in result.stdout and "3-step micro run" in result.stdout
    report = json.loads(out.read_text())
    assert report["software"]["torch"] == torch.__version__
    cpu = report["devices"][0]
    assert cpu["device"] == "cpu"
    assert [c["name"] for c in cpu["checks"]] == ["attention (SDPA)", "3-step micro run"]
    assert all(c["ok"] for c in cpu["checks"]), cpu["checks"]
    assert "steps/s" in cpu["checks"][1]["detail"]
