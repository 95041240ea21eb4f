#!/usr/bin/env bash
# SC'15 on real TCP: the live service (real server, one real agent per
# DTN) replays the SC'15 traces over the sc15 network profile, every
# file verified, each run beside the simulator's prediction of it
# (--predict, from the sc15-wan testbed that calibrate.sh fitted).
#
#   bash docs/results/sc15-wan/run.sh             # traces 25, 45 and 60, then STEAL
#   TRACES="25 45 60" REPS=3 bash docs/results/sc15-wan/run.sh
#
# One run of one scheduler takes about 3.5 minutes (a 15-minute trace
# compressed 5 times, plus the tail); keep the machine otherwise idle:
# the forwarder and the agents share its two cores. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../../.."
TRACES=${TRACES:-25 45 60} REPS=${REPS:-1}
SCHEDULERS=${SCHEDULERS:-basecc1,basecc2,basecc4,basevary,seal,seal+}
OUT=docs/results/sc15-wan
go build -o bin/sluice ./cmd/sluice
for t in $TRACES; do
	bin/sluice testbed compare --profile sc15-wan --net sc15 --trace "$t" --reps "$REPS" \
		--schedulers "$SCHEDULERS" --predict --json > "$OUT/compare-$t.json"
	bin/sluice testbed compare --from "$OUT/compare-$t.json" > "$OUT/compare-$t.txt"
done
if [ "${STEAL:-1}" = 1 ]; then
	# STEAL against SEAL1 and BaseVary with SC'15 §6.4's batch transfers.
	bin/sluice testbed compare --profile sc15-wan --net sc15 --trace 45+batch --reps "$REPS" \
		--schedulers seal,basevary,steal --predict --json > "$OUT/steal-45.json"
	bin/sluice testbed compare --from "$OUT/steal-45.json" > "$OUT/steal-45.txt"
fi
