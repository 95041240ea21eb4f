#!/usr/bin/env bash
# A directory copied whole through the live service (`sluice submit -r`):
# a nested tree of FILES files of SIZE bytes from one agent to another on
# loopback, beside `sluice cp -r` from the same source agent, interleaved,
# RUNS times each. For the service it prints when the first file was done
# and when the listing ended (both from the submission), and the total;
# every run checks that the job has FILES files, all done, and none twice.
#
#   bash bench/recursive.sh                  # 100,000 files of 1 KiB
#   FILES=20000 RUNS=1 bash bench/recursive.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
FILES=${FILES:-100000}
SIZE=${SIZE:-1024}
W=${BENCH_DIR:-/tmp/sluice-recursive}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then DST=/dev/shm/sluice-recursive; else DST=$W/dst; fi
mkdir -p "$W"
go build -o "$W/sluice" ./cmd/sluice
S=$W/sluice

stamp="$FILES $SIZE"
if ! [ -f "$W/src.stamp" ] || [ "$(cat "$W/src.stamp")" != "$stamp" ]; then
  echo "making a tree of $FILES files of $SIZE bytes" >&2
  rm -rf "$W/src"; mkdir -p "$W/src"
  python3 - "$W/src/tree" "$FILES" "$SIZE" <<'PY'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = os.urandom(size)
for i in range(n):
    # 100 files a directory, 100 directories a level: a nested tree.
    d = os.path.join(root, "r%02d" % (i // 10000), "d%03d" % (i // 100 % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        f.write(data[: size - 8] + i.to_bytes(8, "little"))
PY
  echo "$stamp" >"$W/src.stamp"
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DST"; }
trap cleanup EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

port=$(freeport)
rm -rf "$W/srv"; mkdir -p "$DST/svc"
"$S" serve --listen 127.0.0.1:"$port" --data-dir "$W/srv" >"$W/server.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do [ -f "$W/srv/join.token" ] && (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
"$S" agent --listen 127.0.0.1:0 --root "$W/src" --name src --server http://127.0.0.1:"$port" \
  --join-token @"$W/srv/join.token" >"$W/src.log" 2>&1 & pids+=($!)
"$S" agent --listen 127.0.0.1:0 --root "$DST/svc" --name dst --server http://127.0.0.1:"$port" \
  --join-token @"$W/srv/join.token" >"$W/dst.log" 2>&1 & pids+=($!)
export SLUICE_SERVER=http://127.0.0.1:$port SLUICE_TOKEN=@$W/srv/admin.token
KEY=$W/key
[ -f "$KEY" ] || "$S" keygen "$KEY" >/dev/null
CPPORT=$(freeport)
# Standalone: not the service's agent (SLUICE_SERVER would set its --server).
env -u SLUICE_SERVER "$S" agent --listen 127.0.0.1:"$CPPORT" --root "$W/src" --name cpsrc --token-key "$KEY" >"$W/cp-agent.log" 2>&1 & pids+=($!)
CPTOK=$("$S" data-token --token-key "$KEY" --scope read --prefix / --aud '*' --ttl 12h)
sleep 2

run_service() {
  rm -rf "${DST:?}/svc/copy"
  local t0 id
  t0=$(date +%s.%N)
  id=$("$S" submit -r sluice://src/tree sluice://dst/copy)
  python3 - "$id" "$t0" "$FILES" <<'PY'
import json, os, subprocess, sys, time
job, t0, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
first = listed = None
while True:
    j = json.loads(subprocess.check_output([os.environ["S"], "status", job, "--json"]))
    now = time.time() - t0
    if first is None and j.get("files_done", 0) > 0:
        first = now
    if listed is None and not j.get("listing"):
        listed = now
    if j["state"] != "active":
        break
    time.sleep(0.05)
total = time.time() - t0
if j["state"] != "done" or j["files"] != n or j["files_done"] != n:
    sys.exit("job %s ended %s: %d files, %d done (want %d)" % (job, j["state"], j["files"], j["files_done"], n))
print("%.2f %.2f %.2f" % (first or total, listed or total, total))
PY
}
run_cp() {
  rm -rf "${DST:?}/cp"; mkdir -p "$DST/cp"
  local t0 t1
  t0=$(date +%s.%N)
  "$S" cp -r --token "$CPTOK" "sluice://127.0.0.1:$CPPORT/tree" "$DST/cp/copy" >/dev/null 2>"$W/cp.err" || { echo "cp failed: $(tail -1 "$W/cp.err")" >&2; return 1; }
  t1=$(date +%s.%N)
  python3 -c "print(round($t1 - $t0, 2))"
}
export S
declare -a first listed total cp
for r in $(seq "$RUNS"); do
  read -r f l t < <(run_service)
  first+=("$f") listed+=("$l") total+=("$t")
  echo "run $r service: first file done at $f s, listing ended at $l s, all $FILES done at $t s" >&2
  c=$(run_cp)
  cp+=("$c")
  echo "run $r cp -r: $c s" >&2
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mf=$(med "${first[@]}") ml=$(med "${listed[@]}") mt=$(med "${total[@]}") mc=$(med "${cp[@]}")
echo "a tree of $FILES files of $SIZE bytes on loopback; medians of $RUNS (seconds from the submission)"
echo "  sluice submit -r: first file done $mf, listing ended $ml, all done $mt"
echo "  sluice cp -r:     all done $mc"
python3 -c "print('  service / cp -r (time): %.2f; files/s: service %.0f, cp -r %.0f' % ($mt / $mc, $FILES / $mt, $FILES / $mc))"
