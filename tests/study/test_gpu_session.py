"""The GPU session's choice and record (electra_ablate.scaleout.node.session): which rung of
the FLOPs ladder and which fine-tuning seeds the replay (electra_ablate.scaleout.replay)
chooses, and what session.json says. .ci/rehearse.sh runs whole sessions on the CPU, with a
SIGTERM and a SIGKILL among them; these are the decisions, checked fast."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from electra_ablate.scaleout import replay

REPO = Path(__file__).resolve().parents[2]
SESSION_PY = REPO / "electra_ablate" / "scaleout" / "node" / "session.py"


def load_session() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_session", SESSION_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


session_py = load_session()


def a_session(tmp_path: Path, seconds: float, ladder=(1e15, 3e15, 1e16), **args: object) -> object:
    args = argparse.Namespace(**{
        "out": str(tmp_path), "started": time.time(), "seconds": seconds, "device": "cuda",
        "workers": 4, "ladder": list(ladder), "work": str(tmp_path), "compile": "spec",
        "reuse": [], "settings": [], "phases": ["doctor", "tests", "bench", "plan", "study"],
        **args,
    })  # fmt: skip
    return session_py.Session(args)


def left_for_study(session) -> float:
    return session.left() - session_py.PACK_RESERVE_S


def test_the_study_gets_the_largest_rung_then_the_most_seeds_the_replay_ends_in_time(tmp_path):
    """The session asks the replay (electra_ablate.scaleout.replay) and nothing else: the choice
    ends inside the time left with the margin, and one more seed or the next rung would not."""
    session = a_session(tmp_path, seconds=session_py.PACK_RESERVE_S + 420, workers=12)
    choice = session_py.choose_rung(session)
    assert choice is not None and choice.fits, choice.why
    limit = left_for_study(session) / replay.MARGIN
    assert choice.replay.end_s <= limit
    assert choice.rung in session.args.ladder and choice.seeds[0] == 0
    bigger = [(r, n) for r in session.args.ladder for n in (1, 2, 3)
              if (r, n) > (choice.rung, len(choice.seeds))]  # fmt: skip
    assert bigger, "a deadline where nothing larger is on offer checks nothing"
    shape = session_py.named_schedule(session)
    for rung, seeds in bigger:
        again = replay.plan(rung, range(seeds), 12, limit, shape.shape, shape.beside)
        assert again.end_s > limit, (rung, seeds)


def test_seeds_the_session_names_are_the_studys_and_only_the_rung_is_chosen(tmp_path):
    session = a_session(tmp_path, 1000, workers=12, settings=["finetune.seeds=[0,1]"])
    choice = session_py.choose_rung(session)
    assert choice is not None and choice.seeds == (0, 1)
    tasks = {(s.item.label, s.item.seed) for s in choice.replay.slots if s.item.task == "sst2"}
    assert ("electra_small", 1) in tasks and ("electra_small", 2) not in tasks


def test_named_seeds_read_as_ablate_run_reads_them_the_last_one_winning():
    assert session_py.named_seeds([]) is None
    assert session_py.named_seeds(["pretrain.compile=false"]) is None
    assert session_py.named_seeds(["finetune.seeds=[0,1,2]"]) == [0, 1, 2]
    assert session_py.named_seeds(["finetune.seeds=[0]", "finetune.seeds=[3, 4]"]) == [3, 4]
    assert session_py.named_seeds(["finetune.seeds=oops"]) is None


def test_the_schedule_the_session_sets_is_the_one_replayed(tmp_path):
    one_card = session_py.named_schedule(a_session(tmp_path, 500, workers=12))
    assert (one_card.shape, one_card.beside) == ("one_card", 0)  # auto: 12 workers, one card
    settings = ["schedule.shape=pool"]
    pool = session_py.named_schedule(a_session(tmp_path, 500, workers=12, settings=settings))
    assert pool.shape == "pool"
    settings = ["schedule.shape=one_card", "schedule.beside=2"]
    beside = session_py.named_schedule(a_session(tmp_path, 500, workers=12, settings=settings))
    assert (beside.shape, beside.beside) == ("one_card", 2)


def test_records_beside_the_study_spare_it_their_jobs(tmp_path):
    """What --reuse copies (and earlier studies on the machine hold) is read back by id, so the
    replay plans without it: here the baseline's SST-2 at seed 0."""
    session = a_session(tmp_path, 1000, workers=12, settings=["finetune.seeds=[0]"])
    key = "no pre-training sst2 at 0 seed 0"

    def planned() -> set[str]:
        choice = session_py.choose_rung(session)
        assert choice is not None
        return {s.item.key for s in choice.replay.slots}

    assert key in planned()
    folder = tmp_path / "reused-gpu_session-3e15" / "finetune"
    folder.mkdir(parents=True)
    record = {"status": "done", "task": "sst2", "seed": 0, "fraction": 0.0}
    (folder / "955697877d7d.json").write_text(json.dumps(record))
    assert key not in planned()


