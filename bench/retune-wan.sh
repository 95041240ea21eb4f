#!/usr/bin/env bash
# Live re-tuning of a service job over the emulated WAN (package wan,
# docs/wan.md): `sluice serve` in host b with an agent joined in a (wa) and
# in b (wb), one job of many 1 MiB files pulled a>b, and the a>b rate
# stepped while it runs: halved at STEP1 s, then tripled at STEP2 s (from
# the profile's rate R: R, R/2, 3R/2). Every 0.5 s it records the job's
# bytes done (the service's /metrics), the concurrency the scheduler runs
# at wa, and the bytes the forwarder carried a>b; at the end it prints,
# for each step, the time from the step until the 1 s throughput first
# reaches 80% of the new rate (the wire's figure: a>b bytes forwarded).
#
#   bash bench/retune-wan.sh                 # one run, wan-untuned
#   RUNS=3 bash bench/retune-wan.sh
#   FILE_MIB=6144 NSRC=1 NFILES=1 bash bench/retune-wan.sh   # one large file
#   SLUICE_BIN=/tmp/sluice-old bash bench/retune-wan.sh       # another build
#
# Needs root. Uses its own prefix (slcv-), so other emulated networks are
# left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-wan-untuned}
RUNS=${RUNS:-1}
SECS=${SECS:-40}
STEP1=${STEP1:-10} STEP2=${STEP2:-20}
FILE_MIB=${FILE_MIB:-1} # file size
NSRC=${NSRC:-256}       # distinct source files
NFILES=${NFILES:-6000}  # files in the job (sources repeat); it is canceled after SECS
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-retune}
PREFIX=${PREFIX:-slcv-}
SERVE_ARGS=${SERVE_ARGS:-}
P_JOB_A=17503 P_JOB_B=17504 P_SERVE=17530

[ "$(id -u)" = 0 ] || { echo "bench/retune-wan.sh: needs root (network namespaces)" >&2; exit 1; }
for t in jq python3 curl; do command -v $t >/dev/null || { echo "bench/retune-wan.sh: needs $t" >&2; exit 1; }; done

if [ -z "${SLUICE_BIN:-}" ]; then
	go build -o bin/sluice ./cmd/sluice
	SLUICE_BIN=$PWD/bin/sluice
fi
S=$SLUICE_BIN
net() { "$S" net --prefix "$PREFIX" "$@"; }
pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap 'stop_all; net down >/dev/null 2>&1 || true' EXIT

rm -rf "$BENCH_DIR"; mkdir -p "$BENCH_DIR"/{src,out}
chmod 755 "$BENCH_DIR" "$BENCH_DIR/src"
python3 - "$BENCH_DIR/src" "$NSRC" "$FILE_MIB" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        for _ in range(int(sys.argv[3])):
            f.write(os.urandom(1 << 20))
PY
python3 - "$NSRC" "$NFILES" >"$BENCH_DIR/job.json" <<'PY'
import json, sys
n, m = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps({"label": "retune", "files": [
    {"source": "sluice://wa/f%04d" % (i % n), "destination": "sluice://wb/d/f%05d" % i} for i in range(m)]}))
PY

