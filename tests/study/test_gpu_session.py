"""The GPU session's time model and record (gpu/session.py): which rung of the FLOPs ladder a
measured plan chooses, and what session.json says. gpu/rehearse.sh runs whole sessions on the
CPU, with a SIGTERM and a SIGKILL among them; these are the decisions, checked fast."""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_session() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_session", REPO / "gpu" / "session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


session_py = load_session()


def plan(pretrain_s: float, finetune_s: float, timed_at: float = 1e15) -> dict:
    """A plan.json as ``ablate run --dry-run --plan-json`` writes it: two runs timed at
    ``timed_at`` FLOPs each, and a baseline (no FLOPs)."""
    rows = [
        {"label": label, "status": "to do", "flops_paper": flops, "est_pretrain_s": pre,
         "est_finetune_s": finetune_s}
        for label, pre, flops in (("bert", pretrain_s, timed_at),
                                  ("electra", pretrain_s, timed_at), ("none", 0.0, 0.0))
    ]  # fmt: skip
    return {"rows": rows}


def a_session(tmp_path: Path, seconds: float, ladder=(1e15, 3e15, 1e16), **args: object) -> object:
    args = argparse.Namespace(**{
        "out": str(tmp_path), "started": time.time(), "seconds": seconds, "device": "cuda",
        "workers": 4, "ladder": list(ladder), "work": str(tmp_path), "compile": "spec",
        "reuse": [], "settings": [], "phases": ["doctor", "tests", "bench", "plan", "study"],
        **args,
    })  # fmt: skip
    return session_py.Session(args)


def test_pre_training_scales_with_the_rung_and_evaluation_does_not():
    model = plan(pretrain_s=10.0, finetune_s=30.0)
    low = session_py.predict(model, 1e15, workers=1)
    high = session_py.predict(model, 1e16, workers=1)
    assert high["pretrain_s"] == pytest.approx(10 * low["pretrain_s"])
    assert high["finetune_s"] == low["finetune_s"] == pytest.approx(90.0)


def test_each_run_scales_from_the_budget_it_was_timed_at():
    model = plan(pretrain_s=10.0, finetune_s=0.0, timed_at=5e14)  # two runs, 10 s at 5e14
    assert session_py.predict(model, 1e15, workers=1)["pretrain_s"] == pytest.approx(40.0)


def test_a_finished_run_costs_nothing_more():
    model = plan(pretrain_s=10.0, finetune_s=0.0)
    model["rows"][0]["status"] = "done"
    assert session_py.predict(model, 1e15, workers=1)["pretrain_s"] == pytest.approx(10.0)


def test_workers_share_the_gpu_no_further_than_assumed():
    model = plan(pretrain_s=0.0, finetune_s=100.0)
    one = session_py.predict(model, 1e15, workers=1)["wall_s"] - session_py.STARTUP_S
    many = session_py.predict(model, 1e15, workers=16)["wall_s"] - session_py.STARTUP_S
    assert one / many == pytest.approx(session_py.GPU_SHARING)


def test_the_largest_rung_that_fits_with_the_margin_is_chosen(tmp_path):
    # 40 s of pre-training per run at 1e15: 1e16 needs ~400 s a run, 3e15 ~120 s
    session = a_session(tmp_path, seconds=session_py.PACK_RESERVE_S + 400)
    rung, why, predictions = session_py.choose_rung(session, plan(pretrain_s=40.0, finetune_s=5))
    assert rung == 3e15, predictions
    assert "largest rung" in why
    assert set(predictions) == {f"{r:.3g}" for r in (1e15, 3e15, 1e16)}


def test_when_no_rung_fits_the_first_is_run_and_the_record_says_so(tmp_path):
    session = a_session(tmp_path, seconds=session_py.PACK_RESERVE_S + 30)
    rung, why, _ = session_py.choose_rung(session, plan(pretrain_s=100.0, finetune_s=100.0))
    assert rung == 1e15
    assert "no rung is predicted to fit" in why


def test_without_a_plan_the_first_rung_is_run(tmp_path):
    rung, why, predictions = session_py.choose_rung(a_session(tmp_path, 500), None)
    assert (rung, predictions) == (1e15, {})
    assert "no time model" in why


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


def test_a_fine_tuning_bench_stopped_at_its_limit_keeps_the_modes_it_finished(
    tmp_path, monkeypatch
):
    """The bench writes each mode's report as it finishes one; the phase, stopped at its cap,
    records those modes and chooses among them (the second H200 stretch lost all of them)."""
    bench = tmp_path / "kit" / "bench"
    bench.mkdir(parents=True)
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
        "finetune.recipe.compile": False
    }