def test_the_record_keeps_the_replayed_plan_and_the_cards_shares(tmp_path):
    session = a_session(tmp_path, session_py.PACK_RESERVE_S + 420, workers=12)
    choice = session_py.choose_rung(session)
    kept = json.loads(json.dumps(session_py.replayed_record(session, choice)))  # JSON as saved
    jobs = kept["replayed"]["jobs"]
    assert len(jobs) == len(choice.replay.slots)
    assert {"kind", "label", "task", "seed", "start_s", "end_s"} <= set(jobs[0])
    assert {j["kind"] for j in jobs} == {"pretrain", "finetune", "probe"}
    assert all(0 <= j["start_s"] <= j["end_s"] for j in jobs)
    assert kept["replayed"]["seeds"] == list(choice.seeds)
    assert set(kept["card_load"]) == {"pretrain", "finetune", "probe"}


def test_the_study_command_gets_the_chosen_rung_and_seeds_and_the_record_its_plan(
    tmp_path, monkeypatch
):
    """The study phase, its ``ablate run`` caught: the replay's rung and seeds are in the
    command (seeds only where the session's --set names none) and its plan is in the record."""
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "kit.json").write_text(json.dumps({"study": "gpu_session"}))
    commands = []
    monkeypatch.setattr(
        session_py.Session, "run", lambda self, n, c, *a: commands.append(c) or "finished"
    )
    for name in ("refresh_jobs", "record_pack", "return_kept"):
        monkeypatch.setattr(session_py, name, lambda *a, **k: None)
    monkeypatch.setattr(session_py, "pack", lambda *a, **k: None)
    monkeypatch.setattr(session_py, "reuse_kept", lambda *a, **k: [])
    for settings, seeds in (([], None), (["finetune.seeds=[0,1]"], [0, 1])):
        commands.clear()
        out = tmp_path / f"out-{len(settings)}"
        out.mkdir()
        session = a_session(
            out, session_py.PACK_RESERVE_S + 800, workers=12, kit=str(kit), pack_every=1e6,
            work=str(tmp_path / "work"), settings=settings,
        )  # fmt: skip
        session_py.study(session)
        record = json.loads((out / "session.json").read_text())["phases"]["study"]
        (command,) = commands
        sets = [command[i + 1] for i, a in enumerate(command) if a == "--set"]
        chosen = record["replayed"]["seeds"]
        assert f"budget.flops={record['budget_flops']:.1e}" in sets
        assert [s for s in sets if s.startswith("finetune.seeds=")] == [
            "finetune.seeds=" + json.dumps(seeds or chosen, separators=(",", ":"))
        ]
        assert chosen == (seeds or chosen) and record["replayed"]["jobs"]
        assert record["status"] == "finished" and "largest rung" in record["chosen"]


