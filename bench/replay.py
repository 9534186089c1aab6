"""The GPU session's time model from the command line (``electra_ablate.scaleout.replay``).

    python bench/replay.py --sessions reports/gpu_sessions        # each committed command: lost
                                                    # jobs replayed vs recorded; the parameters
    python bench/replay.py --sessions reports/gpu_sessions --fit  # fit again; the constants
    python bench/replay.py --rung 1e16 --seeds 3 --workers 12 --deadline 480 --shape one_card
    python bench/replay.py --choose --deadline 500 --workers 12 [--warm-cache]
    python bench/replay.py --rung 3e16 --runs bert_small --deadline 500   # one objective only

``--deadline`` is the study command's seconds (a session's ``--seconds`` less what ran before
the study and ``PACK_RESERVE_S``). Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from electra_ablate.scaleout.replay import (
    FITTED,
    LADDER,
    MARGIN,
    Replay,
    ReplayInputError,
    card_loads,
    choose,
    committed_study,
    fit,
    fitted,
    fitted_source,
    plan,
    read_sessions,
    simulate,
)


def show_sessions(root: Path, refit: bool) -> int:
    observed = read_sessions(root)
    model = fitted()
    if refit:
        result = fit(observed)
        model = result.model
        print(f"# fitted by: python bench/replay.py --sessions {root} --fit")
        print(f"# cost {result.cost:.4f} after {result.iterations} iterations; recorded "
              f"fine-tunes within x{result.spread:.2f} (geometric RMS)")  # fmt: skip
        print(fitted_source(result, observed[-1].study))
    differ = 0
    for command in observed:
        replay = simulate(model, command.command)
        predicted = sorted(s.item.key for s in replay.cut)
        same = set(predicted) == set(command.lost)
        differ += not same
        c = command.command
        print(f"{command.name}: {c.workers} workers, {c.mode} ({c.cache} cache), deadline "
              f"{c.deadline_s:g} s, {len(c.items)} jobs to run: "
              f"{'same' if same else 'DIFFERENT'}")  # fmt: skip
        print(f"  lost (recorded): {', '.join(sorted(command.lost)) or 'none'}")
        print(f"  cut (replayed):  {', '.join(predicted) or 'none'}")
        if command.makespan_s:
            print(f"  finished in {command.makespan_s:g} s, replayed {replay.end_s:.1f} s")
    if not refit:
        print("parameters (FITTED):")
        for name, value in sorted(FITTED.items()):
            print(f"  {name:40s} {value:10.4g}")
    return 0 if not differ else 1


def table(replay: Replay) -> str:
    rows = [f"{'job':44s} {'start s':>8s} {'end s':>8s}  cut"]
    for s in replay.slots:
        rows.append(f"{s.item.key:44s} {s.start_s:8.1f} {s.end_s:8.1f}  {'CUT' if s.cut else ''}")
    cut = len(replay.cut)
    rows.append(f"{len(replay.slots) - cut} of {len(replay.slots)} jobs end by the deadline "
                f"({replay.deadline_s:g} s); the last ends at {replay.end_s:.1f} s")  # fmt: skip
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=Path, help="committed sessions (reports/gpu_sessions)")
    parser.add_argument("--fit", action="store_true", help="fit again from --sessions")
    parser.add_argument("--rung", type=float, help="FLOPs per objective")
    parser.add_argument("--seeds", type=int, default=1, help="fine-tuning seeds 0..N-1")
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--deadline", type=float, help="seconds of the study command")
    parser.add_argument("--shape", choices=["pool", "one_card"], default="one_card")
    parser.add_argument("--beside", type=int, default=0, help="one_card: evaluations beside")
    parser.add_argument("--warm-cache", action="store_true", help="the compile cache is warm")
    parser.add_argument("--choose", action="store_true", help="the largest rung, most seeds")
    parser.add_argument("--max-seeds", type=int, default=3)
    parser.add_argument(
        "--runs", help="only these pre-training runs, comma-separated (default: every one)"
    )
    args = parser.parse_args()
    cache = "warm" if args.warm_cache else "cold"
    runs = args.runs.split(",") if args.runs else None
    try:
        if args.sessions is not None:
            return show_sessions(args.sessions, args.fit)
        if args.deadline is None or args.deadline <= 0:
            raise ReplayInputError("--deadline SECONDS (> 0) is needed to plan or choose")
        if args.workers < 1 or args.seeds < 1 or args.beside < 0 or args.max_seeds < 1:
            raise ReplayInputError("--workers, --seeds and --max-seeds are at least 1")
        loads = ", ".join(f"{k} {v:.2f}" for k, v in card_loads(fitted()).items())
        if args.choose:
            choice = choose(args.deadline, args.workers, args.shape, args.beside, cache,
                            max_seeds=args.max_seeds, runs=runs)  # fmt: skip
            print(f"rung {choice.rung:g}, fine-tuning seeds {list(choice.seeds)}: {choice.why}")
            print(f"(margin x{MARGIN:g}; card load per process: {loads})")
            print(table(choice.replay))
            return 0
        if args.rung is None or args.rung <= 0:
            raise ReplayInputError(f"--rung FLOPs (> 0; the ladder: {list(LADDER)}) or --choose")
        replay = plan(args.rung, range(args.seeds), args.workers, args.deadline, args.shape,
                      args.beside, cache, runs=runs)  # fmt: skip
        study = committed_study() if runs is None else committed_study().with_runs(runs)
        steps = ", ".join(f"{k} {v}" for k, v in study.steps_at(args.rung).items())
        print(f"rung {args.rung:g} ({steps} steps), {args.seeds} fine-tuning seed(s), "
              f"{args.workers} workers, {args.shape}, {cache} compile cache; card load per "
              f"process: {loads}")  # fmt: skip
        print(table(replay))
        return 0
    except ReplayInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader closed the output (| head): stop, as ablate does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
