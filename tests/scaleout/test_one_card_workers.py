"""``ablate run --workers 2`` with ``schedule: {shape: one_card}`` forced on the CPU (the GPU
session's order, rehearsed) on a micro study and the smoke data, read back from the study's
``schedule.jsonl``: the next pre-training starts (compiles) while one trains, but their
training through the device gate never overlaps; evaluations after the last, the longest first;
the same log written by one process without workers; nothing logged for finished work; the log
carried by a pack and kept once per line by a merge."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml
from ablate_cli import E2E, SMOKE, ablate

from electra_ablate.evaluation.task import get_task
from electra_ablate.infra.device_gate import DeviceGate
from electra_ablate.infra.layout import StudyLayout
from electra_ablate.spec import parse_spec, recorded_spec, task_settings
from electra_ablate.study.execute import GATE_KEYS

pytestmark = E2E

KEYS = {
    "event",
    "t",
    "pid",
    "kind",
    "label",
    "seed",
    "run_id",
    "job_id",
    "task",
    "fraction",
    "finetune_seed",
}


def micro_spec(folder: Path, objectives: list[str], schedule: dict | None = None) -> Path:
    """The smoke spec (its data, so the session's prepared cache serves it) cut down: fewer
    objectives, steps and checkpoints (the final one), RTE and STS-B capped unequally so that
    their costs differ."""
    raw = yaml.safe_load(SMOKE.read_text())
    raw["objectives"] = [{"name": name} for name in objectives]
    raw["budget"] |= {"steps": 20, "steps_of": objectives[-1], "checkpoints": [1.0]}
    raw["finetune"] |= {"caps": {"rte": 32, "stsb": 64}, "eval_caps": {"rte": 32, "stsb": 32}}
    if schedule is not None:
        raw["schedule"] = schedule
    path = folder / f"{'-'.join(objectives)}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def events(study: Path) -> list[dict]:
    return [json.loads(line) for line in (study / "schedule.jsonl").read_text().splitlines()]


def intervals(log: list[dict], kind: str | None = None) -> dict[str, tuple[dict, dict]]:
    """Each item's start and end, by run id (a pre-training) or job id (an evaluation)."""
    starts, ends = {}, {}
    for event in log:
        if kind is not None and (event["kind"] == "pretrain") != (kind == "pretrain"):
            continue
        key = event["job_id"] or event["run_id"]
        (starts if event["event"] == "start" else ends)[key] = event
    assert starts.keys() == ends.keys(), "every item that started ended"
    return {key: (starts[key], ends[key]) for key in starts}


def started_runs(study: Path) -> int:
    path = study / "schedule.jsonl"
    log = events(study) if path.exists() else []
    return sum(e["event"] == "start" and e["kind"] == "pretrain" for e in log)


@pytest.fixture(scope="module")
def one_card(smoke_env, tmp_path_factory) -> Path:
    """The study, run while the test holds its device gate (as if a run trained on the card)
    until both pre-trainings have started: each compiles its first step, then waits."""
    folder = tmp_path_factory.mktemp("one_card")
    spec = micro_spec(folder, ["bert_mlm", "electra"], {"shape": "one_card"})
    out = folder / "study"
    gate = DeviceGate(StudyLayout(out).device_gate)
    gate.take()
    args = ("run", spec, "--out", out, "--workers", "2", "--no-progress", "--no-reuse")
    ran: list = []
    thread = threading.Thread(target=lambda: ran.append(ablate(*args, env=smoke_env)))
    thread.start()
    try:
        waited = time.monotonic()
        while started_runs(out) < 2 and thread.is_alive() and time.monotonic() - waited < 900:
            time.sleep(0.2)
        both_started = started_runs(out) == 2
    finally:
        gate.release()
    thread.join()
    (result,) = ran
    assert result.returncode == 0, result.stderr
    assert both_started, "the second pre-training did not start while the card was busy"
    assert "schedule one_card: one pre-training at a time" in result.stdout, result.stdout
    assert "worker process died" not in result.stdout + result.stderr, result.stderr
    return out


def test_one_card_trains_one_run_at_a_time_then_the_costliest_evaluation_first(one_card):
    log = events(one_card)
    assert all(event.keys() >= KEYS for event in log)
    runs = sorted(intervals(log, "pretrain").values(), key=lambda se: se[1]["trained_from"])
    assert len(runs) == 2
    first, second = runs
    # both processes held a pre-training at once (the fixture saw both start) ...
    assert max(start["t"] for start, _ in runs) < min(end["t"] for _, end in runs)
    # ... but their training through the gate never overlapped
    for start, end in runs:
        assert start["t"] <= end["trained_from"] <= end["trained_until"] <= end["t"]
        assert end["gate_wait_s"] >= 0
    assert second[1]["trained_from"] >= first[1]["trained_until"]
    evaluations = intervals(log, "evaluate")
    assert len(evaluations) == 6  # 2 runs x 1 checkpoint x 2 tasks + the baseline's 2
    assert min(start["t"] for start, _ in evaluations.values()) >= max(e["t"] for _, e in runs)
    # the first evaluation to start is one of the costliest, by the tasks' own estimate
    spec = parse_spec(recorded_spec(json.loads((one_card / "study.json").read_text())["spec"]))
    (block,) = spec.evaluation_blocks()
    cost = {t: get_task(t).relative_cost(task_settings(spec, block, t)) for t in block.tasks}
    assert cost["stsb"] > cost["rte"]
    first_evaluation = min((s for s, _ in evaluations.values()), key=lambda s: s["t"])
    assert cost[first_evaluation["task"]] == max(cost.values())
    assert {e["kind"] for s, e in evaluations.values()} == {"finetune"}
    assert all(e["status"] == "done" and e["pid"] == s["pid"] for s, e in evaluations.values())


def test_a_pre_trainings_end_carries_its_first_steps_seconds_as_done_json_does(one_card):
    for start, end in intervals(events(one_card), "pretrain").values():
        (done_json,) = one_card.glob(f"pretrain/*-{end['run_id']}/done.json")
        done = json.loads(done_json.read_text())
        assert end["status"] == "done" and end["steps"] == done["steps"] > 0
        assert end["compile_s"] == done["first_step_s"] > 0
        assert start["t"] <= done["started_at"] <= end["t"]
        assert {k: end[k] for k in GATE_KEYS} == {k: done[k] for k in GATE_KEYS}


def test_finished_work_logs_nothing_and_the_log_travels_in_a_pack_and_a_merge(
    one_card, smoke_env, tmp_path
):
    before = (one_card / "schedule.jsonl").read_bytes()
    spec = next(one_card.parent.glob("*.yaml"))
    again = ablate("run", spec, "--out", one_card, "--workers", "2", "--no-progress", env=smoke_env)
    assert again.returncode == 0 and "units of work" not in again.stdout, again.stderr
    assert (one_card / "schedule.jsonl").read_bytes() == before
    pack = tmp_path / "one_card.pack.tar.gz"
    assert ablate("pack", one_card, "--out", pack).returncode == 0
    into = tmp_path / "merged"
    merged = ablate("merge", pack, one_card, "--into", into, env=smoke_env)  # one study, twice
    assert merged.returncode == 0, merged.stderr
    assert (into / "schedule.jsonl").read_bytes() == before  # each line once


def test_one_process_logs_its_work_the_same_way(smoke_env, tmp_path):
    spec = micro_spec(tmp_path, ["electra"])
    out = tmp_path / "single"
    result = ablate("run", spec, "--out", out, "--no-progress", "--no-reuse", env=smoke_env)
    assert result.returncode == 0, result.stderr
    log = events(out)
    assert len({event["pid"] for event in log}) == 1
    assert [(e["event"], e["kind"]) for e in log[:2]] == [
        ("start", "pretrain"),
        ("end", "pretrain"),
    ]
    assert log[1]["compile_s"] > 0 and log[1]["steps"] == 20
    assert not set(GATE_KEYS) & log[1].keys()  # one process: no gate, nothing said of one
    assert len(intervals(log, "evaluate")) == 4  # 1 checkpoint x 2 tasks + the baseline's 2