def test_a_study_off_the_card_the_replay_knows_runs_the_first_rung(tmp_path):
    session = a_session(tmp_path, 500, device="cpu")
    assert session_py.choose_rung(session) is None
    assert session_py.replayed_record(session, None) == {"replayed": None}


def test_the_record_is_rewritten_whole_at_every_change(tmp_path):
    session = a_session(tmp_path, 500)
    session.phase("doctor", status="running")
    session.phase("doctor", status="finished", seconds=3.0)
    record = json.loads((tmp_path / "session.json").read_text())
    assert record["phases"]["doctor"] == {"status": "finished", "seconds": 3.0}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_phase_with_too_little_time_left_is_skipped_with_the_reason(tmp_path):
    session = a_session(tmp_path, seconds=session_py.PACK_RESERVE_S + 1)
    assert not session_py.bounded_phase(session, "doctor", ["true"])
    phase = json.loads((tmp_path / "session.json").read_text())["phases"]["doctor"]
    assert phase["status"] == "skipped" and "left of the session" in phase["why"]


@pytest.mark.slow  # process: a phase's process stopped at its limit
def test_a_phase_past_its_limit_is_stopped_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(session_py.CAPS, "doctor", 1.0)
    monkeypatch.setattr(session_py, "MIN_PHASE_S", 0.5)
    session = a_session(tmp_path, seconds=session_py.PACK_RESERVE_S + 60)
    assert not session_py.bounded_phase(session, "doctor", ["sleep", "30"])
    phase = json.loads((tmp_path / "session.json").read_text())["phases"]["doctor"]
    assert phase["status"] == "stopped" and "limit" in phase["why"]
    assert phase["seconds"] < 25  # ended by its limit and SIGTERM, not by sleeping out


def test_diagnostics_alone_keep_no_time_for_a_pack(tmp_path):
    with_study = a_session(tmp_path, 500)
    alone = a_session(tmp_path, 500, phases=["tests", "bench", "finetune"])
    assert session_py.reserve(with_study) == session_py.PACK_RESERVE_S
    assert session_py.reserve(alone) < session_py.MIN_PHASE_S


def test_the_fastest_mode_measured_is_chosen_only_after_the_cuda_tests_passed(tmp_path):
    rates = {"ours": 16.0, "ours_compiled": 23.0, "ours_cuda_graphs": 90.0, "peer": 200.0}
    session = a_session(tmp_path, 500)
    assert session_py.fastest(rates, session_py.PRETRAIN_MODES, session) is None  # no tests
    session.phase("tests", status="failed (exit 1)")
    assert session_py.fastest(rates, session_py.PRETRAIN_MODES, session) is None
    session.phase("tests", status="finished")
    assert session_py.fastest(rates, session_py.PRETRAIN_MODES, session) == "reduce-overhead"
    slower_graphs = rates | {"ours_cuda_graphs": 10.0}  # the peer is not one of ours
    assert session_py.fastest(slower_graphs, session_py.PRETRAIN_MODES, session) is True
    fine = {"dynamic": 900.0, "compiled": 800.0, "cuda_graphs": 700.0}
    assert session_py.fastest(fine, session_py.FINETUNE_MODES, session) is False


def test_a_later_command_on_the_machine_applies_what_was_measured(tmp_path):
    first = a_session(tmp_path, 500)
    session_py.remember(first, "pretrain.compile", "reduce-overhead")
    session_py.remember(first, "finetune.recipe.compile", False)
    session_py.remember(first, "ignored", None)
    assert json.loads((tmp_path / "session.json").read_text())["measured"] == {
        "pretrain.compile": "reduce-overhead",
        "finetune.recipe.compile": False,
    }
    later = a_session(tmp_path, 500, compile="measured")
    assert session_py.study_settings(later) == [
        "finetune.recipe.compile=false",
        'pretrain.compile="reduce-overhead"',
    ]
    assert session_py.study_settings(a_session(tmp_path, 500)) == []  # --compile spec
    seeds = a_session(tmp_path, 500, compile="measured", settings=["finetune.seeds=[0,1,2]"])
    assert session_py.study_settings(seeds)[-1] == "finetune.seeds=[0,1,2]"  # the session's last
    elsewhere = a_session(tmp_path / "fresh", 500, compile="measured", work=str(tmp_path / "w"))
    assert session_py.study_settings(elsewhere) == []  # nothing measured on this machine


