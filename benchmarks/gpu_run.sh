#!/usr/bin/env bash
# The one command of a lent GPU session (benchmarks/README.md, "On a lent GPU"): install the carried wheels
# (benchmarks/gpu_wheels.sh fetched them) without the network, then benchmarks/gpu.py on the GPU under a hard
# time limit. Every row lands in $OUT/gpu.jsonl as it comes; the log goes to a file, not through a pipe that the
# kill would take with it.
#   BUDGET=420 bash benchmarks/gpu_run.sh [gpu.py options, e.g. --workloads wcifar --precision exact]
set -u
cd "$(dirname "$0")/.."
BUDGET=${BUDGET:-420}               # seconds of runs that gpu.py plans for
LIMIT=${LIMIT:-$((BUDGET + 120))}   # then killed: data writing and loading, the peak, a run's last round
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
[ "${WHEELS:-1}" = 0 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check --upgrade \
    --target /tmp/site benchmarks/wheels/*.whl || { echo "wheels did not install: run benchmarks/gpu_wheels.sh here"; exit 3; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv > "$OUT/nvidia-smi.csv" 2>&1
# SIGKILL: a run catches SIGTERM to checkpoint, and the machine's time is what we are short of
timeout -s KILL "$LIMIT" python3 benchmarks/gpu.py --device cuda --budget-s "$BUDGET" --out "$OUT" "$@" \
    > "$OUT/gpu.log" 2>&1
rc=$?
cat "$OUT/gpu.log"
echo "gpu.py exit status $rc (137: killed at $LIMIT s)"
exit $rc
