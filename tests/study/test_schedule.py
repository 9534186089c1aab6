"""The rule a study's workers start their work by (``electra_ablate.study.schedule``): the pool's
first come, first started, and one card's one pre-training at a time, evaluations after it,
longest first. Pure functions of what waits and what runs: no process is started."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml
from ablate_cli import SMOKE

from electra_ablate.infra.errors import SpecError
from electra_ablate.scaleout.packs import spec_fingerprint
from electra_ablate.scaleout.runner import say_schedule_unused
from electra_ablate.spec import parse_spec
from electra_ablate.study.estimate import makespan
from electra_ablate.study.schedule import (
    ONE_CARD_COMPILE_AHEAD,
    SHAPES,
    Job,
    Schedule,
    one_card_by_default,
    resolved_schedule,
)

BERT = Job("bert", "pretrain", 4.0)
ELECTRA = Job("electra", "pretrain", 5.0)
SST2 = Job("electra/sst2", "evaluate", 200.0, needs="electra")
RTE = Job("bert/rte", "evaluate", 25.0, needs="bert")
PROBE = Job("bert/rtd", "evaluate", 0.1, needs="bert")
BASELINE_RTE = Job("baseline/rte", "evaluate", 25.0)


def keys(jobs: list[Job]) -> list[str]:
    return [job.key for job in jobs]


def test_the_pool_starts_what_waits_in_the_order_it_became_ready():
    pool = Schedule("pool")
    waiting = [ELECTRA, BERT, PROBE, SST2, RTE]
    assert pool.pick(waiting, [], 2) == [ELECTRA, BERT]
    assert pool.pick(waiting, [ELECTRA], 5) == waiting  # nothing waits for a pre-training
    assert pool.pick(waiting, [], 0) == [] and pool.pick([], [], 3) == []


def test_one_card_trains_one_run_at_a_time_and_holds_evaluations_back():
    card = Schedule("one_card")
    # four idle workers, two runs and a baseline's evaluation ready: one run alone starts
    assert card.pick([ELECTRA, BERT, BASELINE_RTE], [], 4) == [ELECTRA]
    # while it trains neither the other run nor any evaluation starts, whatever is free
    assert card.pick([BERT, BASELINE_RTE, RTE], [ELECTRA], 3) == []
    # the last run starts once the first is done; evaluations still wait for it
    assert card.pick([BERT, BASELINE_RTE, SST2], [], 3) == [BERT]
    assert card.pick([BASELINE_RTE, SST2], [BERT], 2) == []


def test_one_card_starts_ready_evaluations_longest_first_across_units():
    card = Schedule("one_card")
    ready = [PROBE, RTE, BASELINE_RTE, SST2]  # the order they became ready
    assert keys(card.pick(ready, [], 4)) == ["electra/sst2", "bert/rte", "baseline/rte", "bert/rtd"]
    # equal costs keep the order they became ready in; free workers bound how many start
    assert keys(card.pick(ready, [], 2)) == ["electra/sst2", "bert/rte"]


def test_beside_lets_that_many_evaluations_run_beside_the_pre_training():
    card = Schedule("one_card", beside=1)
    # a run starts with the longest ready evaluation beside it
    assert card.pick([ELECTRA, RTE, SST2], [], 4) == [ELECTRA, SST2]
    # one is beside it already: no second one, however many workers idle
    assert card.pick([BERT, RTE], [ELECTRA, SST2], 2) == []
    # the beside one finished: the next longest takes its place
    assert card.pick([BERT, PROBE, RTE], [ELECTRA], 2) == [RTE]
    # no pre-training left: every ready evaluation, up to the free workers
    assert card.pick([PROBE, RTE], [SST2], 3) == [RTE, PROBE]
    # a run still to start counts as a pre-training to come
    assert Schedule("one_card", beside=2).pick([BERT, PROBE, RTE, SST2], [], 3) == [
        BERT,
        SST2,
        RTE,
    ]


def test_compile_ahead_starts_the_next_run_while_one_trains_and_evaluations_still_wait():
    card = Schedule("one_card", compile_ahead=1)
    third = Job("third", "pretrain", 3.0)
    # idle workers, three runs ready: the first to train and the next to compile meanwhile
    assert card.pick([ELECTRA, BERT, third, BASELINE_RTE], [], 4) == [ELECTRA, BERT]
    # one holds a worker: the next starts; two hold workers: none, whatever is free
    assert card.pick([BERT, third, BASELINE_RTE], [ELECTRA], 3) == [BERT]
    assert card.pick([third, BASELINE_RTE], [ELECTRA, BERT], 2) == []
    # evaluations wait for every pre-training to end, as without it; beside is unchanged
    assert card.pick([BASELINE_RTE, SST2], [BERT], 2) == []
    assert card.pick([BASELINE_RTE, SST2], [], 2) == [SST2, BASELINE_RTE]
    beside = Schedule("one_card", beside=1, compile_ahead=1)
    assert beside.pick([ELECTRA, BERT, RTE, SST2], [], 4) == [ELECTRA, BERT, SST2]
    # free workers bound everything: one idle worker takes the first run only
    assert card.pick([ELECTRA, BERT], [], 1) == [ELECTRA]
    # two ahead: three pre-trainings may hold workers
    assert Schedule("one_card", compile_ahead=2).pick([BERT, third], [ELECTRA], 3) == [BERT, third]
    # the pool ignores it: first come, first started
    assert Schedule("pool", compile_ahead=1).pick([ELECTRA, RTE], [BERT], 2) == [ELECTRA, RTE]
    assert "the next compiling meanwhile" in card.describe()
    with pytest.raises(ValueError, match="compile_ahead must be 0 or more"):
        Schedule("one_card", compile_ahead=-1)


def test_auto_is_one_card_only_where_the_workers_share_one_card():
    assert one_card_by_default("cuda", 1, 8) and one_card_by_default("cuda:0", 4, 2)
    assert not one_card_by_default("cuda", 2, 8)  # each worker its own card, in turn
    assert not one_card_by_default("cuda", 1, 1)  # one worker shares nothing
    assert not one_card_by_default("cpu", 0, 2)
    ahead = ONE_CARD_COMPILE_AHEAD  # the pool on one card compiles the next run meanwhile
    assert ahead >= 1
    assert resolved_schedule("auto", 2, "cuda", 1, 8) == Schedule("one_card", 2, ahead)
    assert resolved_schedule("auto", 2, "cpu", 0, 8) == Schedule("pool")  # beside: no meaning
    assert resolved_schedule("one_card", 0, "cpu", 0, 2) == Schedule("one_card", 0, ahead)
    assert resolved_schedule("pool", 0, "cuda", 1, 8) == Schedule("pool")


def test_a_schedule_that_cannot_be_is_refused():
    assert set(SHAPES) == {"pool", "one_card"}
    with pytest.raises(ValueError, match="unknown schedule shape 'one_crad'"):
        Schedule("one_crad")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="beside must be 0 or more"):
        Schedule("one_card", -1)
    for shape in SHAPES:
        assert shape in Schedule(shape).describe()  # type: ignore[arg-type]


def smoke_with(schedule: dict | None) -> dict:
    raw = yaml.safe_load(SMOKE.read_text())
    return raw if schedule is None else {**raw, "schedule": schedule}


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ({"shape": "pool", "beside": 1}, "schedule: beside: 1 does nothing with shape: pool"),
        ({"beside": -1}, "schedule.beside: Input should be greater than or equal to 0"),
        ({"shape": "one_crad"}, "schedule.shape: Input should be 'auto', 'pool' or 'one_card'"),
        ({"besides": 1}, "schedule.besides: unknown key (did you mean 'beside'?)"),
    ],
)
def test_the_spec_refuses_a_schedule_that_cannot_be_or_would_do_nothing(schedule, says):
    with pytest.raises(SpecError) as refused:
        parse_spec(smoke_with(schedule))
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_the_schedule_is_no_part_of_which_study_it_is():
    default = parse_spec(smoke_with(None))
    assert (default.schedule.shape, default.schedule.beside) == ("auto", 0)
    chosen = parse_spec(smoke_with({"shape": "one_card", "beside": 2}))
    assert (chosen.schedule.shape, chosen.schedule.beside) == ("one_card", 2)
    records = [{"name": "smoke", "spec": s.model_dump(mode="json")} for s in (default, chosen)]
    before = {**records[0], "spec": dict(records[0]["spec"])}
    before["spec"].pop("schedule")  # a study recorded before the block existed
    assert spec_fingerprint(records[0]) == spec_fingerprint(records[1]) == spec_fingerprint(before)


@pytest.mark.parametrize(
    ("schedule", "noted"),
    [(None, False), ({"shape": "pool"}, False), ({"shape": "one_card"}, True),
     ({"beside": 2}, True)],
)  # fmt: skip
def test_a_schedule_one_process_cannot_follow_is_said_not_silently_dropped(schedule, noted):
    """``ablate run`` without workers (or under torchrun) trains and evaluates each run in
    turn: a schedule the spec sets explicitly would do nothing there, so one line says so."""
    said: list[str] = []
    study = SimpleNamespace(spec=parse_spec(smoke_with(schedule)))
    say_schedule_unused(study, said.append)
    assert len(said) == int(noted)
    if noted:
        assert said[0].startswith("note: schedule (shape: ") and "--workers N" in said[0]


def test_the_dry_runs_wall_time_follows_the_schedule():
    runs, fine_tunes = [10.0, 10.0, 10.0], [3.0] * 9  # 30 + 27 minutes of work, 2 workers
    assert makespan(runs, fine_tunes, 2) == makespan(runs, fine_tunes, 2, Schedule("pool")) == 29
    # one card: the runs one after another (30), then the fine-tunes on both workers (5 x 3)
    assert makespan(runs, fine_tunes, 2, Schedule("one_card")) == 45.0
    # one fine-tune beside the runs: the other worker does all nine while they train
    assert makespan(runs, fine_tunes, 2, Schedule("one_card", beside=1)) == 30.0
    # longest first: taken in the given order, the 20 would start at 12 and end at 32
    assert makespan([10.0], [2.0, 2.0, 20.0], 2, Schedule("one_card")) == 30.0
    assert makespan([5.0, 1.0], [2.0, 2.0], 1, Schedule("one_card")) == 10.0  # one worker
