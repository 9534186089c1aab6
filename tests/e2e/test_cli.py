"""The CLI's error policy, tested through the CLI's entry function as the console script calls
it (``ablate_cli.ablate``, in this process: its exit code and its stdout and stderr as a process
would give them): usage and input errors exit 2 with one line, failures while running exit 1
with one line, never a traceback unless asked for."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from ablate_cli import ablate as run_ablate
from ablate_cli import needs_ablate, one_line_error

from electra_ablate import __version__

pytestmark = needs_ablate


def ablate(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_ablate(*args, env={**os.environ, **(env or {})}, timeout=300)


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    one_line_error(result, code, *needles)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        ((), ("no command given", "ablate --help")),
        (("runn",), ("No such command 'runn'", "Did you mean 'run'")),
        (("export", "some/checkpoint"), ("--out",)),
        (("run", "studies/smoke.yaml", "--workers", "0"), ("--workers",)),
        (
            (
                "flops",
                "--model",
                "tiny",
                "--objective",
                "electra",
                "--steps",
                "1",
                "--batch",
                "1",
                "--seq",
                "abc",
            ),
            ("--seq",),
        ),
        (("export", "ckpt", "--out", "o", "--format", "onnx"), ("--format", "onnx")),
        (("run", "studies/smoke.yaml", "--device", "gpu"), ("--device", "gpu")),
        (("objectives", "--jsn"), ("--jsn", "--json")),
        (("data",), ("`ablate data` needs a command",)),
        (("run",), ("SPEC",)),
        (("run", "studies/nope.yaml"), ("spec file not found",)),
        (("run", "studies/smoke.yaml", "--set", "pretrain.learning_rat=1e-3"), ("did you mean",)),
        (("validate", "studies/smoke.yaml", "--set", "nonsense"), ("PATH=VALUE",)),
        (("finetune", "/nonexistent"), ("not a checkpoint",)),
        (("report", "/nonexistent"), ("no results",)),
        (
            (
                "flops",
                "--model",
                "tinyy",
                "--objective",
                "electra",
                "--steps",
                "1",
                "--batch",
                "1",
                "--seq",
                "8",
            ),
            ("did you mean 'tiny'",),
        ),
    ],
)
def test_usage_and_input_errors_exit_2_with_one_line(args, needles, tmp_path):
    result = ablate(*args, env={"ABLATE_DATA_DIR": str(tmp_path)})
    assert_one_line_error(result, 2, *needles)


def test_help_works_as_dash_h_and_version_prints_the_version():
    short, long = ablate("-h"), ablate("--help")
    assert short.returncode == long.returncode == 0
    assert short.stdout == long.stdout and "run" in short.stdout and "validate" in short.stdout
    sub = ablate("run", "-h")
    assert sub.returncode == 0 and "--dry-run" in sub.stdout and "--set" in sub.stdout
    version = ablate("--version")
    assert version.returncode == 0 and version.stdout.strip().endswith(__version__)


def test_a_corrupt_checkpoint_is_one_line_exit_2(tmp_path):
    (tmp_path / "kept.json").write_text("{not json")
    (tmp_path / "kept.safetensors").write_bytes(b"\x00" * 16)
    result = ablate("finetune", str(tmp_path), env={"ABLATE_DATA_DIR": str(tmp_path)})
    assert_one_line_error(result, 2, "corrupt checkpoint")


def test_an_unexpected_failure_is_one_line_exit_1_unless_debugging(tmp_path):
    """A bug (here: a report over a results file that is not parquet) must still be one line;
    ``--debug`` shows the traceback for whoever investigates it."""
    (tmp_path / "results.parquet").write_bytes(b"not parquet at all")
    result = ablate("report", str(tmp_path))
    assert result.returncode in (1, 2) and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_schema_is_the_spec_json_schema():
    result = ablate("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert {"name", "data", "budget", "objectives", "finetune", "variants"} <= set(
        schema["properties"]
    )
    assert "spec_dir" not in schema["properties"]