def test_reused_records_land_beside_the_study_folder(tmp_path):
    earlier = tmp_path / "carried" / "gpu_session-3e15" / "finetune"
    earlier.mkdir(parents=True)
    (earlier / "0a29ce069561.json").write_text('{"status": "done"}')
    work = tmp_path / "work"
    session = a_session(tmp_path, 500, work=str(work), reuse=[str(tmp_path / "carried")])
    assert session_py.reuse_records(session) == ["gpu_session-3e15"]
    copied = work / "reused-gpu_session-3e15" / "finetune" / "0a29ce069561.json"
    assert json.loads(copied.read_text()) == {"status": "done"}


@pytest.mark.slow  # process: a bench process stopped at its limit
def test_a_fine_tuning_bench_stopped_at_its_limit_keeps_the_modes_it_finished(
    tmp_path, monkeypatch
):
    """The bench writes each mode's report as it finishes one; the phase, stopped at its cap,
    records those modes and chooses among them (the second H200 stretch lost all of them)."""
    bench = tmp_path / "kit" / "bench"
    bench.mkdir(parents=True)
    stand_in(monkeypatch, bench)
    (bench / "finetune_throughput.py").write_text(
        "import json, sys, time\n"
        "out = sys.argv[sys.argv.index('--json-out') + 1]\n"
        "json.dump({'modes': ['dynamic'], 'dynamic_examples_per_s': 900.0,\n"
        "           'ratio': {'dynamic': 1.0}, 'compile_seconds': {},\n"
        "           'profiles': {'dynamic': {'steps': 5, 'host_ms': 21.0, 'launches': 900.0}}},\n"
        "          open(out, 'w'))\n"
        "time.sleep(30)  # compiling the next mode, past the phase's cap\n"
    )
    monkeypatch.setitem(session_py.CAPS, "finetune", 2.0)
    monkeypatch.setattr(session_py, "MIN_PHASE_S", 0.5)
    session = a_session(
        tmp_path, 500, phases=["tests", "finetune"], kit=str(tmp_path / "kit"),
        device="cpu", finetune_args="",
    )  # fmt: skip
    session.phase("tests", status="finished")
    session_py.finetune(session)
    phase = json.loads((tmp_path / "session.json").read_text())["phases"]["finetune"]
    assert phase["status"] == "stopped" and phase["examples_per_s"] == {"dynamic": 900.0}
    assert phase["measured_modes"] == ["dynamic"]
    assert phase["profile"] == {"dynamic": {"host_ms": 21.0, "launches": 900.0}}
    assert json.loads((tmp_path / "measured.json").read_text()) == {
        "finetune.recipe.compile": False,
        "finetune.recipe.padding": "dynamic",
    }


def stand_in(monkeypatch, bench: Path) -> None:
    """The session runs ``bench/<name>.py`` under ``bench`` instead of the installed module."""
    monkeypatch.setattr(
        session_py, "bench_command", lambda name: [sys.executable, str(bench / f"{name}.py")]
    )


def a_fine_tuning_bench(kit: Path, fastest: str) -> None:
    """A stand-in for bench/finetune_throughput.py whose ``fastest`` mode wins; its CUDA-graph
    mode pads to buckets, as the real bench's does."""
    bench = kit / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    rates = {"dynamic": 900.0, "compiled": 950.0, "cuda_graphs": 1000.0} | {fastest: 2000.0}
    report = {
        "modes": list(rates), **{f"{m}_examples_per_s": r for m, r in rates.items()},
        "padding": {"dynamic": "dynamic", "compiled": "dynamic", "cuda_graphs": "buckets"},
        "length_buckets": [32, 64, 128],
    }  # fmt: skip
    (bench / "finetune_throughput.py").write_text(
        "import json, sys\n"
        f"json.dump({report!r}, open(sys.argv[sys.argv.index('--json-out') + 1], 'w'))\n"
    )


