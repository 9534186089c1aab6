"""What ``ablate run`` says must be what happens (issue 54): a re-run after Ctrl-C says from
which step it resumes; a run whose output is closed (``| head``) stops with the resumable line
and exit 141 instead of dying silently; a re-run with fewer tasks names the tasks that leave
``results.parquet``; a misspelt objective is named before what it breaks (``budget.steps_of``).

Through the CLI's entry function in this process (``ablate_cli.ablate``), on one objective of the
`micro` preset with a few steps and one capped task; the interrupted study is trained once and
shared. Its Ctrl-C is a SIGINT this process sends itself (Ctrl-C to a process, and its exit
status, is checked once, in ``test_faults.py``); the closed pipe needs a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from ablate_cli import ABLATE, E2E, ROOT, SMOKE, ablate, one_line_error

pytestmark = E2E

RESUMED_LINE = "stopped by {}"  # the start of the line Ctrl-C prints (cli.interrupted_line)


def tiny_spec(steps: int, tasks: list[str]) -> dict:
    """The smoke study cut to BERT's MLM alone (no baseline), ``steps`` steps, a state saved
    every 5, and ``tasks`` capped at 32 examples with one seed."""
    spec = yaml.safe_load(SMOKE.read_text())
    spec["name"] = "truthful"
    spec["objectives"] = [{"name": "bert_mlm"}]
    spec["budget"] = {"steps": steps, "checkpoints": [0.5, 1.0]}
    spec["pretrain"] = {
        "batch_size": 16,
        "learning_rate": 1.0e-3,
        "warmup_fraction": 0.1,
        "log_every": 5,
        "eval_batches": 1,
        "resume_every": 5,
    }
    spec["finetune"] = {
        "tasks": tasks,
        "seeds": [0],
        "caps": {"rte": 32, "stsb": 32},
        "eval_caps": {"rte": 32, "stsb": 32},
        "recipe": {"epochs": 1, "task_epochs": {}},
        "baseline": False,
    }
    return spec


def write_spec(path: Path, spec: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec))
    return path


def saved_steps(out: Path) -> list[int]:
    """The steps of the training states written whole (their manifest is written last)."""
    return sorted(
        json.loads((m.parent / "trainer.json").read_text())["step"]
        for m in out.glob("pretrain/*/states/step-*/manifest.json")
    )


def tasks_in_results(out: Path) -> set[str]:
    return set(pq.read_table(out / "results.parquet", columns=["task"])["task"].to_pylist())


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "Exception ignored" not in text, text


@dataclass
class Interrupted:
    spec: Path
    out: Path
    first_stdout: str  # what the run said before Ctrl-C
    resumed_from: int  # the newest state on disk when it was stopped
    resumed: subprocess.CompletedProcess  # the same command again


@contextlib.contextmanager
def ctrl_c_once(condition: Callable[[], object], timeout: float) -> Iterator[None]:
    """Ctrl-C, as a terminal sends it (SIGINT to this process), once ``condition`` holds, to the
    command run in this process meanwhile: its entry function turns SIGINT into its unwinding for
    the command's duration. Outside it a SIGINT is ignored here, so that one sent as the command
    ends cannot stop the test session."""
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    done = threading.Event()

    def watch() -> None:
        deadline = time.time() + timeout
        while not done.is_set() and time.time() < deadline:
            if condition():
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def interrupted(smoke_env, tmp_path_factory) -> Interrupted:
    """A tiny study stopped by Ctrl-C once a state is saved, then resumed to the end."""
    root = tmp_path_factory.mktemp("interrupted")
    spec = write_spec(root / "truthful.yaml", tiny_spec(40, ["rte", "stsb"]))
    out = root / "runs" / "truthful"
    with ctrl_c_once(lambda: saved_steps(out), 600):
        first = ablate("run", spec, "--out", out, "--no-progress", env=smoke_env)
    assert first.returncode == 130, (first.returncode, first.stdout, first.stderr)
    no_traceback(first.stderr)
    last = first.stderr.strip().splitlines()[-1]
    assert last.startswith(RESUMED_LINE.format("SIGINT")), first.stderr
    steps = saved_steps(out)
    assert steps and steps[-1] < 40, steps
    resumed = ablate("run", spec, "--out", out, "--no-progress", env=smoke_env)
    assert resumed.returncode == 0, resumed.stderr
    return Interrupted(spec, out, first.stdout, steps[-1], resumed)


# -------------------------------------------------------------------- resuming says so


def test_a_fresh_run_says_running(interrupted):
    assert "pre-train bert_mlm (seed 0, 40 steps): running\n" in interrupted.first_stdout


def test_a_rerun_after_ctrl_c_says_from_which_step_it_resumes(interrupted):
    said = interrupted.resumed.stdout
    step = interrupted.resumed_from
    assert f"pre-train bert_mlm (seed 0, 40 steps): resuming from step {step}\n" in said, said
    assert ": running" not in said, said


def test_a_rerun_of_a_finished_study_says_finished_earlier(interrupted, smoke_env, tmp_path):
    copy = tmp_path / "runs" / "truthful"
    shutil.copytree(interrupted.out, copy)
    again = ablate("run", interrupted.spec, "--out", copy, "--no-progress", env=smoke_env)
    assert again.returncode == 0, again.stderr
    assert "(seed 0, 40 steps): finished earlier" in again.stdout, again.stdout


# ---------------------------------------------------------------- tasks left out say so


def test_a_rerun_with_fewer_tasks_names_those_leaving_the_results(interrupted, smoke_env, tmp_path):
    copy = tmp_path / "runs" / "truthful"
    shutil.copytree(interrupted.out, copy)
    records = sorted(p.name for p in (copy / "finetune").glob("*.json"))
    assert tasks_in_results(copy) == {"rte", "stsb"}
    base = ("run", interrupted.spec, "--out", copy, "--no-progress")

    fewer = ablate(*base, "--set", "finetune.tasks=[rte]", env=smoke_env)
    assert fewer.returncode == 0, fewer.stderr
    notes = [line for line in fewer.stdout.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, fewer.stdout
    assert "results.parquet no longer lists stsb (not among this spec's tasks)" in notes[0]
    assert str(copy / "finetune") in notes[0], notes[0]
    assert tasks_in_results(copy) == {"rte"}
    # what the line says: the finished evaluations stay on disk ...
    assert sorted(p.name for p in (copy / "finetune").glob("*.json")) == records

    # ... and come back, not redone, when the spec lists the task again
    back = ablate(*base, env=smoke_env)
    assert back.returncode == 0, back.stderr
    assert "note: " not in back.stdout and "fine-tune" not in back.stdout, back.stdout
    assert tasks_in_results(copy) == {"rte", "stsb"}


# ------------------------------------------------------------------ a closed output pipe


def test_a_run_whose_output_is_closed_stops_with_the_resumable_line(smoke_env, tmp_path):
    spec = write_spec(tmp_path / "truthful.yaml", tiny_spec(10, ["rte"]))
    out = tmp_path / "runs" / "truthful"
    env = {k: v for k, v in smoke_env.items() if k != "PYTHONUNBUFFERED"}  # as a shell has it
    args = [ABLATE, "run", spec, "--out", out, "--no-progress"]
    # process: a pipe whose reader goes away (`| head -1`) and the exit status 141 the shell sees
    proc = subprocess.Popen(
        args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:  # `ablate run … | head -1`: the reader takes one line and goes
        first = proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read()
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert first == "pre-train bert_mlm (seed 0, 10 steps): running\n", first
    assert code == 141, (code, stderr)
    no_traceback(stderr)
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(RESUMED_LINE.format("SIGPIPE")), stderr
    assert "finished work is kept, and the same command resumes" in last, last
    # the pre-training finished before the next line had nowhere to go: it is kept
    (run,) = out.glob("pretrain/bert_mlm-s0-*")
    assert json.loads((run / "done.json").read_text())["status"] == "done"
    again = ablate("run", spec, "--out", out, "--no-progress", env=env)
    assert again.returncode == 0, again.stderr
    assert "(seed 0, 10 steps): finished earlier" in again.stdout, again.stdout
    assert tasks_in_results(out) == {"rte"}


# ------------------------------------------------------------- the cause named first

MISSPELT = """
name: t
data:
  corpus: {paths: ["corpus/*.txt"]}
  glue: glue
backbone: {preset: micro}
budget: {steps: 10, steps_of: electra}
objectives:
  - {name: bert_mlm}
  - {name: electar}
finetune: {tasks: [rte]}
"""


@pytest.mark.parametrize("command", [["validate", "--no-data-check"], ["run", "--dry-run"]])
def test_a_misspelt_objective_is_named_before_the_budget_it_breaks(tmp_path, command):
    path = tmp_path / "spec.yaml"
    path.write_text(MISSPELT)
    result = ablate(command[0], path, *command[1:])
    line = one_line_error(result, 2, "budget.steps_of")
    unknown = "objectives[1].name: unknown objective 'electar' (did you mean 'electra'?)"
    assert unknown in line, line
    assert line.index(unknown) < line.index("budget.steps_of"), line
    assert "(the labels: bert_mlm, electar)" in line, line


def test_a_misspelt_steps_of_is_still_named_with_the_labels(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(MISSPELT.replace("electar", "electra").replace("of: electra", "of: electar"))
    result = ablate("validate", path, "--no-data-check")
    line = one_line_error(result, 2)
    assert line.endswith(
        "budget.steps_of 'electar' is not an objective label (the labels: bert_mlm, electra)"
    ), line
