#!/bin/sh
# The runs behind docs/feddumap.md: FedDUMAP, its ablations and the server-data baselines, one at a time, every
# method on seed 0 first, then seeds 1 and 2. A run folder with a summary.json is skipped.
for seed in 0 1 2; do
  for method in feddumap fedavg feddu feddum fedap hybrid_fl data_sharing; do
    [ -f runs/fdm_$method/$seed/summary.json ] && continue
    OMP_NUM_THREADS=1 nice -n 10 testbed run scenarios/feddumap.yaml --seed $seed --quiet --out runs \
      --set name=fdm_$method --set algorithm.name=$method > /dev/null
  done
done
testbed report runs/fdm_*/* --target 0.8 --target 0.9 --out report/feddumap
