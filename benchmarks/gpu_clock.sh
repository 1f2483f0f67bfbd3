#!/usr/bin/env bash
# The latency clock on a lent GPU (issue 43), in one device call beside issue 35's gpu_run.sh:
#   1. testbed calibrate --device cuda (the command a user runs) writes $OUT/gpu_profile.yaml;
#   2. clock_fidelity.py --device cuda: calibration alternated with the cases' real steps, every measurement kept
#      in $OUT/fidelity.json.gz (replay it on any machine: clock_fidelity.py --replay), its report in fidelity.log;
#   3. gpu_run.sh (the testbed against a bare loop), at GPU_BUDGET seconds, into $OUT/gpu.*.
# Each part runs under its own SIGKILL limit, so one that breaks or overruns leaves the others their time.
# A dry run here, before the call: DEVICE=cpu WHEELS=0 CAL=10 FID=10 GPU_BUDGET=30 bash benchmarks/gpu_clock.sh
#   device call: command "CAL=30 FID=90 GPU_BUDGET=90 bash benchmarks/gpu_clock.sh", carry [benchmarks/wheels],
#   timeout_s 580: at most 90 + 270 + 170 s of parts (about 11 minutes with the start; README.md, "On a lent GPU")
set -u
cd "$(dirname "$0")/.."
CAL=${CAL:-30} FID=${FID:-90} GPU_BUDGET=${GPU_BUDGET:-90} DEVICE=${DEVICE:-cuda} WHEELS=${WHEELS:-1}
export OUT=$(realpath -m "${OUT:-gpu-results}")
mkdir -p "$OUT"
[ "$WHEELS" = 0 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check --upgrade \
    --target /tmp/site benchmarks/wheels/*.whl || { echo "wheels did not install: run benchmarks/gpu_wheels.sh here"; exit 3; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
timeout -s KILL $((CAL + 60)) python3 -m testbed calibrate --device "$DEVICE" --budget "$CAL" --quiet \
    --out "$OUT/gpu_profile.yaml" > "$OUT/calibrate.log" 2>&1
echo "testbed calibrate exit status $?"; tail -5 "$OUT/calibrate.log"
# the fidelity run: its first round is 0.36 x FID seconds, then 2 rounds of calibration and cases, 2 of cases alone
(cd benchmarks && timeout -s KILL $((FID * 2 + 90)) python3 clock_fidelity.py --device "$DEVICE" --budget "$FID" \
    --rounds 2 --case-rounds 2 --save "$OUT/fidelity.json.gz" > "$OUT/fidelity.log" 2>&1)
echo "clock_fidelity exit status $?"; grep -E "clock|traced|op names|factor|measurements" "$OUT/fidelity.log" | tail -30
[ "$GPU_BUDGET" -gt 0 ] || exit 0   # GPU_BUDGET=0: the clock alone
BUDGET=$GPU_BUDGET LIMIT=$((GPU_BUDGET + 80)) WHEELS=$WHEELS bash benchmarks/gpu_run.sh --workloads w1,wcifar --precision exact,bf16 \
    --rounds 3 --device "$DEVICE" "$@" | tail -40