@pytest.mark.slow  # process: the bench runs as a process
def test_measured_cuda_graphs_bring_the_buckets_they_were_timed_with(tmp_path, monkeypatch):
    """Graphs on dynamic padding would record a graph per batch length: ``--compile measured``
    applies the padding the fastest mode was timed with, and forgets a bucket list once a later
    measurement prefers dynamic padding (a bucket list beside it would be refused)."""
    kit = tmp_path / "kit"
    stand_in(monkeypatch, kit / "bench")

    def measure(fastest: str) -> dict:
        a_fine_tuning_bench(kit, fastest)
        session = a_session(
            tmp_path, 500, phases=["tests", "finetune"], kit=str(kit), device="cpu",
            finetune_args="",
        )  # fmt: skip
        session.phase("tests", status="finished")
        session_py.finetune(session)
        return json.loads((tmp_path / "measured.json").read_text())

    assert measure("cuda_graphs") == {
        "finetune.recipe.compile": "reduce-overhead",
        "finetune.recipe.padding": "buckets",
        "finetune.recipe.length_buckets": [32, 64, 128],
    }
    assert measure("dynamic") == {
        "finetune.recipe.compile": False,
        "finetune.recipe.padding": "dynamic",
    }


# ------------------------------------------------ where the time went, what came back (issue 67)


def event(kind: str, what: str, t: float, **facts: object) -> str:
    """One ``schedule.jsonl`` line as ``electra_ablate.study.execute`` writes it."""
    line = {"event": what, "t": t, "pid": 11, "kind": kind, "label": "bert", "seed": 0,
            "run_id": "0123456789ab", "job_id": None, "task": None, "fraction": None,
            "finetune_seed": None, **facts}  # fmt: skip
    return json.dumps(line) + "\n"


def a_study_folder(study: Path, started: float) -> None:
    """A study cut by its deadline: bert pre-trained (compiling 4.2 s), its rte fine-tune done,
    its probe cut; a record copied from a study beside; the plan names 4 evaluations of bert and
    a second run never started; the last line of the log torn by the kill."""
    study.mkdir(parents=True)
    units = [
        {"kind": "run", "label": "bert", "seed": 0, "run_id": "0123456789ab", "jobs": 4},
        {"kind": "run", "label": "electra", "seed": 0, "run_id": "ba9876543210", "jobs": 2},
    ]
    (study / "plan.json").write_text(json.dumps({"name": "s", "units": units}))
    job = {"task": "rte", "fraction": 1.0, "finetune_seed": 0}
    probe = {"task": "rte_probe", "fraction": 0.5, "finetune_seed": 0, "job_id": "b2"}
    (study / "schedule.jsonl").write_text(
        event("pretrain", "start", started + 10)
        + event("pretrain", "end", started + 40, status="done", compile_s=4.2, steps=22)
        + event("finetune", "start", started + 41, job_id="a1", **job)
        + event("probe", "start", started + 42, **probe)
        + event("finetune", "end", started + 50, job_id="a1", status="done", **job)
        + '{"event": "end", "t": '  # torn
    )
    (study / "finetune").mkdir()
    for job_id, task in (("a1", "rte"), ("c3", "sst2")):
        record = {"job_id": job_id, "run_id": "0123456789ab", "task": task, "seed": 0,
                  "fraction": 1.0, "status": "done"}  # fmt: skip
        (study / "finetune" / f"{job_id}.json").write_text(json.dumps(record))


