#!/usr/bin/env bash
# Calibrates the simulator's model of the sc15 network profile from the
# network's own tools, never from a scheduler's run: iperf3 over the
# emulated WAN (package wan), Stampede sending to each destination.
#
#   bash docs/results/sc15-wan/calibrate.sh > docs/results/sc15-wan/calibration.json
#   jq .testbed docs/results/sc15-wan/calibration.json > sim/testbeds/sc15-wan.json
#
# Measures, medians of REPS runs of SECS seconds each:
#  - per destination, the aggregate of 1, 2, 4 and 8 parallel streams
#    (a stream's rate, and where the destination's NIC caps the sum);
#  - the source's aggregate with every destination receiving at once,
#    1, 2, 4 and 8 streams each (5 to 40 connections: does it decline?);
#  - per destination, one stream moving a finite SIZE_SMALL: the time
#    beyond what the steady rate explains is the start-up cost of a
#    connection on that path (handshakes, slow start).
# Then prints the simulator testbed derived from them (fit.py) as the
# "testbed" member. Needs root, iperf3, jq, python3; about 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
REPS=${REPS:-3} SECS=${SECS:-8} SIZE_SMALL=${SIZE_SMALL:-8M}
. docs/results/sc15-wan/net.sh
port=5400
for d in $DST; do
	for i in 0 1; do net exec "$d" -- iperf3 -s -D -p $((port + i)) >/dev/null; done
	port=$((port + 10))
done
sleep 0.5
mbps() { jq '.end.sum_received.bits_per_second / 1e6'; }
# One timed iperf3 from stampede: to host $1, port $2, then iperf3 flags.
client() { local h=$1 p=$2; shift 2; net exec stampede -- iperf3 -c "$(addr "$h")" -p "$p" -J "$@"; }
median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
{
echo '{"paths": ['
first=1
port=5400
for d in $DST; do
	[ $first = 1 ] || echo ','
	first=0
	printf '{"host": "%s", "streams": {' "$d"
	sep=''
	for P in 1 2 4 8; do
		rs=()
		for _ in $(seq "$REPS"); do rs+=("$(client "$d" $port -t "$SECS" -P $P | mbps)"); done
		printf '%s"%d": {"runs": [%s], "median_mbps": %s}' "$sep" $P "$(IFS=,; echo "${rs[*]}")" "$(median "${rs[@]}")"
		sep=', '
	done
	ts=()
	for _ in $(seq "$REPS"); do
		ts+=("$(client "$d" $port -n "$SIZE_SMALL" -P 1 | jq '.end.sum_received.seconds')")
	done
	printf '}, "small": {"bytes": "%s", "seconds": [%s], "median_seconds": %s}}' "$SIZE_SMALL" "$(IFS=,; echo "${ts[*]}")" "$(median "${ts[@]}")"
	port=$((port + 10))
done
echo '], "source": {'
sep=''
for P in 1 2 4 8; do
	rs=()
	for _ in $(seq "$REPS"); do
		port=5401
		pids=()
		tmp=$(mktemp -d)
		for d in $DST; do
			client "$d" $port -t "$SECS" -P $P > "$tmp/$d" &
			pids+=($!)
			port=$((port + 10))
		done
		wait "${pids[@]}"
		rs+=("$(cat "$tmp"/* | jq -s 'map(.end.sum_received.bits_per_second) | add / 1e6')")
		rm -rf "$tmp"
	done
	printf '%s"%d": {"runs": [%s], "median_mbps": %s}' "$sep" $P "$(IFS=,; echo "${rs[*]}")" "$(median "${rs[@]}")"
	sep=', '
done
echo '}}'
} > /tmp/sc15-calibration.json
python3 docs/results/sc15-wan/fit.py /tmp/sc15-calibration.json
