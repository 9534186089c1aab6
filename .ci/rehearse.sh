#!/usr/bin/env bash
# The offline GPU-node path rehearsed on the CPU (CI runs it; a few minutes): a kit for the
# micro study .ci/rehearsal.yaml; a virtual environment holding only CPU torch and the packages
# the kit relies on a node to have (.ci/node_env.py: electra_ablate.scaleout.kit's NODE_PACKAGES
# and NODE_EXTRAS with what they require, linked from this environment), so neither polars nor
# datasets; node.sh there: sessions (`node.sh KIT OUT session`): a whole one; on the one-card
# schedule one whose deadline cuts evaluations (its kept encoders come back as parts), and while
# its workers are paused for that cut, both shards as packs, one session whose deadline leaves no
# time for the study, one stopped by SIGTERM while pre-training and one killed (SIGKILL) during
# evaluation; then one on a second kit carrying the whole session's compile cache that is given
# the cut one's parts and pack (`--reuse`) and finishes the cut evaluations without
# pre-training, and one whose pack cannot be written (a folder at its name); each checked by
# .ci/check_session.py (at most 8 files, a truthful session.json that names no file that is not
# there, packs that merge); then `ablate merge` and `ablate report` back here.
#
#   bash .ci/rehearse.sh            (with the project's environment active; REHEARSAL_DIR keeps
#                                    the files, default a temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
export ABLATE_DATA_DIR="${ABLATE_DATA_DIR:-$(cd .. && pwd)/shared/data}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
SCRATCH=${REHEARSAL_DIR:-$(mktemp -d)}
mkdir -p "$SCRATCH"
SCRATCH=$(cd "$SCRATCH" && pwd)
python -c 'import electra_ablate' || { echo "error: activate the project's environment" >&2; exit 2; }

echo "== kit (here)"
version=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
rm -rf "$SCRATCH/kit"
ABLATE_CACHE="$SCRATCH/cache" ablate kit .ci/rehearsal.yaml --out "$SCRATCH/kit" --python "$version"

echo "== the node's environment: CPU torch and the node's packages only (.ci/node_env.py)"
[ -x "$SCRATCH/node-venv/bin/python" ] || python .ci/node_env.py "$SCRATCH/node-venv"
NODE_PY="$SCRATCH/node-venv/bin/python"
for missing in polars datasets electra_ablate pydantic; do
    if (cd "$SCRATCH" && env -u PYTHONPATH "$NODE_PY" -c "import $missing" 2>/dev/null); then
        echo "error: the node's environment has $missing" >&2
        exit 1
    fi
done

