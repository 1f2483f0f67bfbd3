#!/bin/sh
# The selection study (docs/selection.md): uniform selection against every selector, 3 seeds, on
#  (a) the heterogeneity study's fleet with hidden capability tiers: drawn once (Fix) at the low, medium and high
#      levels, and redrawn every round (Dyn, the heterogeneity study's own) at the high level;
#  (b) Shakespeare on its phone fleet with Markov availability (scenarios/shakespeare.yaml, 20 rounds; its table
#      target is 0.22, selection_table.py's TARGETS);
#  (c) HAR on phones that come and go, against a deadline (scenarios/studies/selection_har.yaml);
#  (d) FedBuff on (c)'s fleet: whether selection and asynchronous aggregation combine (power_of_choice with the
#      losses devices last reported: asynchronous dispatch cannot wait for probes);
# into $OUT/<setup>/<setup>-<selector>/<seed>/, then the table (scenarios/studies/selection_table.py).
# FedCS needs a deadline: (a) has none, so FedCS gets its own, selection.options.deadline_s (below).
set -e
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/studies/selection}
JOBS=${JOBS:-2}
SEEDS=${SEEDS:-[0,1,2]}
SYNC=${SYNC:-[uniform,oort,tifl,fedcs,power_of_choice,availability]}
SHAKESPEARE_SEEDS=${SHAKESPEARE_SEEDS:-$SEEDS}
SHAKESPEARE_SELECTORS=${SHAKESPEARE_SELECTORS:-$SYNC}
NO_FEDCS=${NO_FEDCS:-[uniform,oort,tifl,power_of_choice,availability]}
ASYNC=${ASYNC:-[uniform,oort,availability]}
# THREADS=N: every run on N torch threads (after the study's own --set, Shakespeare's too): the same runs in another
# float summation order, for `testbed compare OUT/<setup> --baseline selection=uniform --against OUT2/<setup>`
sweep() { testbed sweep "$@" ${THREADS:+--set executor.threads=$THREADS} --out "$OUT" --jobs "$JOBS" --quiet > /dev/null; }

# in order of what the study needs most, so a partial run (interrupted, or STEPS shortened) has the most
HAR=scenarios/studies/selection_har.yaml
HET=scenarios/studies/selection_heterogeneity.yaml
FEDBUFF='protocol={kind: async, concurrency: 7, buffer_size: 5}'
het() {  # het <setup> <sets...>: every selector on the heterogeneity fleet
  setup=$1; shift
  sweep $HET --grid "selection.name=$NO_FEDCS" --grid "seed=$SEEDS" --set name=$setup "$@"
  sweep $HET --grid "seed=$SEEDS" --set selection.name=fedcs --set selection.options.deadline_s=0.05 \
    --set name=$setup-fedcs "$@"
}
for step in ${STEPS:-har fedbuff fix_low fix_high fix_medium shakespeare dyn_high}; do
  case $step in
    har) sweep $HAR --grid "selection.name=$SYNC" --grid "seed=$SEEDS" --set name=har ;;
    fedbuff)
      sweep $HAR --grid "selection.name=$ASYNC" --grid "seed=$SEEDS" --set "$FEDBUFF" --set name=har_fedbuff
      sweep $HAR --grid "seed=$SEEDS" --set "$FEDBUFF" --set selection.name=power_of_choice \
        --set selection.options.loss=reported --set name=har_fedbuff-power_of_choice ;;
    fix_*) het het_$step --set fleet.heterogeneity=${step#fix_} ;;
    dyn_high) het het_dyn_high --set fleet.heterogeneity=high --set fleet.groups.0.resample_tiers_each_round=true ;;
    shakespeare)
      sweep scenarios/shakespeare.yaml --grid "selection.name=$SHAKESPEARE_SELECTORS" \
        --grid "seed=$SHAKESPEARE_SEEDS" --set stop.max_rounds=20 --set eval.every_rounds=4 \
        --set executor.threads=1 --set name=shakespeare ;;
  esac
done

python scenarios/studies/selection_table.py "$OUT" docs/selection/table.csv
