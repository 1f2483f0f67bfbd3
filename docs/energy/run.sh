#!/usr/bin/env bash
# Reproduces docs/energy.md: FedAvg, FedLPS, HeteroFL and FedAdam-SSM on scenarios/studies/energy.yaml (60 phones
# on batteries, with memory budgets), 3 seeds each, two runs at a time (one thread each), then the comparison.
# About 25 minutes on 2 cores (FedLPS's runs are the long ones).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/energy}
export OMP_NUM_THREADS=1
declare -A LR=([fedavg]=0.05 [fedlps]=0.05 [heterofl]=0.05 [fedadam_ssm]=0.001)
jobs=()
for method in fedlps fedavg heterofl fedadam_ssm; do
  for seed in 0 1 2; do
    jobs+=("$(printf '%q ' testbed run scenarios/studies/energy.yaml --quiet --out "$OUT" --seed "$seed" \
      --set "name=energy_${method}" --set "algorithm.name=${method}" --set "client.lr=${LR[$method]}")")
  done
done
printf '%s\n' "${jobs[@]}" | xargs -d '\n' -P 2 -I{} bash -c '{} > /dev/null'
testbed compare "$OUT"/energy_*/[0-9] --target 0.9 --target 0.95 --baseline fedavg --out docs/energy
