#!/usr/bin/env bash
# Runs on an offline GPU node, from a kit made by `ablate kit SPEC --out KIT` (the recipe:
# docs/gpu-node.md of electra-ablate): no network, no package index, the node's own python3
# and torch. The session and the bench are modules of the kit's wheel
# (electra_ablate.scaleout.node), run with -m from WORK so that the installed wheel runs.
#
#   bash KIT/node.sh KIT OUT [STEP ...]
#
# STEPs, run in order (default: doctor test bench):
#   session     everything one stretch of lent GPU time can do, in one call bounded by
#               SESSION_SECONDS (default 540, from this script's start to its last file):
#               doctor, CUDA tests, bench, then the largest rung of the FLOPs ladder (and the
#               most fine-tuning seeds) that the replayed time model says fits, packed as it
#               finishes (electra_ablate.scaleout.node.session): OUT/session.json, session.log,
#               doctor.json, bench.json and one pack (finetune.json, plan.json too where those
#               phases were named), then, as far
#               as files are left, the kept encoders of runs whose evaluations the deadline cut
#               (<study>-<rung>.kept.partIofN) and compile-cache.tar.xz; at most eight files
#               whatever happens, and a non-zero exit where one could not be written
#   doctor      `ablate doctor` on every device: OUT/doctor.json, OUT/doctor.txt
#   test        the repository's CUDA tests (pytest -m cuda on REPO's test files that mark
#               some), else the doctor's checks on every device: OUT/cuda-tests.log
#   bench       electra_ablate.scaleout.node.pretrain_throughput --device $DEVICE: OUT/bench.json (eager ours and
#               the peers), and one more run per BENCH_COMPILE variant, ours compiled with
#               `pretrain.compile: V` beside them: OUT/bench-compile-V.json
#   unit I/N    shard I of N of the kit's study (`ablate run --shard I/N`), stopped after
#               JOB_SECONDS; then `ablate pack`: OUT/<study>-shard-I-of-N.pack.tar.gz. A shard
#               stopped at the limit resumes when the same step runs again on the same machine.
#
# Every step leaves its files under OUT whatever happens to the others; the exit code is the
# first failing step's. Environment (defaults): PYTHON (python3), WORK (/tmp/ablate-work: the
# installed wheels, the unpacked data and the study folder), DEVICE (cuda), JOB_SECONDS (540),
# WORKERS (1), SESSION_WORKERS (the session's study processes; default session.py's WORKERS,
# 12: on one card the one_card schedule trains one run at a time, so the workers serve the
# host-bound evaluations after it), SESSION_ARGS (more of session.py's options, e.g. --mps),
# REPO (the current folder), DOCTOR_ARGS, SESSION_SECONDS (540), BENCH_ARGS (--preset small
# --batch 128 --steps 20), BENCH_COMPILE (on cuda "true reduce-overhead", i.e. compiled and compiled with
# CUDA graphs; elsewhere none: CUDA graphs need CUDA and compiling a CPU step takes minutes).
set -uo pipefail
START=$(date +%s)

if [ $# -lt 2 ]; then
    echo "usage: bash node.sh KIT OUT [doctor|test|bench|session|unit I/N ...]" >&2
    exit 2
fi
KIT=$(cd "$1" && pwd) || { echo "error: no kit at $1" >&2; exit 2; }
OUT=$2
shift 2
[ -f "$KIT/kit.json" ] || { echo "error: $KIT is not a kit (no kit.json)" >&2; exit 2; }
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) && touch "$OUT/.writable" && rm -f "$OUT/.writable" ||
    { echo "error: OUT ($OUT) cannot be written: nothing was run" >&2; exit 2; }
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(doctor test bench)

