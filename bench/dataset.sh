#!/usr/bin/env bash
# Many-file datasets over an emulated WAN path (the dataset optimization of
# Yildirim's flexible GridFTP client): `sluice
# cp -r --auto` against fixed pipelining (pp) and concurrency (cc).
#
# A source agent serves the datasets through its WAN emulation (package
# emul): CAP_MBPS for the whole path, CONN_MBPS per connection (one TCP
# stream's window/RTT limit), RTT_MS before every request is answered,
# STARTUP_MS on every new connection. The destination is a local directory
# (DST_DIR, tmpfs when there is one: the bench measures the path, not this
# machine's disk), so the small files come in batch GETs.
#
# The default path is 100 MB/s, 10 MB/s per connection and 20 ms RTT run
# twice as fast in time: 200 MB/s, 20 MB/s per connection, 10 ms. Every
# ratio that decides which setting wins is that path's (path BDP / file
# size, one connection's BDP / file size, RTT / time of a file on one
# connection, path / connection), in half the time; 200 MB/s is also as fast
# as this 2-core machine can shape, copy and verify without its CPU
# deciding the result.
#
# Datasets (seeded): d1, FILES1 files of SIZE1 bytes (5,000 x 1 MiB), and d2,
# FILES2 files of 1 B to MAX2 bytes, uniform (1,000 x 1 B-10 MiB).
#
# Runs: the fixed grid cc in {1,4,16} x pp in {1,8} (--auto=false --p 1) and
# --auto, RUNS times each, interleaved (this machine's speed drifts), the
# wall time of the whole command (listing, probing and sampling included).
# A fixed setting moves at a steady rate, so to keep the bench short the
# slow ones (cc 1 and 4) move a cc/32 share of the dataset (every
# 32/cc-th file in size order, so that the share has the dataset's mix of
# sizes), about ten seconds each; cc 16 and --auto move the whole dataset,
# so the comparison that matters (auto against the best fixed setting) is
# on the same files. FULL=1 gives every run the whole dataset (an hour).
#
#   bash bench/dataset.sh
#   FILES1=1000 FILES2=200 RUNS=1 bash bench/dataset.sh     # a quick look
#   RTT_MS=40 CONN_MBPS=10 bash bench/dataset.sh             # another path
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
FILES1=${FILES1:-5000}
SIZE1=${SIZE1:-1048576}
FILES2=${FILES2:-1000}
MAX2=${MAX2:-10485760}
SEED=${SEED:-7}
CAP_MBPS=${CAP_MBPS:-200}
CONN_MBPS=${CONN_MBPS:-20}
RTT_MS=${RTT_MS:-10}
STARTUP_MS=${STARTUP_MS:-20}
FULL=${FULL:-0}
DATASETS=${DATASETS:-d1,d2}
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-dataset}
if [ -z "${DST_DIR:-}" ]; then
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then DST_DIR=/dev/shm/sluice-dataset-dst; else DST_DIR=$BENCH_DIR/dst; fi
fi
PORT=${PORT:-17201}

mkdir -p "$BENCH_DIR/src" "$BENCH_DIR/state"
go build -o "$BENCH_DIR/sluice" ./cmd/sluice # not bin/: a testbed may be using that one
S=$BENCH_DIR/sluice
export XDG_STATE_HOME=$BENCH_DIR/state
KEY=$BENCH_DIR/key
[ -f "$KEY" ] || $S keygen "$KEY" >/dev/null

# Datasets, made once per parameter set (kept between runs of the script),
# with the fixed settings' shares as directories of hard links.
mkdata() { # name count kind
  local dir=$BENCH_DIR/src/$1 stamp="$2 $3 $SIZE1 $MAX2 $SEED"
  if ! [ -f "$dir.stamp" ] || [ "$(cat "$dir.stamp")" != "$stamp" ]; then
    echo "making $1: $stamp" >&2
    rm -rf "$dir" "$dir.stamp"; mkdir -p "$dir"
    python3 - "$dir" "$2" "$3" "$SIZE1" "$MAX2" "$SEED" <<'PY'
import os, random, sys
d, n, kind, size1, max2, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
rng = random.Random(seed)
for i in range(n):
    size = size1 if kind == "fixed" else rng.randint(1, max2)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(size))
PY
    echo "$stamp" > "$dir.stamp"
  fi
  rm -rf "$dir".cc*
  for cc in 1 4; do
    mkdir -p "$dir.cc$cc"
    # Every (32/cc)-th file in size order: the share keeps the sizes' mix.
    ls -S "$dir" | awk -v k=$((32 / cc)) 'NR % k == 1' | while read -r f; do ln "$dir/$f" "$dir.cc$cc/$f"; done
    if [ -z "$(ls -A "$dir.cc$cc")" ]; then echo "making $1: the cc $cc share is empty" >&2; exit 1; fi
  done
}
IFS=, read -ra sets <<<"$DATASETS"
for d in "${sets[@]}"; do
  case $d in
    d1) mkdata d1 "$FILES1" fixed ;;
    d2) mkdata d2 "$FILES2" random ;;
  esac
done
chmod -R a+rX "$BENCH_DIR/src"

