#!/usr/bin/env bash
# Simulator and scheduler benchmarks. Prints medians of repeated runs; the
# machines are noisy, so compare medians, not single runs.
#   bash bench/sim.sh            # SEAL cycle benchmark (100k waiting, 1k running, 1k endpoints)
#   SLUICE_BENCH_LONG=1 bash bench/sim.sh   # also the 24-hour, 1,000,000-transfer replay
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench 'SEALCycle' -benchtime 20x -count 5 ./sim/ | tee /tmp/sluice-bench.txt
awk '/^Benchmark/ {split($1,a,"-"); n[a[1]]++; v[a[1],n[a[1]]]=$3}
     END {for (k in n) {m=n[k]; for(i=1;i<=m;i++) x[i]=v[k,i]; asort(x); printf "%s median %.2f ms/op over %d runs\n", k, x[int((m+1)/2)]/1e6, m; delete x}}' /tmp/sluice-bench.txt
if [ "${SLUICE_BENCH_LONG:-}" = 1 ]; then
  go test -run '^$' -bench 'Replay24h' -benchtime 1x -timeout 30m ./sim/
fi
