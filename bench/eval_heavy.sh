#!/usr/bin/env bash
# An evaluation-heavy study (bench/eval_heavy.yaml) before and after a change, in one run:
# the study runs twice, one after the other, each in a fresh folder of its own (so neither
# reuses the other's runs), first with the package as it was at git REF (a temporary worktree
# put first on PYTHONPATH), then with this checkout. Prints each side's wall time, its
# evaluation job seconds per task and the headline scores side by side (bench/eval_heavy.py).
#
#   bash bench/eval_heavy.sh REF [PRESET] [ABLATE RUN OPTIONS...]
#   bash bench/eval_heavy.sh 5528dc0 micro
#
# ABLATE_DATA_DIR must name the folder holding corpus/ and glue/. Leave the machine otherwise
# idle while it runs: the two sides are compared by their wall times.
set -euo pipefail
ref="${1:?usage: bash bench/eval_heavy.sh REF [PRESET] [ABLATE RUN OPTIONS...]}"
preset="${2:-micro}"
shift $(($# < 2 ? $# : 2))
root="$(cd "$(dirname "$0")/.." && pwd)"
: "${ABLATE_DATA_DIR:?set ABLATE_DATA_DIR to the folder holding corpus/ and glue/}"
work="$(mktemp -d)"
git -C "$root" worktree add -q --detach "$work/code-before" "$ref"
trap 'git -C "$root" worktree remove --force "$work/code-before"; rm -rf "$work"' EXIT

for side in before after; do
    code="$root" label="this checkout"
    [ "$side" = before ] && code="$work/code-before" label="$ref"
    mkdir -p "$work/$side"
    start=$(date +%s.%N)
    (cd "$work/$side" && PYTHONPATH="$code" python -m electra_ablate run "$root/bench/eval_heavy.yaml" \
        --set "backbone.preset=$preset" --out "$work/$side/study" --workers 1 --no-progress "$@") \
        >"$work/$side.log" 2>&1 || { cat "$work/$side.log" >&2; exit 1; }
    end=$(date +%s.%N)
    python -c "print(f'$side ($label): wall {$end - $start:.1f} s')"
done
python "$root/bench/eval_heavy.py" "$work/before/study" "$work/after/study"
