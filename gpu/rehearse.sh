#!/usr/bin/env bash
# The offline GPU-node path rehearsed on the CPU (CI runs it; a few minutes): a kit for the
# micro study gpu/rehearsal.yaml; a fresh virtual environment holding only CPU torch and the
# packages the kit relies on a node to have (electra_ablate.study.kit.NODE_PACKAGES and NODE_EXTRAS,
# at this environment's versions), so neither polars nor datasets; node.sh there (doctor, test,
# bench, both shards as packs); then `ablate merge` and `ablate report` back here.
#
#   bash gpu/rehearse.sh            (with the project's environment active; REHEARSAL_DIR keeps
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
ABLATE_CACHE="$SCRATCH/cache" ablate kit gpu/rehearsal.yaml --out "$SCRATCH/kit" --python "$version"

echo "== the node's environment: CPU torch and the node's packages only"
pins=$(python - <<'PY'
from importlib.metadata import PackageNotFoundError, version
from electra_ablate.study.kit import NODE_EXTRAS, NODE_PACKAGES

def pin(name: str) -> str:  # this environment's version; any, where it lacks the package
    try:
        return f"{name}=={version(name)}"
    except PackageNotFoundError:
        return name

print(" ".join(pin(n) for n in NODE_PACKAGES + NODE_EXTRAS if n != "torch"))
PY
)
if [ ! -x "$SCRATCH/node-venv/bin/python" ]; then
    python -m venv "$SCRATCH/node-venv"
    # shellcheck disable=SC2086
    "$SCRATCH/node-venv/bin/python" -m pip install -q -c .ci/constraints.txt torch $pins
    # what the kit carries is not on a node, whatever the packages above pulled in
    carried=$(python -c 'from electra_ablate.study.kit import CARRIED; print(" ".join(CARRIED))')
    # shellcheck disable=SC2086
    "$SCRATCH/node-venv/bin/python" -m pip uninstall -q -y $carried
fi
NODE_PY="$SCRATCH/node-venv/bin/python"
for missing in polars datasets electra_ablate pydantic; do
    if (cd "$SCRATCH" && env -u PYTHONPATH "$NODE_PY" -c "import $missing" 2>/dev/null); then
        echo "error: the node's environment has $missing" >&2
        exit 1
    fi
done

echo "== node.sh (there)"
rm -rf "$SCRATCH/out" "$SCRATCH/work"
env -u PYTHONPATH -u VIRTUAL_ENV -u ABLATE_CACHE ABLATE_DATA_DIR="$SCRATCH/no-raw-data" \
    PYTHON="$NODE_PY" WORK="$SCRATCH/work" DEVICE=cpu OMP_NUM_THREADS=1 \
    DOCTOR_ARGS="--no-compile --steps 3" BENCH_ARGS="--preset micro --batch 8 --steps 2 --warmup 1" \
    bash "$SCRATCH/kit/node.sh" "$SCRATCH/kit" "$SCRATCH/out" doctor test bench unit 1/2 unit 2/2

echo "== merge and report (here)"
rm -rf "$SCRATCH/merged"
ablate merge "$SCRATCH"/out/*.pack.tar.gz --into "$SCRATCH/merged"
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
