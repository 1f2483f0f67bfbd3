#!/bin/sh
# The network study (docs/network.md), 3 seeds each, into $OUT/<setup>/<setup>-<variant>/<seed>/, then its table
# (scenarios/studies/network_table.py):
#  burst:    (1) synchronous FedAvg with cnn_512 on the quickstart's fleet, private links against shared cells
#            (scenarios/studies/network_cells.yaml);
#  fedbuff:  (2) FedBuff (K = 10) on that fleet through the shared cells and server link, 10, 20, 50 and 100 in
#            flight (scenarios/studies/network_fedbuff.yaml), and the same on private links;
#  hierfavg: (3) HierFAVG against flat FedAvg on ten cells with a slow backhaul (scenarios/hierfavg.yaml), 8 cloud
#            rounds of 2 edge rounds against 16 flat rounds of the same updates.
set -e
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/studies/network}
JOBS=${JOBS:-2}
SEEDS=${SEEDS:-[0,1,2]}
CONCURRENCY=${CONCURRENCY:-[10,20,50,100]}
# THREADS=N: every run on N torch threads: the same runs in another float summation order (testbed compare --against)
sweep() { testbed sweep "$@" ${THREADS:+--set executor.threads=$THREADS} --out "$OUT" --jobs "$JOBS" --quiet > /dev/null; }
CELLS=scenarios/studies/network_cells.yaml
FEDBUFF=scenarios/studies/network_fedbuff.yaml
for step in ${STEPS:-burst fedbuff hierfavg}; do
  case $step in
    burst)
      sweep $CELLS --grid "seed=$SEEDS" --set name=burst-shared
      sweep $CELLS --grid "seed=$SEEDS" --set network=null --set name=burst-private ;;
    fedbuff)
      sweep $FEDBUFF --grid "protocol.concurrency=$CONCURRENCY" --grid "seed=$SEEDS" --set name=fedbuff-shared
      sweep $FEDBUFF --grid "protocol.concurrency=$CONCURRENCY" --grid "seed=$SEEDS" --set network=null \
        --set name=fedbuff-private ;;
    hierfavg)
      sweep scenarios/hierfavg.yaml --grid "seed=$SEEDS" --set stop.max_rounds=8 --set name=hierfavg-hierfavg
      # flat FedAvg through the same cells, whose transfers now cross the backhaul: as many updates (10 kept a
      # round of 20 selected, as 10 cells keep 1 of 2 each edge round) and rounds (8 cloud rounds x 2 edge rounds)
      sweep scenarios/hierfavg.yaml --grid "seed=$SEEDS" --set "protocol={kind: sync}" \
        --set round.clients_per_round=10 --set stop.max_rounds=16 --set name=hierfavg-flat ;;
  esac
done

python scenarios/studies/network_table.py "$OUT" docs/network/table.csv
