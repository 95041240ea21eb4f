#!/usr/bin/env bash
# Transfer benchmarks on loopback: sluice (two agents, third-party and
# client-side copies) against the peers measured on this kind of machine
# (../shared/notes/measuring-transfers-here.md): cp (the local limit),
# globus-url-copy against a real globus-gridftp-server, rclone from an HTTP
# remote (nginx), aria2c and curl from the agent's HTTP endpoint, and iperf3
# (the network limit). Runs are interleaved (A B C A B C ...) because this
# machine's speed drifts by tens of percent over minutes; the script prints
# medians and ratios measured in the same run.
#
#   bash bench/transfer.sh                 # all datasets, 3 runs each
#   RUNS=5 BIG_MB=4096 bash bench/transfer.sh
#   DATASETS=big bash bench/transfer.sh    # big | small | mixed, comma-separated
#
# Installs its peers with apt-get when they are missing (root). Needs about
# 3 x BIG_MB of free space under BENCH_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
BIG_MB=${BIG_MB:-4096}
DATASETS=${DATASETS:-big,small,mixed}
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench}
PORT_A=${PORT_A:-17101}
PORT_B=${PORT_B:-17102}
PORT_FTP=${PORT_FTP:-17111}
PORT_HTTP=${PORT_HTTP:-17121}

need() { command -v "$1" >/dev/null 2>&1; }
missing=()
for p in globus-url-copy:globus-gass-copy-progs globus-gridftp-server:globus-gridftp-server-progs rclone:rclone aria2c:aria2 iperf3:iperf3 nginx:nginx-light curl:curl; do
  need "${p%%:*}" || [ -x "/usr/sbin/${p%%:*}" ] || missing+=("${p##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

go build -o bin/sluice ./cmd/sluice
S=$PWD/bin/sluice
rm -rf "$BENCH_DIR"; mkdir -p "$BENCH_DIR"/{src,dst,state}
chmod 755 "$BENCH_DIR" "$BENCH_DIR/src"; chmod 777 "$BENCH_DIR/dst"
export XDG_STATE_HOME=$BENCH_DIR/state
KEY=$BENCH_DIR/key
$S keygen "$KEY" >/dev/null

echo "making datasets ($DATASETS) in $BENCH_DIR/src" >&2
mkdata() { # dataset
  case $1 in
    big) head -c $((BIG_MB << 20)) /dev/urandom > "$BENCH_DIR/src/big.bin" ;;
    small) mkdir -p "$BENCH_DIR/src/small"
      for i in $(seq 1 5000); do head -c 1048576 /dev/urandom > "$BENCH_DIR/src/small/f$i"; done ;;
    mixed) mkdir -p "$BENCH_DIR/src/mixed"
      python3 - "$BENCH_DIR/src/mixed" <<'PY'
import os, random, sys
random.seed(7)
for i in range(1000):
    n = random.randint(1, 10 << 20)
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(os.urandom(n))
PY
      ;;
  esac
}
IFS=, read -ra sets <<<"$DATASETS"
for d in "${sets[@]}"; do mkdata "$d"; done
chmod -R a+rX "$BENCH_DIR/src"

# Servers: two agents (the source serves the datasets, the destination an
# empty tree), a GridFTP server, nginx for rclone.
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; [ -f "$BENCH_DIR/gftp.pid" ] && kill "$(cat "$BENCH_DIR/gftp.pid")" 2>/dev/null; [ -f "$BENCH_DIR/nginx.pid" ] && kill "$(cat "$BENCH_DIR/nginx.pid")" 2>/dev/null; true; }
trap cleanup EXIT
$S agent --listen 127.0.0.1:$PORT_A --root "$BENCH_DIR/src" --name a --token-key "$KEY" >"$BENCH_DIR/agent-a.log" 2>&1 & pids+=($!); PID_A=$!
$S agent --listen 127.0.0.1:$PORT_B --root "$BENCH_DIR/dst" --name b --token-key "$KEY" >"$BENCH_DIR/agent-b.log" 2>&1 & pids+=($!); PID_B=$!
GFTP=$(command -v globus-gridftp-server || echo /usr/sbin/globus-gridftp-server)
$GFTP -aa -p $PORT_FTP -control-interface 127.0.0.1 -data-interface 127.0.0.1 -anonymous-user nobody -S -pidfile "$BENCH_DIR/gftp.pid" -d error
cat > "$BENCH_DIR/nginx.conf" <<EOF
worker_processes 2; pid $BENCH_DIR/nginx.pid; error_log $BENCH_DIR/nginx.err;
events {}
http { access_log off; sendfile on; autoindex on;
  server { listen 127.0.0.1:$PORT_HTTP; root $BENCH_DIR/src; } }
