#!/usr/bin/env bash
# The estimation service over the emulated wide-area network (package wan,
# docs/wan.md): how good are the streams `sluice estimate` chooses and the
# throughput it predicts, against an exhaustive sweep?
#
#   bash bench/estimate-wan.sh wan-untuned
#   RUNS=1 SECS=3 bash bench/estimate-wan.sh intercontinental
#   SAMPLE=64MiB bash bench/estimate-wan.sh wan-untuned
#
# sluice serve runs in host b with an agent in each host (wa in a holds the
# source, wb in b receives). One file, sized to last SECS (5) seconds at
# the profile's link rate, is copied a -> b by jobs through the service:
#
#   - the sweep: a job with --streams N for N in STREAMS (1 2 4 8 16 32),
#     the way the estimate's samples and an --optimize job move a file
#     (concurrent partial transfers pulled by the destination agent);
#   - `sluice estimate` (fresh sampling, --sample SAMPLE or the service's
#     default), then a job with --optimize, which takes the streams of that
#     estimate from the pair's history.
#
# Runs are interleaved (sweep, estimate, optimize job; again RUNS times,
# default 3) because this machine's speed drifts over minutes; results are
# medians. A job's throughput is its bytes over finished - created (the
# server's clock: queueing, checksums at both ends, fsync and rename
# included, as a user sees it). Each copy is compared with the source
# before it counts.
#
# Reported: the chosen streams; the sweep's throughput there as a fraction
# of the sweep's best (target >= 0.9); the predicted throughput against
# what the optimised job measured (target within 15%); and each sample's
# throughput and duration against the sweep at the same streams, with the
# path's RTT: a sample of a few round trips is mostly TCP slow start and
# connection set-up, and reads low.
#
# Needs root, jq, python3. Uses its own prefix (slce-), so other emulated
# networks on the machine are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${1:?usage: bench/estimate-wan.sh PROFILE}
RUNS=${RUNS:-3}
SECS=${SECS:-5}
STREAMS=${STREAMS:-1 2 4 8 16 32}
SAMPLE=${SAMPLE:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-estimate-wan}
PREFIX=${PREFIX:-slce-}
P_AGENT_A=17301 P_AGENT_B=17302 P_SERVE=17330

[ "$(id -u)" = 0 ] || { echo "bench/estimate-wan.sh: needs root (network namespaces)" >&2; exit 1; }
for t in jq python3; do command -v $t >/dev/null || { echo "bench/estimate-wan.sh: needs $t" >&2; exit 1; }; done

go build -o bin/sluice ./cmd/sluice
S=$PWD/bin/sluice
net() { "$S" net --prefix "$PREFIX" "$@"; }
cleanup() { net down >/dev/null 2>&1 || true; }
trap cleanup EXIT

net up --profile "$PROFILE" >/dev/null
st=$(net status --json)
RATE_MBPS=$(jq '.links[] | select(.name == "a>b") | .path.rate_mbps // 0' <<<"$st")
RTT=$(jq '[.links[] | select(.name == "a>b" or .name == "b>a") | .path.delay_ms] | add' <<<"$st")
LINK_MBS=$(jq -n "$RATE_MBPS / 8") # MB/s, 10^6 bytes
[ "$(jq -n "$LINK_MBS > 0")" = true ] || { echo "profile $PROFILE has no a>b rate" >&2; exit 1; }

rm -rf "$BENCH_DIR"; mkdir -p "$BENCH_DIR"/{src,dst}
chmod 755 "$BENCH_DIR" "$BENCH_DIR/src"; chmod 777 "$BENCH_DIR/dst"
MIB=$(jq -n "$LINK_MBS * 1e6 * $SECS / 1048576 | floor")
head -c $((MIB << 20)) /dev/urandom >"$BENCH_DIR/src/big"
chmod a+r "$BENCH_DIR/src/big"
BYTES=$((MIB << 20))