node() {  # node OUT STEP...: node.sh as the node runs it (its Python only, no raw data), from
    local out=$1  # the kit NODE_KIT (default: the first)
    shift
    local kit=${NODE_KIT:-$SCRATCH/kit}
    env -u PYTHONPATH -u VIRTUAL_ENV -u ABLATE_CACHE -u ABLATE_COMPILE_CACHE \
        ABLATE_DATA_DIR="$SCRATCH/no-raw-data" \
        PYTHON="$NODE_PY" WORK="$SCRATCH/work" DEVICE=cpu OMP_NUM_THREADS=1 REPO="$PWD" \
        DOCTOR_ARGS="--no-compile --steps 3" BENCH_ARGS="--preset micro --batch 8 --steps 2 --warmup 1" \
        SESSION_BENCH_ARGS="--preset micro --batch 8 --steps 2 --warmup 1 --no-memory" \
        SESSION_WORKERS=2 bash "$kit/node.sh" "$kit" "$out" "$@"
}
check() {  # check OUT RC EXPECTATION [MORE]: what a session left (.ci/check_session.py)
    python .ci/check_session.py "$1" "$2" --expect "$3" "${@:4}"
}
kit_work() {  # kit_work KIT: the node's WORK of that kit (node.sh: one per kit.json)
    echo "$SCRATCH/work/kit-$(sha256sum "$1/kit.json" | cut -c1-12)"
}
pause_evaluations() {  # pause_evaluations STUDY: once an evaluation runs, pause the study's
    local study=$1 i p  # workers (its process group but its leader): PAUSED holds the group
    for i in $(seq 1500); do
        grep -qE '"event": "start".*"kind": "(finetune|probe)"' "$study/schedule.jsonl" \
            2>/dev/null && break
        sleep 0.2
    done
    PAUSED=$(pgrep -f -- "--out $study .*--workers" | head -1) || true
    [ -n "$PAUSED" ] || { echo "no study in flight in $study to pause" >&2; return 0; }
    for p in $(pgrep -g "$PAUSED"); do [ "$p" = "$PAUSED" ] || kill -STOP "$p"; done
    echo "an evaluation is in flight in $study: its workers paused until the deadline"
}
session_field() {  # session_field OUT PYTHON-EXPRESSION-OF-r: polls a live session.json
    python -c "import json,sys; r=json.load(open(sys.argv[1]+'/session.json')); print($2)" "$1" 2>/dev/null
}
tree() {  # tree PID: PID and every process below it
    local child
    echo "$1"
    for child in $(pgrep -P "$1"); do tree "$child"; done
}
stop_session() {  # stop_session OUT SIGNAL CONDITION: signal node.sh when CONDITION holds
    local out=$1 sig=$2 cond=$3 i root
    for i in $(seq 600); do
        [ "$(session_field "$out" "$cond")" = True ] && break
        sleep 0.5
    done
    root=$(pgrep -f -- "node.sh $SCRATCH/kit $out " | head -1) || true
    [ -n "$root" ] || return 0
    if [ "$sig" = KILL ]; then  # everything, at once: node.sh, the session and its children
        # shellcheck disable=SC2046
        kill -KILL $(tree "$root") 2>/dev/null || true
    else  # node.sh alone: it passes the signal on and waits for the session
        kill "-$sig" "$root" || true
    fi
}
other_sessions() {  # the units and three sessions, while the cut session's workers are paused
    echo "== node.sh (there): units"
    node "$SCRATCH/out" unit 1/2 unit 2/2
    # a deadline that leaves no time for the study
    rc=0; SESSION_SECONDS=25 SESSION_ARGS="--ladder 1e9 --doctor-steps 3" \
        node "$SCRATCH/session-short" session || rc=$?
    check "$SCRATCH/session-short" $rc skipped-study
    # SIGTERM to node.sh while the pair pre-trains (a rung far too long for the session)
    SESSION_SECONDS=300 SESSION_ARGS="--ladder 1e12 --phases plan,study --pack-every 5" \
        node "$SCRATCH/session-term" session &
    pid=$!
    stop_session "$SCRATCH/session-term" TERM "r['phases'].get('study',{}).get('packed_at_s',0)>0"
    rc=0; wait $pid || rc=$?
    check "$SCRATCH/session-term" $rc stopped
    # SIGKILL of everything once evaluations are packed: the last pack and record stand
    # (3e11: pre-training long enough that evaluations are packed well before the study ends)
    SESSION_SECONDS=300 SESSION_ARGS="--ladder 3e11 --phases plan,study --pack-every 2" \
        node "$SCRATCH/session-kill" session &
    pid=$!
    stop_session "$SCRATCH/session-kill" KILL \
        "r['phases'].get('study',{}).get('evaluations',{}).get('done',0)>0"
    rc=0; wait $pid || rc=$?
    check "$SCRATCH/session-kill" $rc killed
}

export SCRATCH NODE_PY  # node() runs in child shells too
echo "== node.sh (there): sessions"
rm -rf "$SCRATCH"/session-* "$SCRATCH/out" "$SCRATCH/work"
# a whole session: every phase, the study at the largest rung that fits
# (with a study override, as a stretch adds fine-tuning seeds: the run and every collect get it)
rc=0; SESSION_SECONDS=300 SESSION_ARGS="--ladder 1e9,3e9 --doctor-steps 3 --set finetune.seeds=[0,1]" \
    node "$SCRATCH/session-whole" session || rc=$?
check "$SCRATCH/session-whole" $rc finished

# On one card (the schedule forced): the deadline cuts evaluations of finished runs, their
# kept encoders come back as parts. The workers are paused once an evaluation is in flight
# (SIGSTOP) and go on (SIGCONT) only after the deadline has stopped the study, so the cut is
# certain whatever this machine's speed. Meanwhile a second kit is made here, carrying the
# compile cache the whole session saved, and the pause, which would leave the machine idle
# until the deadline, runs the units and the other sessions (other_sessions, logged apart;
# stopped in turn while the cut session packs after its deadline).
ONE_CARD="--set schedule.shape=one_card --set finetune.recipe.epochs=30"
CUT_SECONDS=130  # the study's least 60 s after the 60 s kept for its last pack, and setup
started=$(date +%s)
SESSION_SECONDS=$CUT_SECONDS SESSION_ARGS="--phases study --ladder 2e9 --pack-every 10 $ONE_CARD" \
    node "$SCRATCH/session-cut" session &