cat > "$BENCH_DIR/path.json" <<EOF
{"capacity_bps": ${CAP_MBPS}e6, "conn_bps": ${CONN_MBPS}e6, "rtt_ms": $RTT_MS, "startup_ms": $STARTUP_MS}
EOF
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DST_DIR"; }
trap cleanup EXIT
$S agent --listen 127.0.0.1:$PORT --root "$BENCH_DIR/src" --name src --token-key "$KEY" \
  --emulate "$BENCH_DIR/path.json" >"$BENCH_DIR/agent.log" 2>&1 & pids+=($!)
sleep 1
TOKEN=$($S data-token --token-key "$KEY" --scope read --prefix / --aud '*' --ttl 12h)

configs=${CONFIGS:-"cc1pp1 cc1pp8 cc4pp1 cc4pp8 cc16pp1 cc16pp8 auto"}
filebytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}'; }
# Before every timed run, as bench/transfer.sh does (see
# ../shared/notes/measuring-transfers-here.md): re-read the source (the
# kernel drops page cache unread for half a minute), clear the
# destination, and touch and free a gigabyte so that no run pays for the
# first touch of fresh memory (seconds per GiB here).
warm() { # dir
  find "$1" -type f -exec cat {} + >/dev/null
  rm -rf "$DST_DIR"; mkdir -p "$DST_DIR"
  python3 -c "b = bytearray(1 << 30); b[::4096] = b'\x01' * len(b[::4096])" 2>/dev/null || true
}
declare -A results
run_one() { # dataset config run
  local d=$1 c=$2 r=$3 src=$1 args
  case $c in
    auto) args=(-r) ;;
    *) local cc=${c#cc}; cc=${cc%pp*}; local pp=${c#*pp}
       args=(-r --auto=false --p 1 --cc "$cc" --pp "$pp")
       [ "$FULL" = 1 ] || [ "$cc" -ge 16 ] || src=$d.cc$cc ;;
  esac
  local bytes; bytes=$(filebytes "$BENCH_DIR/src/$src")
  warm "$BENCH_DIR/src/$src"
  local start end
  start=$(date +%s.%N)
  if ! $S cp "${args[@]}" --json --token "$TOKEN" "sluice://127.0.0.1:$PORT/$src" "$DST_DIR/" >"$BENCH_DIR/last.json" 2>"$BENCH_DIR/last.err"; then
    echo "$d run $r $c: failed: $(tail -1 "$BENCH_DIR/last.err")" >&2; return
  fi
  end=$(date +%s.%N)
  local got; got=$(filebytes "$DST_DIR")
  if [ "$got" -lt "$bytes" ]; then echo "$d run $r $c: copied $got of $bytes bytes" >&2; return; fi
  local mbps; mbps=$(python3 -c "print(round($bytes/($end-$start)/1e6, 1))")
  results[$d,$c]="${results[$d,$c]:-} $mbps"
  local extra=""
  if [ "$c" = auto ]; then
    extra=$(python3 - "$BENCH_DIR/last.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
a = r.get("auto", {})
steps = " ".join("%s:%d/pp%d/p%d/cc%d/%.0f" % (s["phase"][:9], s["files"], s["pp"], s["p"], s["cc"], s["bytes_per_s"] / 1e6) for s in r.get("steps", []))
print("(rtt %.1f ms, bw %.0f MB/s %s, BDP %.2f MB; %s)" % (a.get("rtt_ms", 0), a.get("bandwidth_bps", 0) / 1e6, a.get("bandwidth_from", "?"), a.get("bdp", 0) / 1e6, steps))
PY
)
  fi
  echo "$d run $r $c ($src, $((bytes / 1000000)) MB): $mbps MB/s $extra" >&2
}

t0=$(date +%s)
echo "start: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every figure)" >&2
for r in $(seq 1 "$RUNS"); do
  for d in "${sets[@]}"; do
    for c in $configs; do run_one "$d" "$c" "$r"; done
  done
done

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(round(statistics.median(v),1) if v else 0)" "$@"; }
echo
echo "path: capacity $CAP_MBPS MB/s, $CONN_MBPS MB/s per connection, RTT $RTT_MS ms, start-up $STARTUP_MS ms per connection;" \
  "d1 = $FILES1 x $SIZE1 B, d2 = $FILES2 x 1 B-$MAX2 B (seed $SEED); medians of $RUNS runs, MB/s; $(( $(date +%s) - t0 )) s"
printf "| dataset |"; for c in $configs; do printf " %s |" "$c"; done; echo " auto / cc1pp1 (>= 1.5) | auto / best fixed (>= 0.9) |"
printf "|---|"; for c in $configs; do printf -- "---|"; done; echo "---|---|"
for d in "${sets[@]}"; do
  declare -A med=()
  printf "| %s |" "$d"
  for c in $configs; do med[$c]=$(median ${results[$d,$c]:-}); printf " %s |" "${med[$c]}"; done
  python3 - "${med[auto]}" "${med[cc1pp1]}" "${med[cc1pp8]}" "${med[cc4pp1]}" "${med[cc4pp8]}" "${med[cc16pp1]}" "${med[cc16pp8]}" <<'PY'
import sys
auto, base, *grid = (float(x) for x in sys.argv[1:])
best = max(grid + [base])
r1 = auto / base if base else 0
r2 = auto / best if best else 0
print(" %.2f %s | %.2f %s |" % (r1, "met" if r1 >= 1.5 else "NOT met", r2, "met" if r2 >= 0.9 else "NOT met"))
PY
done