def test_the_jobs_record_says_where_the_time_went(tmp_path):
    started = time.time()
    a_study_folder(tmp_path / "study", started)
    jobs, unread = session_py.study_jobs(tmp_path / "study", started, final=True)
    assert unread == 1  # the torn last line, passed over
    assert all(set(session_py.JOB_FIELDS) <= set(job) for job in jobs)
    by = {(j["kind"], j["task"], j["status"]): j for j in jobs}
    pretrain = by["pretrain", None, "done"]
    assert (pretrain["start_s"], pretrain["end_s"], pretrain["compile_s"]) == (10.0, 40.0, 4.2)
    assert by["finetune", "rte", "done"]["end_s"] == 50.0
    cut = by["probe", "rte_probe", "cut"]
    assert (cut["start_s"], cut["end_s"], cut["finetune_seed"]) == (42.0, None, 0)
    assert by["evaluation", "sst2", "done"]["earlier"] is True  # copied: no event
    # bert: 4 planned, 2 recorded, 1 cut; electra: never started
    waiting = {(j["label"], j["kind"]): j for j in jobs if j["status"] == "not started"}
    assert waiting["bert", "evaluation"]["count"] == 1
    assert waiting["electra", "evaluation"]["count"] == 2
    assert set(waiting) == {
        ("bert", "evaluation"),
        ("electra", "pretrain"),
        ("electra", "evaluation"),
    }
    running, _ = session_py.study_jobs(tmp_path / "study", started, final=False)
    assert [j["status"] for j in running if j["kind"] == "probe"] == ["running"]


def finished_run(study: Path, fractions=(0.5, 1.0)) -> Path:
    """bert's run folder finished, with a kept folder per fraction (checksummed)."""
    from electra_ablate.infra.layout import RunLayout
    from electra_ablate.infra.manifest import write_manifest

    run = study / "pretrain" / "bert-s0-0123456789ab"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "done.json").write_text('{"status": "done"}')
    for fraction in fractions:
        kept = RunLayout(run).kept(fraction)
        kept.mkdir(parents=True)
        (kept / "kept.json").write_text(json.dumps({"run_id": "0123456789ab", "role": "mlm"}))
        (kept / "kept.safetensors").write_bytes(bytes(range(256)) * 40)
        write_manifest(kept)
    return run


def a_cut_session(tmp_path: Path, free: int):
    """A session whose study (rung 1e15) was cut as ``a_study_folder`` says, with ``free`` of
    OUT's files left (session.json and session.log among those taken)."""
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    session = a_session(out, 500, work=str(work))
    session.say("the study is cut")
    session.save()
    for i in range(session_py.OUT_FILES - free - 2):
        (out / f"file-{i}").write_text("x")
    session.rung = 1e15
    a_study_folder(session_py.study_folder(session), session.args.started)
    run = finished_run(session_py.study_folder(session))
    session.phase("study", status="stopped")
    session_py.refresh_jobs(session, final=True)
    return session, run


def test_a_cut_run_s_kept_encoders_go_back_in_the_files_left(tmp_path):
    session, run = a_cut_session(tmp_path, free=1)
    session_py.return_kept(session, "s")
    kept = json.loads((session.out / "session.json").read_text())["phases"]["study"]["kept"]
    assert kept["cut_units"] == {run.name: 2}  # 4 planned, 2 recorded
    assert kept["units"] == {run.name: ["1", "0.5"]}  # the final first; both fit
    assert [p["file"] for p in kept["parts"]] == ["s-1e15.kept.part1of1"]
    assert (session.out / "s-1e15.kept.part1of1").is_file() and not kept["left_out"]
    assert session_py.files_in(session.out) == session_py.OUT_FILES
    assert session.unwritten == []


def test_with_no_file_left_the_record_says_what_did_not_go_back(tmp_path):
    session, run = a_cut_session(tmp_path, free=0)
    session_py.return_kept(session, "s")
    kept = json.loads((session.out / "session.json").read_text())["phases"]["study"]["kept"]
    assert kept["units"] == {} and kept["parts"] == []
    assert {(e["run"], e["fraction"]) for e in kept["left_out"]} == {
        (run.name, "1"),
        (run.name, "0.5"),
    }
    assert all("no file is left" in e["why"] for e in kept["left_out"])
    assert session_py.files_in(session.out) == session_py.OUT_FILES
    assert session.unwritten == []  # a choice the record explains, not a failed write