pid=$!
rm -rf "$SCRATCH/kit-cache"
ABLATE_CACHE="$SCRATCH/cache" ablate kit .ci/rehearsal.yaml --out "$SCRATCH/kit-cache" \
    --python "$version" --compile-cache "$SCRATCH/session-whole/compile-cache.tar.xz" &
kit_pid=$!
pause_evaluations "$(kit_work "$SCRATCH/kit")/study-2e09"
other_sessions >"$SCRATCH/other-sessions.log" 2>&1 &
others_pid=$!
while [ "$(date +%s)" -lt $((started + CUT_SECONDS - 60 + 2)) ]; do sleep 0.5; done
# the cut session's last minute is its own: the others wait (SIGSTOP) until it has packed
others=$(tree $others_pid)
# shellcheck disable=SC2086
kill -STOP $others 2>/dev/null || true
[ -z "${PAUSED:-}" ] || kill -CONT -- "-$PAUSED" 2>/dev/null || true
rc=0; wait $pid || rc=$?
# shellcheck disable=SC2086
kill -CONT $others $(tree $others_pid) 2>/dev/null || true
check "$SCRATCH/session-cut" $rc cut --one-card
wait $kit_pid
rc=0; wait $others_pid || rc=$?
cat "$SCRATCH/other-sessions.log"
[ "$rc" = 0 ] || { echo "error: the units or the other sessions failed (above)" >&2; exit 1; }
# the next stretch: the cut session's parts and its pack merged (as a user brings them back),
# carried with the second kit; nothing pre-trains, the cut evaluations finish
rm -rf "$SCRATCH/reuse" && mkdir -p "$SCRATCH/reuse"
cp "$SCRATCH"/session-cut/*.kept.part* "$SCRATCH/reuse/"
ablate merge "$SCRATCH"/session-cut/*.pack.tar.gz --into "$SCRATCH/reuse/rehearsal-2e09"
rm -rf "$(kit_work "$SCRATCH/kit-cache")"  # a fresh machine
rc=0; NODE_KIT="$SCRATCH/kit-cache" SESSION_SECONDS=300 \
    SESSION_ARGS="--phases study --ladder 2e9 $ONE_CARD --reuse $SCRATCH/reuse" \
    node "$SCRATCH/session-reuse" session || rc=$?
check "$SCRATCH/session-reuse" $rc reused --one-card --after "$SCRATCH/session-cut"
# a pack that cannot be written (a folder sits at its name): the session fails and says why
mkdir -p "$SCRATCH/session-refused/rehearsal-2e09.pack.tar.gz"
rc=0; NODE_KIT="$SCRATCH/kit-cache" SESSION_SECONDS=300 \
    SESSION_ARGS="--phases study --ladder 2e9 $ONE_CARD" node "$SCRATCH/session-refused" session ||
    rc=$?
check "$SCRATCH/session-refused" $rc pack-refused

echo "== merge and report (here)"
rm -rf "$SCRATCH/merged"
ablate merge "$SCRATCH"/out/*.pack.tar.gz --into "$SCRATCH/merged"
rm -rf "$SCRATCH/merged-session"
ablate merge "$SCRATCH"/session-whole/*.pack.tar.gz --into "$SCRATCH/merged-session"
ablate report "$SCRATCH/merged-session"
ablate report "$SCRATCH/merged"
python - "$SCRATCH/merged" <<'PY'
import sys
import polars as pl
results = pl.read_parquet(f"{sys.argv[1]}/results.parquet")
done = pl.read_parquet(f"{sys.argv[1]}/runs.parquet").filter(pl.col("status") == "done")
assert set(done["objective"]) >= {"bert_mlm", "electra"}, done
assert set(results["task"]) == {"rte", "rtd_unigram", "rte_probe"}, results["task"].unique()
assert set(results["objective"]) >= {"bert_mlm", "electra", "none"}, results["objective"].unique()
print(f"rehearsal passed: {len(results)} result rows from {len(done)} finished units")
PY
python - "$SCRATCH/merged-session" <<'PY'
import sys
import polars as pl
results = pl.read_parquet(f"{sys.argv[1]}/results.parquet").filter(pl.col("task") == "rte")
seeds = {(o, s) for o, s in results.select("objective", "finetune_seed").iter_rows()}
expected = {(o, s) for o in ("bert_mlm", "electra", "none") for s in (0, 1)}
assert seeds == expected, f"the session's --set finetune.seeds=[0,1] did not reach the study: {seeds}"
print("the session's study override reached the study: rte at fine-tuning seeds 0 and 1")
PY
