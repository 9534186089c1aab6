"""The GPU session's time model (electra_ablate.scaleout.replay): the replay's rules on small
hand-made commands, the fit against the committed stretches (reports/gpu_sessions), the jobs each
committed command lost replayed, the planner's choices, untrusted packs, and bench/replay.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from crafted_packs import write_tar

from electra_ablate.scaleout import replay
from electra_ablate.scaleout.replay import Command, Item, Model, ReplayInputError
from electra_ablate.study.schedule import ONE_CARD_COMPILE_AHEAD, Schedule

REPO = Path(__file__).resolve().parents[2]
SESSIONS = REPO / "reports" / "gpu_sessions"

MODEL = Model({
    "start_s": 0.0, "eval_start_s": 0.0, "finetune_start_s": 0.0, "finetune_load": 0.25,
    "finetune_per_s/cola": 100.0, "finetune_per_s/sst2": 100.0, "probe_s": 1.0,
    "probe_load": 0.0, "pretrain_per_s/bert_mlm/cuda_graphs": 10.0,
    "pretrain_per_s/electra/cuda_graphs": 10.0, "pretrain_load/cuda_graphs": 1.0,
    "compile_s/bert_mlm/cuda_graphs/cold": 0.0, "compile_s/electra/cuda_graphs/cold": 0.0,
    "compile_s/bert_mlm/compiled/warm": 2.0, "compile_s/electra/compiled/warm": 4.0,
})  # fmt: skip
"""A model with round numbers: a run of 100 steps takes 10 s alone, a fine-tune of 100
examples 1 s, four fine-tunes fill the card."""


def run(label: str, steps: int = 100, objective: str = "bert_mlm") -> Item:
    return Item("pretrain", "run", label, objective, steps)


def tune(label: str, examples: int, task: str = "cola", unit: str = "run", seed: int = 0) -> Item:
    return Item("finetune", unit, label, task=task, seed=seed, fraction=1.0, examples=examples)  # type: ignore[arg-type]


def ends(replayed: replay.Replay) -> dict[str, tuple[float, float]]:
    return {s.item.key: (round(s.start_s, 6), round(s.end_s, 6)) for s in replayed.slots}


# ----------------------------------------------------------------------------- the rules


def test_processes_whose_loads_fill_the_card_share_it_and_below_that_nobody_slows():
    two_runs = replay.simulate(MODEL, Command((run("a"), run("b", objective="electra")), 2))
    assert ends(two_runs) == {"pretrain a": (0, 20), "pretrain b": (0, 20)}  # each at half
    four = tuple(tune(f"u{i}", 100, unit="baseline") for i in range(4))  # loads sum to 1
    assert {e for _, e in ends(replay.simulate(MODEL, Command(four, 4))).values()} == {1.0}
    eight = tuple(tune(f"u{i}", 100, unit="baseline") for i in range(8))  # to 2: twice as long
    assert {e for _, e in ends(replay.simulate(MODEL, Command(eight, 8))).values()} == {2.0}


def test_a_compiling_run_takes_no_share_of_the_card():
    model = Model({**MODEL.values, "compile_s/electra/cuda_graphs/cold": 5.0})
    command = Command((run("a"), run("b", objective="electra")), 2)
    got = ends(replay.simulate(model, command))
    # a alone for 5 s (50 steps), then both at half speed (5 steps/s): a's last 50 steps take
    # 10 s, in which b does 50; its last 50 alone take 5 s
    assert got["pretrain a"] == (0, 15) and got["pretrain b"] == (0, 20)


def test_the_pool_starts_evaluations_as_their_run_finishes_on_the_workers_it_has():
    items = (run("a"), tune("a", 100), tune("a", 100, task="sst2"), tune("x", 300, unit="baseline"))
    two = ends(replay.simulate(MODEL, Command(items, 2, shape="pool")))
    # the baseline's fine-tune needs no run: it starts beside it (loads 1.25: both slower for
    # its 3.75 s); the run's evaluations wait for it, then start on the two free workers
    assert two["x cola at 1 seed 0"] == (0, 3.75) and two["pretrain a"] == (0, 10.75)
    assert two["a cola at 1 seed 0"][0] == two["a sst2 at 1 seed 0"][0] == 10.75
    one = ends(replay.simulate(MODEL, Command(items, 1, shape="pool")))
    order = sorted(one, key=lambda k: one[k][0])  # first come, first started: the run first
    assert order == ["pretrain a", "x cola at 1 seed 0", "a cola at 1 seed 0", "a sst2 at 1 seed 0"]
    assert one["x cola at 1 seed 0"] == (10, 13)


def test_one_card_trains_one_run_at_a_time_then_evaluates_longest_first():
    items = (
        run("a"), tune("a", 100), tune("a", 400, task="sst2"),
        run("b", objective="electra"), tune("b", 200),
    )  # fmt: skip
    got = ends(replay.simulate(MODEL, Command(items, 1, shape="one_card")))
    assert (
        got["pretrain a"][1] <= got["pretrain b"][0] or got["pretrain b"][1] <= got["pretrain a"][0]
    )
    last_run = max(got["pretrain a"][1], got["pretrain b"][1])
    order = sorted((k for k in got if not k.startswith("pretrain")), key=lambda k: got[k][0])
    assert order == ["a sst2 at 1 seed 0", "b cola at 1 seed 0", "a cola at 1 seed 0"]
    assert got[order[0]][0] == pytest.approx(last_run)


def test_compile_ahead_compiles_the_next_run_while_one_trains_then_waits_for_the_card():
    model = Model({**MODEL.values, "compile_s/electra/cuda_graphs/cold": 5.0})
    items = (run("a"), run("b", objective="electra"), tune("b", 100))
    ahead = replay.simulate(model, Command(items, 2, shape="one_card", compile_ahead=1))
    # b compiles beside a (0-5 s, no share of the card), waits at the gate, trains after a
    assert ends(ahead)["pretrain a"] == (0, 10) and ends(ahead)["pretrain b"] == (0, 20)
    assert ahead.slot("pretrain b").card_s == pytest.approx(10.0)
    assert ends(ahead)["b cola at 1 seed 0"] == (20, 21)  # evaluations after the last run
    alone = replay.simulate(model, Command(items, 2, shape="one_card"))
    assert ends(alone)["pretrain b"] == (10, 25)  # without: b compiles with the card idle
    # first come, first served: the run that compiles sooner trains first, whatever its order
    slow_a = Model({**model.values, "compile_s/bert_mlm/cuda_graphs/cold": 8.0})
    got = ends(replay.simulate(slow_a, Command(items, 2, shape="one_card", compile_ahead=1)))
    assert got["pretrain b"] == (0, 15) and got["pretrain a"] == (0, 25)
    # one worker: nothing to start ahead on, the same as without
    one = Command(items, 1, shape="one_card", compile_ahead=1)
    assert ends(replay.simulate(model, one)) == ends(
        replay.simulate(model, Command(items, 1, shape="one_card"))
    )


def test_the_replay_takes_its_order_from_the_schedule_the_pool_follows(monkeypatch):
    calls = []
    pick = Schedule.pick

    def spy(self, waiting, running, free):
        calls.append((self.shape, len(waiting), len(running), free))
        return pick(self, waiting, running, free)

    monkeypatch.setattr(Schedule, "pick", spy)
    replay.simulate(MODEL, Command((run("a"), tune("a", 100)), 3, shape="one_card", beside=1))
    assert calls and {c[0] for c in calls} == {"one_card"}


def test_the_deadline_cuts_jobs_running_or_not_started():
    items = (run("a"), tune("a", 100), tune("a", 2000, task="sst2"), tune("a", 300, seed=1))
    got = replay.simulate(MODEL, Command(items, 1, deadline_s=14.0))
    by_key = {s.item.key: s for s in got.slots}
    assert not by_key["pretrain a"].cut and not by_key["a cola at 1 seed 0"].cut  # 10 s, 11 s
    assert by_key["a sst2 at 1 seed 0"].cut  # running at 14 s
    assert by_key["a cola at 1 seed 1"].cut and by_key["a cola at 1 seed 1"].start_s > 14.0


# ---------------------------------------------------------------------- the committed stretches


@pytest.fixture(scope="module")
def observed() -> list[replay.Observed]:
    return replay.read_sessions(SESSIONS)


@pytest.fixture(scope="module")
def refit(observed) -> replay.Fit:
    return replay.fit(observed)


def test_the_committed_parameters_are_what_the_committed_stretches_fit(refit):
    assert set(refit.model.values) == set(replay.FITTED)
    for name, value in replay.FITTED.items():
        again = refit.model[name]
        assert again == pytest.approx(value, rel=0.02, abs=1e-3), name


def test_the_committed_study_facts_are_the_newest_stretchs(observed):
    assert replay.committed_study().to_json() == json.loads(
        json.dumps(observed[-1].study.to_json())
    )


def test_each_committed_command_loses_in_replay_the_jobs_it_lost(observed):
    """Lost: planned evaluations with no record in the command's last pack (the plan rebuilt
    from plan.json and study.json, checked against plan.json's job counts); replayed with its
    workers, its compile mode, the pool it ran under and its deadline."""
    model = replay.fitted()
    lost_any = False
    for command in observed:
        assert command.command.shape == "pool" and command.command.deadline_s
        predicted = {s.item.key for s in replay.simulate(model, command.command).cut}
        assert predicted == set(command.lost), command.name
        lost_any |= bool(command.lost)
    assert lost_any and any(not c.lost for c in observed)  # both outcomes are replayed


def test_the_jobs_are_rebuilt_from_the_committed_files(observed):
    for command in observed:
        counts = {label: jobs for label, _, jobs in command.units}
        for label, jobs in counts.items():
            planned = [i for i in command.planned if i.label == label and i.kind != "pretrain"]
            assert len(planned) == jobs
        # what a command ran is what it planned less what earlier stretches had recorded
        assert set(command.recorded) | command.carried | command.lost == {
            i.key for i in command.planned if i.kind != "pretrain"
        }
        assert command.study.steps_at(command.rung) == {
            key.removeprefix("pretrain "): i.steps
            for i in command.planned
            if i.kind == "pretrain"
            for key in [i.key]
        }
    assert not observed[0].carried and all(c.carried for c in observed[1:])


def test_steps_scale_with_the_rung_as_the_committed_runs_took_them(observed):
    study = replay.committed_study()
    for command in observed:
        recorded = {i.label: i.steps for i in command.planned if i.kind == "pretrain"}
        assert study.steps_at(command.rung) == recorded


def test_the_fit_replays_the_recorded_seconds_within_its_stated_spread(refit):
    """MARGIN's ground (its docstring): a fine-tune's recorded seconds within about x1.2."""
    assert 1.0 < refit.spread < 1.3


# ----------------------------------------------------------------------------- planning


def test_the_chooser_takes_the_largest_rung_then_the_most_seeds_that_end_in_time():
    previous = (0.0, 0)
    for deadline in (300.0, 500.0, 900.0, 1500.0):
        choice = replay.choose(deadline, 12)
        got = (choice.rung, len(choice.seeds))
        assert got >= previous  # more time never buys less
        previous = got
        if not choice.fits:
            continue
        assert choice.replay.end_s <= deadline / replay.MARGIN and not choice.replay.cut
        for rung in replay.LADDER:
            for seeds in (1, 2, 3):
                if (rung, seeds) > got:
                    bigger = replay.plan(rung, range(seeds), 12, deadline)
                    assert bigger.end_s > deadline / replay.MARGIN, (deadline, rung, seeds)
    assert previous > (min(replay.LADDER), 1)


def test_nothing_fits_and_the_first_rung_is_run_its_parts_packed_as_they_come():
    choice = replay.choose(60.0, 12)
    assert not choice.fits and choice.rung == min(replay.LADDER) and choice.seeds == (0,)
    assert "nothing is replayed to end" in choice.why


def card_work(replayed: replay.Replay, model: Model) -> float:
    """What no schedule can beat: every job's card seconds weighted by its load, after the
    start (the card does at most one second of load-weighted work per second)."""
    total = 0.0
    for slot in replayed.slots:
        _, card, load = model.work(slot.item, "cuda_graphs", "cold")
        total += card * load
    return model["start_s"] + total


def test_the_next_stretch_replayed_on_one_card_and_as_a_pool():
    """The planned next stretch: 1e16, three fine-tuning seeds, 12 workers, a 560-s command
    less the pack reserve. The fitted model says the card's work alone outlasts the deadline,
    so no order finishes it; the replay must agree with that bound, and both shapes finish
    once the deadline is past it."""
    model = replay.fitted()
    deadline = 560.0 - 60.0
    shapes = {s: replay.plan(1e16, (0, 1, 2), 12, deadline, s) for s in ("pool", "one_card")}
    bound = card_work(shapes["pool"], model)
    assert bound > deadline
    for replayed in shapes.values():
        assert replayed.end_s >= bound - 1e-6 and replayed.cut
    later = 2 * shapes["one_card"].end_s
    for shape in shapes:
        assert not replay.plan(1e16, (0, 1, 2), 12, later, shape).cut


def test_one_card_plans_compile_ahead_as_the_pool_runs_it_and_ends_a_cold_study_sooner():
    """The live pool on one card compiles the next pre-training while one trains; the plan
    replays that by default, and on a cold cache it ends the 1e16 one-seed study earlier than
    one card without it (which left the card idle through the second run's compile)."""
    ahead = replay.plan(1e16, (0,), 12, None)
    assert ends(ahead) == ends(
        replay.plan(1e16, (0,), 12, None, compile_ahead=ONE_CARD_COMPILE_AHEAD)
    )
    after = replay.plan(1e16, (0,), 12, None, compile_ahead=0)
    assert ahead.end_s < after.end_s
    runs = sorted((s for s in ahead.slots if s.item.kind == "pretrain"), key=lambda s: s.card_s)
    assert runs[0].start_s == runs[1].start_s  # both start, the second compiling meanwhile
    assert runs[1].card_s >= runs[0].end_s - 1e-9  # and trains only after the first
    # the pool compiles nothing ahead: its replay is what it was
    pool = replay.plan(1e16, (0,), 12, None, "pool")
    assert ends(pool) == ends(replay.plan(1e16, (0,), 12, None, "pool", compile_ahead=0))


def test_a_warm_compile_cache_moves_the_plan_earlier():
    cold = replay.plan(1e16, (0,), 12, None)
    warm = replay.plan(1e16, (0,), 12, None, cache="warm")
    assert warm.end_s < cold.end_s


def test_a_rung_can_be_planned_one_objective_at_a_time():
    """A rung too long for one command runs one objective per stretch (``--set objectives``):
    the replay plans that run, its evaluations and the baseline's, nothing of the other."""
    both = {s.item.label for s in replay.plan(3e16, (0,), 12, None).slots}
    one = replay.plan(3e16, (0,), 12, None, runs=["bert_small"])
    labels = {s.item.label for s in one.slots}
    assert "electra_small" in both and "electra_small" not in labels
    assert "bert_small" in labels and [s.item.kind for s in one.slots].count("pretrain") == 1
    with pytest.raises(ReplayInputError, match="no run nope in the study"):
        replay.plan(3e16, (0,), 12, None, runs=["nope"])


def test_records_carried_from_earlier_stretches_are_not_planned():
    study = replay.committed_study()
    records = [{"status": "done", "task": "cola", "seed": 1, "fraction": 0.0},
               {"status": "done", "task": "rtd_unigram", "seed": 0, "fraction": 0.0,
                "reference": "bigram"},
               {"status": "done", "task": "cola", "seed": 0, "fraction": 1.0}]  # fmt: skip
    carried = replay.carried_keys(records, study)
    assert carried == {"no pre-training cola at 0 seed 1", "bigram rtd_unigram at 0 seed 0"}
    planned = {s.item.key for s in replay.plan(1e15, (0, 1), 4, None, carried=carried).slots}
    assert not planned & carried and "no pre-training cola at 0 seed 0" in planned


# ----------------------------------------------------------------------------- untrusted packs


def test_a_pack_is_read_in_memory_only_the_records_the_replay_needs(tmp_path):
    path = write_tar(tmp_path / "p.pack.tar.gz", {
        "study/plan.json": b"{}", "study/finetune/abc.json": b"{}",
        "study/pretrain/r/weights.safetensors": b"x", "study/pretrain/r/done.json": b"{}",
    })  # fmt: skip
    assert set(replay.read_pack(path)) == {"plan.json", "finetune/abc.json", "pretrain/r/done.json"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.pack.tar.gz"]  # nothing extracted
    for unsafe in ("study/../../escape.json", "/etc/plan.json"):  # refused, never skipped
        bad = write_tar(tmp_path / "bad.pack.tar.gz", {"study/plan.json": b"{}", unsafe: b"{}"})
        with pytest.raises(ReplayInputError, match="points outside its folder"):
            replay.read_pack(bad)


def test_an_oversized_or_broken_pack_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "MAX_MEMBER_BYTES", 10)
    big = write_tar(tmp_path / "big.pack.tar.gz", {"study/study.json": b"{" + b" " * 20 + b"}"})
    with pytest.raises(ReplayInputError, match="study.json unpacks to 22 bytes"):
        replay.read_pack(big)
    broken = tmp_path / "broken.pack.tar.gz"
    broken.write_bytes(b"not a tar")
    with pytest.raises(ReplayInputError, match="not a readable pack"):
        replay.read_pack(broken)


def test_a_pack_declaring_more_than_it_may_inflate_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "MAX_UNPACKED_BYTES", 100)
    path = write_tar(tmp_path / "p.pack.tar.gz", {"study/big.bin": b"0" * 200})
    with pytest.raises(ReplayInputError, match="more than"):
        replay.read_pack(path)