EOF
nginx -c "$BENCH_DIR/nginx.conf"
sleep 1
TOKEN=$($S token --token-key "$KEY" --scope rw --prefix / --aud '*' --ttl 2h)

warm() { # path: make the source warm, give the memory a touch, clear the destination
  find "$1" -type f -exec cat {} + >/dev/null
  rm -rf "$BENCH_DIR"/dst/* "$BENCH_DIR"/state/sluice/journal 2>/dev/null || true
  # Fresh memory costs seconds per GiB on first touch here: touch and
  # free a gigabyte so no tool pays for it inside its timed run.
  python3 -c "b = bytearray(1 << 30); b[::4096] = b'\x01' * len(b[::4096])" 2>/dev/null || true
  sync
}

# Each tool: a name and a command copying dataset $1 (a path relative to
# src) into dst. Directory datasets use each tool's recursive mode.
run_tool() { # tool dataset
  local t=$1 d=$2 src=$BENCH_DIR/src/$2 dst=$BENCH_DIR/dst
  case $t in
    cp) if [ -d "$src" ]; then cp -r "$src" "$dst/"; else cp "$src" "$dst/"; fi ;;
    # cp, then sync: the copy made durable, as every sluice copy is (it
    # fsyncs before the rename; the other peers leave the data dirty in
    # the page cache, so their figures are not bounded by the disk).
    cp-sync) if [ -d "$src" ]; then cp -r "$src" "$dst/"; else cp "$src" "$dst/"; fi && sync ;;
    sluice-3rd) $S cp --token "$TOKEN" --p 4 --cc 16 -r "sluice://127.0.0.1:$PORT_A/$d" "sluice://127.0.0.1:$PORT_B/" >/dev/null 2>&1 ;;
    sluice-client) $S cp --token "$TOKEN" --p 4 --cc 16 -r "$src" "sluice://127.0.0.1:$PORT_B/" >/dev/null 2>&1 ;;
    guc-p1) if [ -d "$src" ]; then globus-url-copy -r -cd "ftp://127.0.0.1:$PORT_FTP$src/" "ftp://127.0.0.1:$PORT_FTP$dst/$d/"; else globus-url-copy "ftp://127.0.0.1:$PORT_FTP$src" "ftp://127.0.0.1:$PORT_FTP$dst/$d"; fi ;;
    guc-fast-p4) if [ -d "$src" ]; then globus-url-copy -r -cd -fast -pp -cc 4 "ftp://127.0.0.1:$PORT_FTP$src/" "ftp://127.0.0.1:$PORT_FTP$dst/$d/"; else globus-url-copy -fast -p 4 "ftp://127.0.0.1:$PORT_FTP$src" "ftp://127.0.0.1:$PORT_FTP$dst/$d"; fi ;;
    rclone) rclone copy --transfers 16 --multi-thread-streams 4 ":http,url='http://127.0.0.1:$PORT_HTTP/':$d" "$dst/$d" 2>/dev/null ;;
    aria2c) [ -d "$src" ] && return 2
      aria2c -q -x16 -s16 --header="Authorization: Bearer $TOKEN" -d "$dst" -o "$d" "http://127.0.0.1:$PORT_A/v1/files/$d" ;;
    curl) [ -d "$src" ] && return 2
      curl -sf -H "Authorization: Bearer $TOKEN" -o "$dst/$d" "http://127.0.0.1:$PORT_A/v1/files/$d" ;;
  esac
}

declare -A results
filebytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}'; }
tools_for() { case $1 in big) echo "cp cp-sync sluice-3rd sluice-client guc-p1 guc-fast-p4 rclone aria2c curl" ;; *) echo "cp cp-sync sluice-3rd sluice-client guc-fast-p4 rclone" ;; esac; }
for d in "${sets[@]}"; do
  ds=$d; [ "$d" = big ] && ds=big.bin
  # File bytes only: du would count directories too, whose sizes differ
  # between a tree and its copy (cp's 5,000-file copy measured 4 KiB
  # "short" and was dropped).
  bytes=$(filebytes "$BENCH_DIR/src/$ds")
  for r in $(seq 1 "$RUNS"); do
    for t in $(tools_for "$d"); do
      warm "$BENCH_DIR/src/$ds"
      start=$(date +%s.%N)
      if run_tool "$t" "$ds"; then
        end=$(date +%s.%N)
        got=$(filebytes "$BENCH_DIR/dst")
        if [ "$got" -lt "$bytes" ]; then echo "$t on $d: copied $got of $bytes bytes" >&2; continue; fi
        mbps=$(python3 -c "print(round($bytes/($end-$start)/1e6, 1))")
        results[$d,$t]="${results[$d,$t]:-} $mbps"
        echo "$d run $r $t: $mbps MB/s" >&2
      else
        echo "$d run $r $t: failed or not applicable" >&2
      fi
    done
  done
done
iperf3 -s -1 -p 17131 >/dev/null 2>&1 & sleep 0.5
net=$(iperf3 -c 127.0.0.1 -p 17131 -P 4 -t 3 -J 2>/dev/null | python3 -c "import json,sys; print(round(json.load(sys.stdin)['end']['sum_received']['bits_per_second']/8e6,1))" || echo "?")

median() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(round(statistics.median(v),1) if v else '-')" "$@"; }
echo
echo "## medians over $RUNS interleaved runs (MB/s, 10^6 bytes/s); iperf3 -P 4 on loopback: $net MB/s"
for d in "${sets[@]}"; do
  echo
  echo "### $d"
  best_guc=0; cpv=0; cpsync=0
  for t in $(tools_for "$d"); do
    m=$(median ${results[$d,$t]:-})
    echo "$t: $m"
    case $t in guc-*) [ "$m" != - ] && best_guc=$(python3 -c "print(max($best_guc, $m))") ;; cp) cpv=$m ;; cp-sync) cpsync=$m ;; esac
    [ "$t" = sluice-3rd ] && s3=$m
  done
  peers=""
  for t in rclone aria2c curl; do m=$(median ${results[$d,$t]:-}); [ "$m" != - ] && peers="$peers $m"; done
  best_peer=$(python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(max(v) if v else 0)" $peers $best_guc)
  [ "$cpv" = - ] && cpv=0
  [ "$cpsync" = - ] && cpsync=0
  [ "$s3" = - ] && s3=0
  python3 -c "
s=$s3; g=$best_guc; c=${cpv:-0}; cs=${cpsync:-0}; p=$best_peer
print('sluice-3rd / best globus-url-copy: %.2fx' % (s/g if g else float('nan')))
print('sluice-3rd / cp: %.2f' % (s/c if c else float('nan')))
print('sluice-3rd / cp then sync (the durable-copy limit): %.2f' % (s/cs if cs else float('nan')))
print('sluice-3rd / best peer: %.2fx' % (s/p if p else float('nan')))"
done
for p in $PID_A $PID_B; do
  echo "agent pid $p peak RSS: $(grep VmHWM /proc/$p/status | awk '{print $2/1024 " MiB"}')"
done