net exec b -- "$S" serve --listen 198.18.0.2:$P_SERVE --data-dir "$BENCH_DIR/serve" >"$BENCH_DIR/serve.log" 2>&1 &
for _ in $(seq 100); do [ -f "$BENCH_DIR/serve/join.token" ] && break; sleep 0.1; done
net exec a -- "$S" agent --listen 198.18.0.1:$P_AGENT_A --root "$BENCH_DIR/src" --name wa \
	--server http://b:$P_SERVE --join-token @"$BENCH_DIR/serve/join.token" >"$BENCH_DIR/agent-wa.log" 2>&1 &
net exec b -- "$S" agent --listen 198.18.0.2:$P_AGENT_B --root "$BENCH_DIR/dst" --name wb \
	--server http://198.18.0.2:$P_SERVE --join-token @"$BENCH_DIR/serve/join.token" >"$BENCH_DIR/agent-wb.log" 2>&1 &
# cli ARGS...: the sluice CLI in host b, as the service's admin.
cli() { net exec b -- env SLUICE_SERVER=http://198.18.0.2:$P_SERVE SLUICE_TOKEN=@"$BENCH_DIR/serve/admin.token" timeout "$RUN_TIMEOUT" "$S" "$@"; }
for _ in $(seq 100); do
	[ "$(cli endpoints --json 2>/dev/null | jq '[.[] | select(.up)] | length' 2>/dev/null)" = 2 ] && break
	sleep 0.2
done

warm() { # the source re-read (page cache), the destination empty
	cat "$BENCH_DIR/src/big" >/dev/null
	rm -f "$BENCH_DIR/dst/big"
	sync
}

# job ARGS...: submit src -> dst with ARGS, wait for it, print its MB/s.
job() {
	local id st
	id=$(cli submit sluice://wa/big sluice://wb/big "$@") || return 1
	while st=$(cli status "$id" --json) && [ "$(jq -r .state <<<"$st")" = active ]; do sleep 0.2; done
	if [ "$(jq -r .state <<<"$st")" != done ] || ! cmp -s "$BENCH_DIR/src/big" "$BENCH_DIR/dst/big"; then
		echo "job $id ($*): $(jq -r .state <<<"$st"), or its copy differs from the source" >&2
		return 1
	fi
	python3 -c '
import datetime, json, sys
j = json.loads(sys.argv[1])
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
print(round(int(sys.argv[2]) / (t(j["finished"]) - t(j["created"])).total_seconds() / 1e6, 1))' "$st" "$BYTES"
}

declare -A SWEEP
EST=() OPT=() failures=()
started=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$RUNS"); do
	for n in $STREAMS; do
		warm
		if m=$(job --streams "$n"); then
			SWEEP[$n]="${SWEEP[$n]:-} $m"
			echo "run $r: --streams $n: $m MB/s" >&2
		else failures+=("run $r --streams $n"); fi
	done
	warm
	args=(estimate sluice://wa/big sluice://wb/big --size "$BYTES" --json)
	[ -n "$SAMPLE" ] && args+=(--sample "$SAMPLE")
	if e=$(cli "${args[@]}"); then
		EST+=("$(jq -c . <<<"$e")")
		echo "run $r: estimate: $(jq -r '"\(.streams) streams, \(.throughput / 1e6 * 10 | round / 10) MB/s (fitted \(.throughput_fitted / 1e6 * 10 | round / 10), ±\(.uncertainty * 100 | round)%, clamped \(.clamped)); samples \([.samples[] | "\(.streams)→\(.throughput / 1e6 * 10 | round / 10) MB/s in \(.seconds * 1000 | round) ms"] | join(", "))"' <<<"$e")" >&2
	else failures+=("run $r estimate"); fi
	warm
	if m=$(job --optimize); then
		OPT+=("$m")
		echo "run $r: --optimize: $m MB/s" >&2
	else failures+=("run $r --optimize"); fi
done
elapsed=$(($(date +%s) - started))

median() { [ $# -gt 0 ] && python3 -c "import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 2))" "$@" || echo -; }
fwd=$(net status --json | jq -r '"a>b queue drops \(.links[] | select(.name == "a>b") | .queue_drops), TUN tx_dropped \([.hosts[].tun_tx_dropped] | add)"')
echo "# Estimation over the emulated WAN: $PROFILE ($RATE_MBPS Mbit/s = $LINK_MBS MB/s, RTT $RTT ms), a -> b"
echo
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $load0 at the start and $(cut -d' ' -f1-3 /proc/loadavg) at the end; one file of $MIB MiB; $RUNS interleaved runs, medians; ${elapsed} s of runs; $fwd."
echo
echo "| streams | sweep MB/s (median) | runs | sample MB/s (median) | sample ms (median) | sample / sweep |"
echo "|---:|---:|---|---:|---:|---:|"
best=0 bestn=-
for n in $STREAMS; do
	m=$(median ${SWEEP[$n]:-})
	smb=() sms=()
	for e in "${EST[@]}"; do
		v=$(jq -r --argjson n "$n" '.samples[] | select(.streams == $n) | "\(.throughput / 1e6) \(.seconds * 1000)"' <<<"$e")
		[ -n "$v" ] && { smb+=("${v% *}"); sms+=("${v#* }"); }
	done
	sm=$(median "${smb[@]}") ss=$(median "${sms[@]}")
	ratio=-
	[ "$sm" != - ] && [ "$m" != - ] && ratio=$(jq -n "$sm / $m * 100 | round / 100")
	echo "| $n | $m | ${SWEEP[$n]# } | $sm | $ss | $ratio |"
	if [ "$m" != - ] && [ "$(jq -n "$m > $best")" = true ]; then best=$m bestn=$n; fi
done
echo
[ ${#EST[@]} -gt 0 ] || { echo "No estimate succeeded."; exit 1; }
chosen=() pred=() fitted=()
for e in "${EST[@]}"; do
	chosen+=("$(jq .streams <<<"$e")") pred+=("$(jq '.throughput / 1e6' <<<"$e")") fitted+=("$(jq '.throughput_fitted / 1e6' <<<"$e")")
done
c=$(median "${chosen[@]}"); c=${c%.*}
p=$(median "${pred[@]}") f=$(median "${fitted[@]}") o=$(median "${OPT[@]}")
# The sweep at the chosen streams: measured there, or at the nearest
# swept level below.
at=-
for n in $STREAMS; do [ "$n" -le "$c" ] && [ -n "${SWEEP[$n]:-}" ] && at=$n; done
atm=$(median ${SWEEP[$at]:-})
echo "Estimates: streams ${chosen[*]}; predicted MB/s $(printf '%.1f ' "${pred[@]}")(fitted $(printf '%.1f ' "${fitted[@]}" | sed 's/ $//')); clamped $(for e in "${EST[@]}"; do jq -r .clamped <<<"$e"; done | paste -sd' '); cost $(for e in "${EST[@]}"; do jq -r '"\(.cost_seconds * 10 | round / 10) s"' <<<"$e"; done | paste -sd' ' | sed 's/ s / s, /g')."
for e in "${EST[@]}"; do n=$(jq -r '.note // empty' <<<"$e"); [ -n "$n" ] && echo "Note: $n"; done
echo
echo "| | measured | target | |"
echo "|---|---|---|---|"
if [ "$atm" != - ] && [ "$best" != 0 ]; then
	fr=$(jq -n "$atm / $best * 1000 | round / 1000")
	echo "| chosen streams vs the sweep | $c streams; the sweep at $at streams: $atm MB/s = $fr of the best ($best MB/s at $bestn streams) | >= 0.9 | $([ "$(jq -n "$fr >= 0.9")" = true ] && echo met || echo missed) |"
fi
if [ "$o" != - ]; then
	err=$(jq -n "($p - $o) / $o * 100 | round")
	echo "| predicted vs the optimised job | predicted $p MB/s (fitted $f), the --optimize job measured $o MB/s: ${err}% | within 15% | $([ "$(jq -n "($err | fabs) <= 15")" = true ] && echo met || echo missed) |"
fi
if [ ${#failures[@]} -gt 0 ]; then
	echo
	echo "Failed runs (not in the medians): ${failures[*]}"
fi
