#!/bin/sh
# Study 2: FedAvg and FedAdam-SSM, each always-on / Markov on/off / FedScale-format trace, seeds 0 1 2, into
# runs/studies/availability/<scenario>-<availability>/<seed>/; then the comparison (docs/availability.md).
# executor.threads=2: two torch threads, the default when these tables were made (one since issue 27): a CNN rounds differently on another count.
# THREADS=N overrides it: the same runs in another summation order, for testbed compare --against (README).
set -e
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/studies/availability}
for alg in fedavg fedadam_ssm; do
  for avail in always_on markov trace; do
    case $avail in
      always_on) spec='{kind: always_on}' ;;
      markov) spec='{kind: markov, mean_on_s: 10, mean_off_s: 20}' ;;
      trace) spec='{kind: trace, format: fedscale, file: phone_sessions.json}' ;;
    esac
    for seed in 0 1 2; do
      testbed run scenarios/studies/availability_$alg.yaml --seed $seed --out "$OUT" --quiet \
        --set name=availability_$alg-$avail --set executor.threads=2 \
        --set "fleet.groups.0.availability=$spec" --set "fleet.groups.1.availability=$spec" \
        ${THREADS:+--set executor.threads=$THREADS} > /dev/null
    done
  done
done
testbed compare "$OUT"/*/* --target 0.8 --target 0.9 --out "$OUT-compare"
