#!/usr/bin/env bash
# Reproduces docs/async.md: 4 protocols x 4 fleets x 3 seeds = 48 runs of scenarios/studies/async.yaml, two at a
# time (one thread each), then the comparison table and plots (all runs, then each fleet's). About 25 minutes on 2 cores.
# SEEDS, FLEETS, PROTOCOLS (space-separated) pick a part, e.g. the 10-seed re-check of one fleet:
#   SEEDS="$(seq -s ' ' 0 9)" FLEETS=medium PROTOCOLS="sync fedbuff_c10" COMPARE=runs/async10 docs/async/run.sh
# COMPARE: where the comparisons go (docs/async by default); THREADS=N runs every run on N torch threads, the same
# runs in another float summation order (for `testbed compare ... --against`).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/async}
COMPARE=${COMPARE:-docs/async}
SEEDS=${SEEDS:-0 1 2}
FLEETS=${FLEETS:-low medium high markov}
PROTOCOLS=${PROTOCOLS:-sync fedbuff_c10 fedbuff_c20 fedasync_c10}
export OMP_NUM_THREADS=1
MARKOV='{kind: markov, mean_on_s: 60, mean_off_s: 30}'
declare -A PROTOCOL=(
  [sync]='{kind: sync}'
  [fedbuff_c10]='{kind: async, concurrency: 10, buffer_size: 10}'
  [fedbuff_c20]='{kind: async, concurrency: 20, buffer_size: 10}'
  [fedasync_c10]='{kind: async, concurrency: 10, buffer_size: 1, mixing: 0.5, staleness: {kind: polynomial, a: 0.5}}'
)
for fleet in $FLEETS; do   # a misspelt name: one line, exit 2, before any run
  case $fleet in low|medium|high|markov) ;; *) echo "FLEETS: unknown fleet '$fleet'; choose from: low medium high markov" >&2; exit 2 ;; esac
done
for protocol in $PROTOCOLS; do
  [ -n "${PROTOCOL[$protocol]+x}" ] || { echo "PROTOCOLS: unknown protocol '$protocol'; choose from: ${!PROTOCOL[*]}" >&2; exit 2; }
done
threads=()
[ -n "${THREADS:-}" ] && threads=(--set "executor.threads=$THREADS")
jobs=()
for fleet in $FLEETS; do
  level=$([ "$fleet" = markov ] && echo high || echo "$fleet")
  availability=()
  if [ "$fleet" = markov ]; then
    availability=(--set "fleet.groups.0.availability=$MARKOV" --set "fleet.groups.1.availability=$MARKOV"
                  --set "fleet.groups.2.availability=$MARKOV")
  fi
  for protocol in $PROTOCOLS; do
    for seed in $SEEDS; do
      jobs+=("$(printf '%q ' testbed run scenarios/studies/async.yaml --quiet --out "$OUT" --seed "$seed" \
        --set "name=async_${protocol}_${fleet}" --set "fleet.heterogeneity=$level" \
        --set "protocol=${PROTOCOL[$protocol]}" "${availability[@]}" "${threads[@]}")")
    done
  done
done
printf '%s\n' "${jobs[@]}" | xargs -d '\n' -P 2 -I{} bash -c '{} > /dev/null'
testbed compare "$OUT"/async_*/[0-9] --target 0.9 --out "$COMPARE"
for fleet in $FLEETS; do   # one figure per fleet: four lines each
  testbed compare "$OUT"/async_*_"$fleet"/[0-9] --target 0.9 --baseline "async_sync_$fleet" --out "$COMPARE/$fleet"
done