def test_a_pack_that_cannot_be_written_fails_the_session_and_is_never_named(tmp_path, monkeypatch):
    """The third H200 stretch: OUT full, the pack never written, yet 'finished'. Now the
    failing command's own line is the record's, ``pack`` names no file that is not there,
    and the status (hence the exit) says failed."""
    session = a_session(tmp_path, 500, phases=["study"], kit=str(tmp_path))
    session.rung = 1e15
    pack_path = tmp_path / "s-1e15.pack.tar.gz"
    line = f"error: cannot write {pack_path}: No space left on device: free space there"

    def refused(command, **kwargs):
        failing = "pack" in command
        return subprocess.CompletedProcess(command, 1 if failing else 0, None, line + "\n")

    monkeypatch.setattr(session_py.subprocess, "run", refused)
    error = session_py.pack(session, [], pack_path)
    assert error == f"ablate pack failed (exit 1): {line}"
    session.phase("study", status="finished")
    session_py.record_pack(session, pack_path, error)
    session.unwritten.append(f"the pack ({error})")
    study = json.loads((tmp_path / "session.json").read_text())["phases"]["study"]
    assert study["packed"] is False and study["pack_error"] == error and "pack" not in study
    status = session_py.final_status(session)
    assert status.startswith("failed: not written: the pack") and "No space left" in status

    pack_path.write_text("an earlier pack")  # an earlier pack stands: named, with the failure
    session_py.record_pack(session, pack_path, error)
    study = json.loads((tmp_path / "session.json").read_text())["phases"]["study"]
    assert study["pack"] == pack_path.name and study["packed"] is False


def test_a_record_out_refuses_fails_the_session_without_a_traceback(tmp_path, capsys):
    session = a_session(tmp_path, 500, phases=["doctor"])
    (tmp_path / ".session.json.tmp").mkdir()  # the record's temporary cannot be written
    session.phase("doctor", status="finished")
    assert session.unwritten and "session.json" in session.unwritten[0]
    assert "error: session.json" in capsys.readouterr().out
    assert session_py.final_status(session).startswith("failed: not written: session.json")


def a_cache_archive(tmp_path: Path) -> Path:
    """A compile-cache archive as a session saves it (a cache with its manifest)."""
    from electra_ablate.infra import compile_cache

    here = {"torch": "2.13", "triton": None, "cuda": None, "python": "3.12", "card": "cpu"}
    compile_cache.open_cache(tmp_path / "filled", here)
    (tmp_path / "filled" / "inductor").mkdir()
    (tmp_path / "filled" / "inductor" / "graph.py").write_text("# compiled\n")
    archive = tmp_path / "compile-cache.tar.xz"
    assert compile_cache.pack_cache(tmp_path / "filled", archive).ok
    return archive


@pytest.mark.parametrize("carried", ["none", "matching", "altered"])
def test_the_kit_s_compile_cache_is_checked_then_unpacked(tmp_path, monkeypatch, carried):
    from electra_ablate.infra import compile_cache

    monkeypatch.delenv(compile_cache.ENV, raising=False)
    kit = tmp_path / "kit"
    kit.mkdir()
    manifest: dict = {"study": "s"}
    if carried != "none":
        archive = kit / compile_cache.ARCHIVE
        archive.write_bytes(a_cache_archive(tmp_path).read_bytes())
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        manifest["compile_cache"] = {"sha256": digest, "bytes": archive.stat().st_size}
        if carried == "altered":
            archive.write_bytes(archive.read_bytes() + b"\0")
    (kit / "kit.json").write_text(json.dumps(manifest))
    work = tmp_path / "work"
    session = a_session(tmp_path / "out", 500, kit=str(kit), work=str(work))
    (tmp_path / "out").mkdir()
    session_py.carry_cache(session)
    record = json.loads((tmp_path / "out" / "session.json").read_text())["compile_cache"]
    assert os.environ[compile_cache.ENV] == str(work / "compile-cache")  # set in every case
    unpacked = (work / "compile-cache" / "inductor" / "graph.py").is_file()
    if carried == "none":
        assert record["carried"] is None and record["unpacked"].startswith("no: the kit carries")
    elif carried == "matching":
        assert unpacked and record["unpacked"].startswith("yes")
    else:
        assert not unpacked and "does not match the sha256" in record["unpacked"]


