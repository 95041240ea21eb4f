#!/usr/bin/env bash
# Throughput against parallel TCP streams over the emulated WAN (package
# wan, docs/wan.md): for each profile, iperf3 from host a to host b with
# 1, 2, 4, 8, 16 and 32 streams, beside the window/RTT bound (n streams
# of at most the receiver's tcp_rmem maximum each per round trip, capped
# at the link rate); then the forwarder's ceiling: 8 streams over 50 ms
# RTT with no rate limit at MTU 9000 (and 1500), with the forwarder's CPU.
#
#   bash bench/wan.sh                               # wan-untuned, intercontinental
#   PROFILES=wan-tuned,campus SECONDS_PER_RUN=6 bash bench/wan.sh
#
# Needs root, iperf3 and jq. Uses its own prefix (slcb-), so a network
# brought up with `sluice net up` is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILES=${PROFILES:-wan-untuned,intercontinental}
STREAMS=${STREAMS:-1 2 4 8 16 32}
T=${SECONDS_PER_RUN:-10}
BIN=${BIN:-bin/sluice}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/sluice
for t in iperf3 jq; do command -v $t >/dev/null || { echo "bench/wan.sh: needs $t" >&2; exit 1; }; done
[ "$(id -u)" = 0 ] || { echo "bench/wan.sh: needs root (network namespaces, TUN devices)" >&2; exit 1; }
net() { "$BIN" net --prefix slcb- "$@"; }
trap 'net down >/dev/null 2>&1 || true' EXIT
tmp=$(mktemp -d)
trap 'net down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

# iperf N [ARGS]: receiver's Mbit/s of N streams from a to b.
iperf() {
	local n=$1; shift
	net exec b -- iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
	local srv=$!
	for _ in $(seq 50); do net exec b -- ss -ltnH "sport = :5299" | grep -q . && break; sleep 0.05; done
	net exec a -- iperf3 -c b -p 5299 -P "$n" -t "$T" -O "${OMIT:-3}" -J "$@" | jq '.end.sum_received.bits_per_second / 1e6'
	wait $srv || true
}

# window: the receive window b advertises to one stream (ss's snd_wnd at a,
# averaged over a few samples): the kernel advertises only part of
# tcp_rmem (the rest pays for buffer overhead), so this, not tcp_rmem,
# is what a window-limited stream moves per round trip.
window() {
	net exec b -- iperf3 -s -1 -p 5298 >/dev/null 2>&1 &
	local srv=$!
	for _ in $(seq 50); do net exec b -- ss -ltnH "sport = :5298" | grep -q . && break; sleep 0.05; done
	net exec a -- iperf3 -c b -p 5298 -t 5 >/dev/null &
	local cl=$!
	sleep 2.5
	for _ in 1 2 3 4 5; do
		net exec a -- ss -tinH dst 198.18.0.2 dport = :5298 | grep -o 'snd_wnd:[0-9]*' | cut -d: -f2 | sort -n | tail -1
		sleep 0.4
	done | jq -s 'add / length | floor'
	wait $cl || true
	wait $srv || true
}

echo "# Emulated WAN: iperf3 a -> b, ${T} s per run after ${OMIT:-3} s of warm-up; $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for p in ${PROFILES//,/ }; do
	net up --profile "$p" >/dev/null
	st=$(net status --json)
	rate=$(jq '.links[] | select(.name == "a>b") | .path.rate_mbps // 0' <<<"$st")
	delay=$(jq '.links[] | select(.name == "a>b") | .path.delay_ms' <<<"$st")
	back=$(jq '.links[] | select(.name == "b>a") | .path.delay_ms' <<<"$st")
	rmem=$(jq '.hosts[] | select(.name == "b") | .rmem_max // 0' <<<"$st")
	loss=$(jq '.links[] | select(.name == "a>b") | .path.loss // 0' <<<"$st")
	rtt=$(jq -n "$delay + $back")
	echo
	echo "## $p: ${rate} Mbit/s, RTT ${rtt} ms, loss ${loss}, receiver tcp_rmem max ${rmem} B"
	echo
	wnd=$(window)
	echo "Bounds: n x tcp_rmem max / RTT, and n x the window b advertises to one stream ($wnd B) / RTT, both capped at the link rate."
	echo
	echo "| streams | Mbit/s | tcp_rmem/RTT bound | advertised window/RTT bound | of that bound |"
	echo "|---:|---:|---:|---:|---:|"
	for n in $STREAMS; do
		got=$(iperf "$n")
		cap='(if '$rate' > 0 then '$rate' else 1e9 end)'
		bound=$(jq -n "[$n * $rmem * 8 / ($rtt / 1000) / 1e6, $cap] | min")
		bound2=$(jq -n "[$n * $wnd * 8 / ($rtt / 1000) / 1e6, $cap] | min")
		printf '| %d | %.0f | %.0f | %.0f | %.0f%% |\n' "$n" "$got" "$bound" "$bound2" "$(jq -n "100 * $got / $bound2")"
	done
	st=$(net status --json)
	echo
	echo "Forwarder: $(jq -r '"\(.cpu_seconds | . * 10 | round / 10) s CPU in \(.uptime_seconds | round) s; a>b queue drops \(.links[] | select(.name == "a>b") | .queue_drops), random drops \(.links[] | select(.name == "a>b") | .random_drops); TUN tx_dropped \([.hosts[].tun_tx_dropped] | add)"' <<<"$st")"
	net down
done

echo
echo "## Forwarder ceiling: 8 streams, 50 ms RTT, no rate limit, 32 MB buffers"
echo
echo "| MTU | Mbit/s | forwarder CPU (cores) | TUN tx_dropped |"
echo "|---:|---:|---:|---:|"
for mtu in 9000 1500; do
	cat >"$tmp/ceiling.json" <<JSON
{"name": "ceiling-$mtu", "hosts": [
  {"name": "a", "mtu": $mtu, "cc": "cubic", "rmem_max": 33554432, "wmem_max": 33554432},
  {"name": "b", "mtu": $mtu, "cc": "cubic", "rmem_max": 33554432, "wmem_max": 33554432}],
 "links": [{"hosts": ["a", "b"], "delay_ms": 25}]}
JSON
	net up --profile "$tmp/ceiling.json" >/dev/null
	c0=$(net status --json | jq .cpu_seconds)
	s0=$(date +%s.%N)
	got=$(iperf 8)
	s1=$(date +%s.%N)
	st=$(net status --json)
	cores=$(jq -n "($(jq .cpu_seconds <<<"$st") - $c0) / ($s1 - $s0)")
	printf '| %d | %.0f | %.2f | %d |\n' "$mtu" "$got" "$cores" "$(jq '[.hosts[].tun_tx_dropped] | add' <<<"$st")"
	net down
done