def test_a_record_that_does_not_read_is_one_clear_error(tmp_path):
    """A committed session whose pack holds a run's done.json as a list, not the record."""
    session = tmp_path / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "session.json").write_text(json.dumps({"workers": 2, "phases": {}}))
    committed = replay.read_pack(next((SESSIONS / "2026-11-26-a").glob("*.pack.tar.gz")))
    members = {f"study/{k}": b"[1]" if k.endswith("done.json") else v for k, v in committed.items()}
    write_tar(session / "s.pack.tar.gz", members)
    with pytest.raises(ReplayInputError, match="cannot read"):
        replay.read_sessions(tmp_path / "sessions")


def test_a_session_folder_without_a_study_record_is_refused(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "session.json").write_text("[1, 2]")
    with pytest.raises(ReplayInputError, match="not a session record"):
        replay.read_sessions(tmp_path)


# --------------------------------------------------------------------------- bench/replay.py


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "replay.py"), *args],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip


@pytest.mark.slow  # process: the bench script as a maintainer runs it
def test_the_command_line_replays_the_committed_sessions_and_plans():
    done = cli("--sessions", "reports/gpu_sessions")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": same") == len(replay.read_sessions(SESSIONS))
    planned = cli("--rung", "1e15", "--seeds", "2", "--workers", "6", "--deadline", "480")
    assert planned.returncode == 0, planned.stderr
    assert "no pre-training cola at 0 seed 1" in planned.stdout
    assert "end by the deadline (480 s)" in planned.stdout
    chosen = cli("--choose", "--deadline", "500")
    assert chosen.returncode == 0 and chosen.stdout.startswith("rung ")


@pytest.mark.slow  # process: the script's exit status
def test_the_command_line_refuses_bad_input_in_one_line():
    for args in (("--rung", "1e16"), ("--sessions", "no/such/folder"), ("--deadline", "-1")):
        done = cli(*args)
        assert done.returncode == 2 and done.stderr.startswith("error: "), args
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.slow  # process: a fresh interpreter's imports
def test_the_replay_imports_without_torch():
    """The node's session imports it on the node, where it must write its record whatever the
    torch install: torch made unimportable, the module still imports."""
    code = "import sys; sys.modules['torch'] = None; import electra_ablate.scaleout.replay"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert math.isfinite(replay.fitted()["start_s"])
