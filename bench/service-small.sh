#!/usr/bin/env bash
# Many small files through the live service (jobs with many
# files use pull batches by default): one job of FILES files of SIZE bytes
# from an agent behind an emulated WAN path to a second agent, with the
# service's pull batches (the default) and without them (--batch-max 0, one
# transfer per file), beside `sluice cp -r` (the dataset planner, --auto) over
# the same path, measured in the same run, interleaved, RUNS times each.
#
# The path is bench/dataset.sh's: 200 MB/s, 20 MB/s per connection, 10 ms
# round trip before every answer, 20 ms to open a connection (the 100
# MB/s, 20 ms RTT path run twice as fast). Destinations are on tmpfs when
# there is one. Figures: MB/s (10^6 bytes/s) of the wall time from the
# submission to the job's end (cp: of the whole command), medians, and the
# ratios.
#
#   bash bench/service-small.sh
#   FILES=500 RUNS=1 bash bench/service-small.sh      # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
FILES=${FILES:-2000}
SIZE=${SIZE:-1048576}
CAP_MBPS=${CAP_MBPS:-200}
CONN_MBPS=${CONN_MBPS:-20}
RTT_MS=${RTT_MS:-10}
STARTUP_MS=${STARTUP_MS:-20}
W=${BENCH_DIR:-/tmp/sluice-service-small}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then DST=/dev/shm/sluice-service-small; else DST=$W/dst; fi
mkdir -p "$W"
go build -o "$W/sluice" ./cmd/sluice
S=$W/sluice

stamp="$FILES $SIZE"
if ! [ -f "$W/src.stamp" ] || [ "$(cat "$W/src.stamp")" != "$stamp" ]; then
  echo "making $FILES files of $SIZE bytes" >&2
  rm -rf "$W/src"; mkdir -p "$W/src/data"
  python3 - "$W/src/data" "$FILES" "$SIZE" <<'PY'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(size))
PY
  echo "$stamp" >"$W/src.stamp"
fi
python3 - "$FILES" >"$W/job.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"label": "small-files", "files": [
    {"source": "sluice://src/data/f%05d" % i, "destination": "sluice://dst/out/f%05d" % i} for i in range(n)]}))
PY
cat >"$W/path.json" <<EOF
{"capacity_bps": ${CAP_MBPS}e6, "conn_bps": ${CONN_MBPS}e6, "rtt_ms": $RTT_MS, "startup_ms": $STARTUP_MS}
EOF

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DST"; }
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A service per configuration, each with its own two agents; the source
# agents serve the same files.
declare -A url tokf
service() { # name serve-flags...
  local n=$1; shift
  local d=$W/$n port; port=$(freeport)
  rm -rf "$d"; mkdir -p "$d" "$DST/$n"
  "$S" serve --listen 127.0.0.1:"$port" --data-dir "$d/srv" "$@" >"$d/server.log" 2>&1 & pids+=($!)
  for _ in $(seq 100); do [ -f "$d/srv/join.token" ] && (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
  "$S" agent --listen 127.0.0.1:0 --root "$W/src" --name src --server http://127.0.0.1:"$port" \
    --join-token @"$d/srv/join.token" --emulate "$W/path.json" >"$d/src.log" 2>&1 & pids+=($!)
  "$S" agent --listen 127.0.0.1:0 --root "$DST/$n" --name dst --server http://127.0.0.1:"$port" \
    --join-token @"$d/srv/join.token" >"$d/dst.log" 2>&1 & pids+=($!)
  url[$n]=http://127.0.0.1:$port tokf[$n]=$d/srv/admin.token
}
service batched
service single --batch-max 0
# The peer: sluice cp -r through a standalone source agent on the same path.
KEY=$W/key
[ -f "$KEY" ] || "$S" keygen "$KEY" >/dev/null
CPPORT=$(freeport)
"$S" agent --listen 127.0.0.1:"$CPPORT" --root "$W/src" --name cpsrc --token-key "$KEY" \
  --emulate "$W/path.json" >"$W/cp-agent.log" 2>&1 & pids+=($!)
CPTOK=$("$S" data-token --token-key "$KEY" --scope read --prefix / --aud '*' --ttl 12h)
sleep 2

bytes=$((FILES * SIZE))
warm() { # as bench/dataset.sh: warm source, empty destination, fresh memory touched
  cat "$W"/src/data/* >/dev/null
  python3 -c "b = bytearray(1 << 30); b[::4096] = b'\x01' * len(b[::4096])" 2>/dev/null || true
}
run_service() { # name
  local n=$1
  rm -rf "${DST:?}/$n/out"
  warm
  export SLUICE_SERVER=${url[$n]} SLUICE_TOKEN=@${tokf[$n]}
  local t0 t1 id state
  t0=$(date +%s.%N)
  id=$("$S" submit -f "$W/job.json")
  while :; do
    state=$("$S" status "$id" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["state"], j.get("files_done", 0))')
    [ "${state%% *}" = active ] || break
    sleep 0.1
  done
  t1=$(date +%s.%N)
  if [ "$state" != "done $FILES" ]; then echo "$n: job $id ended $state" >&2; return 1; fi
  python3 -c "print(round($bytes / ($t1 - $t0) / 1e6, 1))"
}
run_cp() {
  rm -rf "${DST:?}/cp"; mkdir -p "$DST/cp"
  warm
  local t0 t1
  t0=$(date +%s.%N)
  "$S" cp -r --token "$CPTOK" "sluice://127.0.0.1:$CPPORT/data" "$DST/cp/" >/dev/null 2>"$W/cp.err" || { echo "cp failed: $(tail -1 "$W/cp.err")" >&2; return 1; }
  t1=$(date +%s.%N)
  python3 -c "print(round($bytes / ($t1 - $t0) / 1e6, 1))"
}

declare -A res
for r in $(seq "$RUNS"); do
  for c in batched single cp; do
    if [ $c = cp ]; then v=$(run_cp); else v=$(run_service $c); fi
    res[$c]+="$v "
    echo "run $r $c: $v MB/s" >&2
  done
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
b=$(med "${res[batched]}") s=$(med "${res[single]}") p=$(med "${res[cp]}")
echo "service, $FILES files of $SIZE bytes, path ${CAP_MBPS} MB/s, ${CONN_MBPS} MB/s per connection, ${RTT_MS} ms RTT; medians of $RUNS, MB/s"
echo "  service with pull batches (default): $b   (runs: ${res[batched]})"
echo "  service, one transfer per file:      $s   (runs: ${res[single]})"
echo "  sluice cp -r (dataset planner):      $p   (runs: ${res[cp]})"
python3 -c "print('  batched / single: %.2fx   batched / cp -r: %.2f' % ($b / $s, $b / $p))"
