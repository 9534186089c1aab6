"""How ``ablate run --workers N`` hands out a study's items (``workers.WorkQueue``), played on a
simulated clock in this process: each item takes its cost in seconds, a run's evaluations become
ready when it ends, a worker frees when its item ends. What the real pool does with processes is
``test_one_card_workers.py``."""

from __future__ import annotations

from electra_ablate.scaleout.workers import WorkQueue
from electra_ablate.study.schedule import Job, Schedule

RUNS = {"electra": 50.0, "bert": 40.0}  # most expensive first, as run_in_workers sorts them
EVALUATIONS = {  # per run: (task, seconds)
    "electra": [("rte", 8.0), ("sst2", 30.0), ("rtd", 1.0)],
    "bert": [("rte", 8.0), ("sst2", 30.0), ("rtd", 1.0)],
    "baseline": [("rte", 8.0), ("sst2", 30.0)],  # ready from the start: no pre-training
}


def evaluations(run: str) -> list[tuple[tuple, Job]]:
    needs = None if run == "baseline" else run
    return [
        (("job", run, task), Job(f"{run}/{task}", "evaluate", s, needs))
        for task, s in EVALUATIONS[run]
    ]


def play(schedule: Schedule, workers: int) -> list[tuple[Job, float, float]]:
    """Every item with its start and end, in the order they started."""
    queue = WorkQueue(schedule, workers)
    queue.ready([(("run", run), Job(run, "pretrain", cost)) for run, cost in RUNS.items()])
    queue.ready(evaluations("baseline"))
    now, running, ran = 0.0, {}, []
    while queue.waiting or running:
        started = queue.start(list(running))
        assert len(started) <= workers - len(running)  # the executor never queues an item
        for item in started:
            job = queue.jobs[item]
            running[item] = now + job.cost
            ran.append([job, now, None])
        assert running, "the schedule left work waiting with every worker idle"
        item = min(running, key=running.__getitem__)
        now = running.pop(item)
        next(r for r in ran if r[0] is queue.jobs[item])[2] = now
        if item[0] == "run":
            queue.ready(evaluations(item[1]))
    return [tuple(r) for r in ran]


def pretraining(ran: list) -> list[tuple[float, float]]:
    return [(start, end) for job, start, end in ran if job.kind == "pretrain"]


def test_the_pool_starts_everything_in_the_order_it_became_ready():
    ran = play(Schedule("pool"), 3)
    ready_order = ["electra", "bert", "baseline/rte", "baseline/sst2"]
    assert [job.key for job, _, _ in ran][:4] == ready_order
    # the two runs train side by side, and an evaluation beside them on the third worker
    (electra, bert) = pretraining(ran)
    assert electra[0] == bert[0] == 0.0
    assert [job.key for job, start, _ in ran if start == 0.0] == ready_order[:3]
    # a run's evaluations start in the order the run lists them, as it ends
    bert_jobs = [job.key for job, _, _ in ran if job.key.startswith("bert/")]
    assert bert_jobs == ["bert/rte", "bert/sst2", "bert/rtd"]


def test_one_card_trains_one_run_at_a_time_then_evaluates_longest_first():
    ran = play(Schedule("one_card"), 3)
    runs = pretraining(ran)
    assert [job.key for job, _, _ in ran][:2] == ["electra", "bert"]
    for (_, end), (start, _) in zip(runs, runs[1:], strict=False):
        assert start >= end  # never two at once
    last_end = max(end for _, end in runs)
    evaluated = [(job, start) for job, start, _ in ran if job.kind == "evaluate"]
    assert all(start >= last_end for _, start in evaluated)  # none beside a pre-training
    costliest = max(job.cost for job, _ in evaluated)
    assert evaluated[0][0].cost == costliest  # the first to start is the longest ready
    # every start came in descending cost: all were ready when the last run ended
    costs = [job.cost for job, _ in evaluated]
    assert costs == sorted(costs, reverse=True)


def test_one_card_beside_runs_that_many_evaluations_beside_a_pre_training():
    ran = play(Schedule("one_card", beside=1), 3)
    runs = pretraining(ran)
    evaluations_ran = [(s, e) for job, s, e in ran if job.kind == "evaluate"]
    for start, end in runs:
        moments = [start] + [s for s, _ in evaluations_ran if start <= s < end]
        at_once = [sum(s <= t < e for s, e in evaluations_ran) for t in moments]
        assert max(at_once) == 1  # one evaluation beside each pre-training, never two
    first_evaluation = next(job for job, _, _ in ran if job.kind == "evaluate")
    assert first_evaluation.key == "baseline/sst2"  # the longest of those ready at the start


def test_items_lost_with_a_dead_worker_start_again_first():
    queue = WorkQueue(Schedule("one_card"), 2)
    queue.ready([(("run", run), Job(run, "pretrain", cost)) for run, cost in RUNS.items()])
    queue.ready(evaluations("baseline"))
    (first,) = queue.start([])
    assert first == ("run", "electra")
    queue.requeue([first])  # its worker died: the pool is new, nothing runs
    assert queue.waiting[0] == first and queue.start([]) == [first]


def test_one_card_compile_ahead_hands_out_the_next_run_while_one_trains():
    """Both runs go to workers at once (the next compiles, then waits at the device gate, which
    this clock does not play: ``test_one_card_workers.py`` plays it); evaluations wait for both."""
    ran = play(Schedule("one_card", compile_ahead=1), 3)
    assert [job.key for job, _, _ in ran][:2] == ["electra", "bert"]
    runs = pretraining(ran)
    assert [start for start, _ in runs] == [0.0, 0.0]
    last_end = max(end for _, end in runs)
    assert all(start >= last_end for job, start, _ in ran if job.kind == "evaluate")
