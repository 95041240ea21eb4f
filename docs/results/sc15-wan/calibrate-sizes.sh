#!/usr/bin/env bash
# The second half of the sc15 network's calibration (see calibrate.sh):
# one stream moving a finite amount, for the sizes the scaled traces
# have (256 KiB to 64 MiB), from Stampede to each destination, REPS
# times each. fit.py fits time = start-up + size / rate per path to them.
#
#   bash docs/results/sc15-wan/calibrate-sizes.sh > /tmp/sizes.json
#   python3 docs/results/sc15-wan/fit.py /tmp/calibration.json /tmp/sizes.json
#
# Needs root, iperf3, jq; about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
REPS=${REPS:-3} SIZES=${SIZES:-256K 1M 4M 16M 64M}
. docs/results/sc15-wan/net.sh
port=5500
for d in $DST; do net exec "$d" -- iperf3 -s -D -p $port >/dev/null; port=$((port + 1)); done
sleep 0.5
echo '{"sizes": ['
port=5500
first=1
for d in $DST; do
	a=$(addr "$d")
	for z in $SIZES; do
		for _ in $(seq "$REPS"); do
			t=$(net exec stampede -- iperf3 -c "$a" -p $port -n "$z" -P 1 -J | jq '.end.sum_received.seconds')
			[ $first = 1 ] || echo ','
			first=0
			printf '{"host": "%s", "bytes": "%s", "seconds": %s}' "$d" "$z" "$t"
		done
	done
	port=$((port + 1))
done
echo ']}'