PYTHON=${PYTHON:-python3}
# WORK belongs to one kit: another kit's wheels, data and study are never reused
KIT_SUM=$(sha256sum "$KIT/kit.json" | cut -c1-12)
WORK=${WORK:-/tmp/ablate-work}/kit-$KIT_SUM
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then BENCH_COMPILE=${BENCH_COMPILE-true reduce-overhead}; fi
BENCH_COMPILE=${BENCH_COMPILE-}
JOB_SECONDS=${JOB_SECONDS:-540}
SESSION_SECONDS=${SESSION_SECONDS:-540}
WORKERS=${WORKERS:-1}
REPO=${REPO:-$PWD}
BENCH_ARGS=${BENCH_ARGS:---preset small --batch 128 --steps 20}
SESSION_BENCH_ARGS=${SESSION_BENCH_ARGS:---preset small --batch 128 --steps 20 --warmup 3 --no-memory}
DOCTOR_ARGS=${DOCTOR_ARGS:-}
SITE=$WORK/site
STUDY=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["study"])' \
    "$KIT/kit.json") || { echo "error: $KIT/kit.json cannot be read" >&2; exit 2; }
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1

setup() {
    # The carried wheels (the project and what the node lacks), once per machine: --no-deps
    # because everything else is the node's own (kit.json lists what the kit relies on).
    if [ ! -f "$SITE/.installed" ]; then
        rm -rf "$SITE" && mkdir -p "$SITE"
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target "$SITE" "$KIT"/wheels/*.whl || return 1
        touch "$SITE/.installed"
    fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    # The data bundle travels compressed; it is unpacked once per machine.
    if [ ! -f "$WORK/data/bundle.json" ]; then
        rm -rf "$WORK/data.tmp" && mkdir -p "$WORK/data.tmp"
        "$PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
            "$KIT/data.tar.xz" "$WORK/data.tmp" || return 1
        rm -rf "$WORK/data" && mv "$WORK/data.tmp" "$WORK/data"
    fi
}

ablate() {
    # From WORK, so that the installed wheel runs, not a source tree in the current folder.
    (cd "$WORK" && "$PYTHON" -m electra_ablate "$@")
}

step_doctor() {
    # shellcheck disable=SC2086
    ablate doctor $DOCTOR_ARGS --json "$OUT/doctor.json" 2>&1 | tee "$OUT/doctor.txt"
}

step_test() {
    # The test files that mark CUDA tests (pytest -m cuda), or, where there are none, the
    # doctor's findings: every check passed on every device, and a $DEVICE device was seen.
    local files
    files=$(grep -rl --include="test_*.py" "mark\.cuda" "$REPO"/tests 2>/dev/null)
    if [ -n "$files" ]; then
        # shellcheck disable=SC2086
        # PYTHONSAFEPATH: the checkout's electra_ablate/ must not hide the installed wheel
        (cd "$REPO" && PYTHONSAFEPATH=1 "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider \
            -o addopts= $files) 2>&1 |
            tee "$OUT/cuda-tests.log"
        return "${PIPESTATUS[0]}"
    fi
    [ -f "$OUT/doctor.json" ] || step_doctor >/dev/null || return 1
    "$PYTHON" - "$OUT/doctor.json" "$DEVICE" <<'PY' 2>&1 | tee "$OUT/cuda-tests.log"
import json, sys
report = json.load(open(sys.argv[1]))
failed = [f"{d['device']}: {c['name']}: {c['detail']}"
          for d in report["devices"] for c in d["checks"] if not c["ok"]]
seen = [d["device"] for d in report["devices"] if d["device"].split(":")[0] == sys.argv[2]]
print("no tests marked cuda: the doctor's checks stand in for them")
for line in failed:
    print("FAILED", line)
if not seen:
    print(f"FAILED no {sys.argv[2]} device seen")
print(f"{'passed' if seen and not failed else 'FAILED'} on {', '.join(seen) or 'nothing'}")
sys.exit(1 if failed or not seen else 0)
PY
    return "${PIPESTATUS[0]}"
}

bench_once() {  # bench_once NAME [EXTRA ARGS]: OUT/NAME.json, OUT/NAME.log
    local name=$1 rc
    shift
    # shellcheck disable=SC2086
    (cd "$WORK" && "$PYTHON" -m electra_ablate.scaleout.node.pretrain_throughput \
        --device "$DEVICE" $BENCH_ARGS "$@" --json) >"$OUT/$name.json" 2>"$OUT/$name.log"
    rc=$?
    cat "$OUT/$name.json"
    [ $rc -eq 0 ] || tail -5 "$OUT/$name.log" >&2
    return $rc
}

step_bench() {
    local status=0 variant
    bench_once bench || status=$?
    for variant in $BENCH_COMPILE; do
        if [ "$variant" = true ]; then
            bench_once bench-compile-true --compile || [ $status -ne 0 ] || status=1
        else
            bench_once "bench-compile-$variant" --compile "$variant" || [ $status -ne 0 ] || status=1
        fi
    done
    return $status
}

step_session() {
    # In the background, waited for: a SIGTERM or SIGINT to this script is passed on, and the
    # script stays until the session has written its last pack and record.
    local child rc
    # From WORK (exec: the child is the session itself), so that the installed wheel runs.
    # shellcheck disable=SC2086
    (cd "$WORK" && exec "$PYTHON" -m electra_ablate.scaleout.node.session --kit "$KIT" \
        --out "$OUT" --work "$WORK" --repo "$REPO" \
        --device "$DEVICE" --seconds "$SESSION_SECONDS" --started "$START" \
        ${SESSION_WORKERS:+--workers "$SESSION_WORKERS"} --bench-args "$SESSION_BENCH_ARGS" \
        ${SESSION_ARGS:-}) &
    child=$!
    trap 'kill -TERM "$child" 2>/dev/null' TERM
    trap 'kill -INT "$child" 2>/dev/null' INT
    wait "$child"
    rc=$?
    while kill -0 "$child" 2>/dev/null; do  # a trapped signal ended the wait, not the session
        wait "$child"
        rc=$?
    done
    trap - TERM INT
    return $rc
}

step_unit() {
    local shard=$1 name rc
    name="$STUDY-shard-${shard/\//-of-}"
    (cd "$WORK" && timeout -s TERM "$JOB_SECONDS" "$PYTHON" -m electra_ablate run \
        "$KIT/spec.yaml" --data-bundle "$WORK/data" --out "$WORK/study" --shard "$shard" \
        --workers "$WORKERS" --no-progress) 2>&1 | tee "$OUT/$name.log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -ne 2 ] || return 2  # refused (a bad shard, a bad spec): it did nothing to pack
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 143 ] || [ "$rc" -eq 130 ]; then
        echo "shard $shard stopped at the job's limit ($JOB_SECONDS s): its finished work is" \
            "packed; run 'unit $shard' again on this machine to resume" | tee -a "$OUT/$name.log"
    fi
    # the tables and study.json of what finished (a stopped shard has written neither)
    (cd "$WORK" && "$PYTHON" -m electra_ablate run "$KIT/spec.yaml" --data-bundle "$WORK/data" \
        --out "$WORK/study" --collect --no-progress) >>"$OUT/$name.log" 2>&1
    [ -f "$WORK/study/study.json" ] || return "${rc:-1}"
    ablate pack "$WORK/study" --out "$OUT/$name.pack.tar.gz" || return 1
    return "$rc"
}

status=0
setup || { echo "error: the kit could not be set up in $WORK" >&2; exit 1; }
i=0
while [ $i -lt ${#STEPS[@]} ]; do
    step=${STEPS[$i]}
    echo "== $step $( [ "$step" = unit ] && echo "${STEPS[$((i + 1))]:-}")"
    case $step in
        doctor) step_doctor; rc=$? ;;
        test) step_test; rc=$? ;;
        bench) step_bench; rc=$? ;;
        session) step_session; rc=$? ;;
        unit)
            i=$((i + 1))
            if [ $i -ge ${#STEPS[@]} ]; then echo "error: unit needs I/N" >&2; exit 2; fi
            step_unit "${STEPS[$i]}"; rc=$? ;;
        *) echo "error: unknown step '$step' (doctor, test, bench, session, unit I/N)" >&2; exit 2 ;;
    esac
    if [ $rc -ne 0 ] && [ $status -eq 0 ]; then status=$rc; fi
    i=$((i + 1))
done
exit $status