@pytest.mark.slow  # process: the cache packed in a process
def test_the_compile_cache_is_saved_only_in_a_file_left(tmp_path, monkeypatch):
    from electra_ablate.infra import compile_cache

    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    compile_cache.unpack_cache(a_cache_archive(tmp_path), work / "compile-cache")
    session = a_session(out, 500, work=str(work))
    session_py.save_cache(session)
    record = json.loads((out / "session.json").read_text())["compile_cache"]
    saved = out / compile_cache.ARCHIVE
    assert record["saved"] == {"file": saved.name, "bytes": saved.stat().st_size}
    assert compile_cache.check_archive(saved).files == 2  # its manifest and the graph
    assert [j["label"] for j in session.phase_jobs] == ["pack"]
    saved.unlink()
    for i in range(session_py.OUT_FILES - 1):  # session.json is one
        (out / f"file-{i}").write_text("x")
    session_py.save_cache(session)
    record = json.loads((out / "session.json").read_text())["compile_cache"]
    assert record["saved"] is None and "no file is left" in record["not_saved"]
    assert not saved.exists()


def test_mps_is_probed_never_started_unless_asked(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(session_py.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(session_py, "mps_running", lambda: False)
    monkeypatch.setattr(
        session_py.subprocess, "run",
        lambda command, **kw: calls.append((command, kw.get("input")))
        or subprocess.CompletedProcess(command, 0, "", ""),
    )  # fmt: skip
    session = a_session(tmp_path, 500)
    session_py.mps(session, start=False)
    assert session.record["mps"] == {
        "control": "/usr/bin/nvidia-cuda-mps-control",
        "daemon_running": False,
    }
    session_py.stop_mps(session)
    assert calls == []
    session_py.mps(session, start=True)
    session_py.stop_mps(session)
    control = "/usr/bin/nvidia-cuda-mps-control"
    assert calls == [([control, "-d"], None), ([control], "quit\n")]
    assert session.record["mps"]["started"] == session.record["mps"]["stopped"] == "yes"
    monkeypatch.setattr(session_py.shutil, "which", lambda name: None)
    session_py.mps(session, start=True)  # not installed: one line, not the session's end
    assert session.record["mps"]["started"] == "no: nvidia-cuda-mps-control is not installed"


def test_the_bench_in_the_jobs_record(tmp_path):
    session = a_session(tmp_path, 500)
    session.phase("bench", status="finished")
    report = {"ours_step_s": 0.1, "ours_first_step_s": 1.5, "ours_compiled_error": "no gcc"}
    (tmp_path / "bench.json").write_text(json.dumps(report))
    jobs = session_py.bench_jobs(session, tmp_path / "bench.json", session.args.started)
    assert [(j["kind"], j["label"], j["status"], j["compile_s"]) for j in jobs] == [
        ("bench", "ours", "done", 1.5),
        ("bench", "ours_compiled", "done", None),
    ]


@pytest.mark.slow  # process: a fresh interpreter's imports
def test_the_session_imports_no_torch():
    """The controller must always be able to write its record and its pack: it and the kit's
    modules it imports (kept parts, the compile cache) load without torch."""
    path = str(SESSION_PY)
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('s', {path!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
