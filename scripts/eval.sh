#!/usr/bin/env bash
# `make eval`: the full comparison on real bytes (the testbed). On the sc15-mini
# testbed, the 45% and 60% traces, three repetitions each, the baselines and
# SEAL, with the simulator's predictions beside the measurements; then STEAL
# against SEAL with batch tasks added (60-hv). Writes docs/results/testbed/
# with the date and the machine description. Takes about two hours here.
set -euo pipefail
BIN=${BIN:-bin/sluice}
OUT=docs/results/testbed
REPS=${SLUICE_EVAL_REPS:-3}
mkdir -p "$OUT"
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
	echo "cpu: $(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ //')"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$OUT/machine.txt"
for tr in 45 60; do
	"$BIN" testbed compare --profile sc15-mini --trace "$tr" --reps "$REPS" --predict \
		--schedulers basecc1,basecc2,basecc4,basevary,seal,seal+ --json >"$OUT/compare-$tr.json"
done
"$BIN" testbed compare --profile sc15-mini --trace 60-hv --reps "$REPS" --predict \
	--schedulers seal,steal --json >"$OUT/steal-60-hv.json"
for tr in 45 60; do
	"$BIN" testbed compare --profile sc15-mini --trace "$tr+batch" --reps "$REPS" --predict \
		--schedulers seal,steal --json >"$OUT/steal-$tr.json"
done
echo "wrote $OUT"