one_run() { # run number
	local r=$1 out=$BENCH_DIR/out/run$1
	mkdir -p "$out"
	net down >/dev/null 2>&1 || true
	net up --profile "$PROFILE" >/dev/null
	local st rate
	st=$(net status --json)
	rate=$(jq '.links[] | select(.name == "a>b") | .path.rate_mbps' <<<"$st")
	rm -rf "$BENCH_DIR/dst" "$BENCH_DIR/serve"; mkdir -p "$BENCH_DIR/dst"; chmod 777 "$BENCH_DIR/dst"
	# shellcheck disable=SC2086
	net exec b -- "$S" serve --listen 198.18.0.2:$P_SERVE --data-dir "$BENCH_DIR/serve" $SERVE_ARGS >"$out/serve.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do [ -f "$BENCH_DIR/serve/join.token" ] && break; sleep 0.1; done
	net exec a -- "$S" agent --listen 198.18.0.1:$P_JOB_A --root "$BENCH_DIR/src" --name wa \
		--server http://b:$P_SERVE --join-token @"$BENCH_DIR/serve/join.token" >"$out/agent-wa.log" 2>&1 &
	pids+=($!)
	net exec b -- "$S" agent --listen 198.18.0.2:$P_JOB_B --root "$BENCH_DIR/dst" --name wb \
		--server http://198.18.0.2:$P_SERVE --join-token @"$BENCH_DIR/serve/join.token" >"$out/agent-wb.log" 2>&1 &
	pids+=($!)
	local cli=(net exec b -- env SLUICE_SERVER=http://198.18.0.2:$P_SERVE SLUICE_TOKEN=@"$BENCH_DIR/serve/admin.token" "$S")
	for _ in $(seq 100); do [ "$("${cli[@]}" endpoints 2>/dev/null | grep -cw true || true)" -ge 2 ] && break; sleep 0.2; done
	# The sampler runs inside b (the service listens there); the
	# forwarder's counters are read from here.
	net exec b -- bash -c 'while :; do
		m=$(curl -s http://198.18.0.2:'$P_SERVE'/metrics)
		echo "$(date +%s.%N) $(awk '"'"'/^sluice_bytes_done_total/ {b+=$2} /^sluice_endpoint_concurrency\{endpoint="wa"\}/ {c=$2} /^sluice_tasks_running/ {r+=$2} END {printf "%.0f %d %d", b, c, r}'"'"' <<<"$m")"
		sleep 0.5; done' >"$out/metrics.txt" 2>/dev/null &
	pids+=($!)
	(while :; do echo "$(date +%s.%N) $(net status --json | jq '.links[] | select(.name == "a>b") | .bytes')"; sleep 0.5; done) >"$out/wire.txt" 2>/dev/null &
	pids+=($!)
	local t0 id
	id=$("${cli[@]}" submit -f "$BENCH_DIR/job.json")
	t0=$(date +%s.%N)
	echo "$t0" >"$out/t0"
	sleep "$STEP1"; net set 'a>b' "{\"rate_mbps\": $(jq -n "$rate / 2")}" >/dev/null; date +%s.%N >"$out/step1"
	sleep "$((STEP2 - STEP1))"; net set 'a>b' "{\"rate_mbps\": $(jq -n "$rate * 3 / 2")}" >/dev/null; date +%s.%N >"$out/step2"
	sleep "$((SECS - STEP2))"
	"${cli[@]}" cancel "$id" >/dev/null 2>&1 || true
	stop_all
	python3 - "$out" "$rate" <<'PY'
import sys, os
out, rate = sys.argv[1], float(sys.argv[2])
t0 = float(open(os.path.join(out, "t0")).read())
steps = [float(open(os.path.join(out, f)).read()) - t0 for f in ("step1", "step2")]
def series(name, col):
    rows = []
    for line in open(os.path.join(out, name)):
        f = line.split()
        if len(f) > col:
            try:
                rows.append((float(f[0]) - t0, float(f[col])))
            except ValueError:
                pass
    return rows
wire, done = series("wire.txt", 1), series("metrics.txt", 1)
cc = series("metrics.txt", 2)
def rate_at(rows, t, w=1.0):
    # bytes/s over [t-w, t], from the samples around the ends
    a = [r for r in rows if r[0] <= t - w]
    b = [r for r in rows if r[0] <= t]
    if not a or not b or b[-1][0] - a[-1][0] <= 0:
        return 0
    return (b[-1][1] - a[-1][1]) / (b[-1][0] - a[-1][0])
new = [rate / 2 * 1e6 / 8, rate * 3 / 2 * 1e6 / 8]
with open(os.path.join(out, "series.txt"), "w") as f:
    f.write("# t  wire_MBps  done_MBps  cc_wa\n")
    for (t, _), (_, c) in zip(cc, cc):
        f.write("%5.1f %7.1f %7.1f %3d\n" % (t, rate_at(wire, t) / 1e6, rate_at(done, t) / 1e6, c))
res = []
for i, s in enumerate(steps):
    end = steps[i + 1] if i + 1 < len(steps) else max(r[0] for r in wire)
    hit = None
    for t, _ in wire:
        if s + 1.0 <= t <= end and rate_at(wire, t) >= 0.8 * new[i]:
            hit = t - s
            break
    res.append(hit)
print(" ".join("%.1f" % h if h is not None else "never" for h in res))
PY
}

for r in $(seq "$RUNS"); do
	res=$(one_run "$r")
	echo "run $r: time to 80% of the new rate after halving, after tripling (s): $res  (series: $BENCH_DIR/out/run$r/series.txt)"
done
