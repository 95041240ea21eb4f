#!/usr/bin/env bash
# Scheduler and simulator benchmarks. The machines are noisy: this prints
# the median of repeated runs; compare medians, not single runs.
#
#   bash bench/sim.sh                      # SEAL cycle, 100k waiting / 1k running / 1k endpoints
#   SLUICE_BENCH_LONG=1 bash bench/sim.sh  # also the 24-hour, 1,000,000-transfer replay under SEAL
#
# Targets: one SEAL cycle under 50 ms median; the replay under 60 s.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench 'SEALCycle' -benchtime 5x -count "$runs" ./sim/ | tee "$out"
echo
echo "median ms per SEAL cycle (over $runs runs of 5 cycles):"
grep '^BenchmarkSEALCycle' "$out" | awk '{print $1, $3/1e6}' | sort -k1,1 -k2,2n |
  awk '{v[$1]=v[$1]" "$2; n[$1]++} END {for (k in v) {split(substr(v[k],2), a, " "); printf "  %-50s %8.1f ms (decisions per cycle: see above)\n", k, a[int((n[k]+1)/2)]}}' | sort
if [ "${SLUICE_BENCH_LONG:-}" = 1 ]; then
  echo
  echo "24-hour replay of ${SLUICE_BENCH_N:-1000000} transfers over 100 endpoints under SEAL (one run; minutes long):"
  go test -run '^$' -bench 'Replay24h' -benchtime 1x -timeout 60m ./sim/ | grep -E '^Benchmark|^ok'
fi
