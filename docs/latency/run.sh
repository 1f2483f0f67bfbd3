#!/usr/bin/env bash
# docs/latency.md's study: the FedLPS MNIST scenarios (FedLPS, FedAvg, HeteroFL, FjORD) on both clocks, on the
# built-in fleet (fedlps_adreno630 at FedLPS's five capability tiers: its roofline under compute: latency) and on a
# fleet of calibrated devices (docs/latency/dev_vm.yaml, the development VM, at the same tiers), two runs at a
# time on one thread each, then testbed compare per fleet and clock against FedAvg. Completed runs are skipped.
# SEEDS and METHODS (space-separated) pick a part, e.g. SEEDS="$(seq -s ' ' 0 9)" docs/latency/run.sh
# Unclipped (AS_MADE), as the study was made: the FjORD scenario clips its gradients since 2026-11-29.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/latency_study}
SEEDS=${SEEDS:-0 1 2}
METHODS=${METHODS:-fedlps fedavg heterofl fjord}
export OMP_NUM_THREADS=1
CALIBRATED=(--set "fleet.catalog=$PWD/docs/latency/dev_vm.yaml" --set fleet.groups.0.profile=dev_vm)
declare -A FILE=([fedlps]=fedlps_mnist [fedavg]=fedlps_mnist_fedavg [heterofl]=fedlps_mnist_heterofl
                 [fjord]=fedlps_mnist_fjord)
AS_MADE="--set client.clip_norm=null"
for m in $METHODS; do
  [ -n "${FILE[$m]+x}" ] || { echo "METHODS: unknown method '$m'; choose from: ${!FILE[*]}" >&2; exit 2; }
done
jobs=()
for seed in $SEEDS; do for m in $METHODS; do
  for setup in builtin:flops builtin:latency calibrated:flops calibrated:latency; do
    fleet=${setup%%:*} clock=${setup##*:}
    extra=()
    [ "$fleet" = calibrated ] && extra=("${CALIBRATED[@]}")
    [ -f "$OUT/$fleet-$clock/${FILE[$m]}/$seed/summary.json" ] && continue
    jobs+=("testbed run scenarios/${FILE[$m]}.yaml --seed $seed --quiet --resume --out $OUT/$fleet-$clock --set compute=$clock ${extra[*]} $AS_MADE")
  done
done; done
printf '%s\n' "${jobs[@]}" | xargs -d '\n' -P 2 -I{} bash -c 'echo "$(date +%T) start {}"; {} > /dev/null 2>&1 || echo "stopped: {}"; echo "$(date +%T) end {}"'
for setup in builtin-flops builtin-latency calibrated-flops calibrated-latency; do
  testbed compare "$OUT/$setup" --baseline fedavg --metric local_accuracy --target 0.8 --target 0.9 \
    --out "docs/latency/$setup" > "docs/latency/$setup.txt"
done
