#!/usr/bin/env bash
# docs/fedlps.md at the paper's data scale (mnist60k): every fedlps_mnist* scenario x seeds 0, 1, 2 into
# runs/fedlps60k, two at a time on one core each. Completed runs are skipped and a run that stopped resumes from
# its checkpoint, so the script can be started again until everything is done. Needs: pip install -e ".[mnist60k]"
# Unclipped (AS_MADE), as the page's table was made: the eFD, FedRolex, FjORD and FedMP
# scenarios clip since 2026-11-29.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
OUT=runs/fedlps60k
AS_MADE="--set data.name=mnist60k --set client.clip_norm=null"
jobs=()
for seed in 0 1 2; do for s in fedlps_mnist fedlps_mnist_fedavg fedlps_mnist_rcr fedlps_mnist_flst fedlps_mnist_heterofl \
    fedlps_mnist_fjord fedlps_mnist_fedrolex fedlps_mnist_efd fedlps_mnist_fedmp; do
  [ -f "$OUT/${s}_60k/$seed/summary.json" ] && continue
  jobs+=("testbed run scenarios/$s.yaml --seed $seed --quiet --resume --out $OUT --set name=${s}_60k $AS_MADE")
done; done
printf '%s\n' "${jobs[@]}" | xargs -d '\n' -P 2 -I{} bash -c 'echo "$(date +%T) start {}"; {} > /dev/null 2>&1 || echo "stopped: {}"; echo "$(date +%T) end {}"'
testbed report $OUT/*/* --metric local_accuracy --target 0.9 --target 0.95 --out $OUT/report
