#!/usr/bin/env bash
# Transfer benchmarks on loopback: sluice (two agents, third-party and
# client-side copies) against the peers measured on this kind of machine
# (../shared/notes/measuring-transfers-here.md): cp (the local limit),
# globus-url-copy against a real globus-gridftp-server, rclone from an HTTP
# remote (nginx), aria2c and curl from the source agent's HTTP endpoint, and
# iperf3 (the network limit). The sibling over the emulated WAN is
# bench/transfer-wan.sh.
#
#   bash bench/transfer.sh                 # all datasets, 3 runs each: prints the results section
#   UPDATE_DOCS=1 bash bench/transfer.sh   # the same, and writes it into docs/results/transfer.md
#   RUNS=5 BIG_MB=4096 bash bench/transfer.sh
#   DATASETS=big bash bench/transfer.sh    # big | small | mixed, comma-separated
#   RUNS=1 BIG_MB=256 SMALL_N=200 MIXED_N=40 bash bench/transfer.sh   # a quick check that it works
#   TOOLS_BIG="cp sluice-3rd rclone" TOOLS_TREE="sluice-3rd rclone" bash bench/transfer.sh
#   PROFILE_DIR=/tmp/prof TOOLS_TREE=sluice-3rd DATASETS=small bash bench/transfer.sh
#       # Go CPU profiles of both agents (over the whole bench) and of each
#       # sluice cp: go tool pprof -top bin/sluice /tmp/prof/agent-b.pprof
#
# How it measures (the footing is the same for every tool):
# - Durable copies for all. Every tool's copy is followed by `sync`, and the
#   headline MB/s is over both: from the tool's start until sync returns.
#   sluice fsyncs before its renames (small files: one syncfs per batch)
#   and checksums at both ends (crc32c); the peers do neither, so without
#   the sync their figures end with the data still dirty in the page cache.
#   sluice gets the same sync (cheap: nothing of its copy is dirty). The
#   figure without the sync (the tool's own exit) is in a column beside it,
#   from the same run; it is what this script measured before. sync
#   flushes the whole machine's dirty data: on a shared machine another
#   process's writes can land in a run, one more reason to interleave.
# - CPU s/GB: user + system time of every process of the tool at both ends
#   (the client and the sync; its servers: globus-gridftp-server and the
#   session processes it forks, nginx's workers, the source agent for
#   aria2c and curl, both agents for sluice), from cgroup-v1 cpuacct
#   groups the processes are started in, per 10^9 bytes, over the interval
#   with the sync. Writeback that the kernel's flusher threads do is in no
#   tool's group: that is most of a peer's writeback (sync hands it to
#   them), while an fsync (sluice's, of a large file) can write back in the
#   agent's own thread and be counted. The "machine" column is the busy time of
#   every CPU over the same interval (/proc/stat: the flusher threads and
#   interrupts included, and whatever else the machine was doing), per GB.
# - Runs are interleaved (A B C A B C ...) because this machine's speed
#   drifts by tens of percent over minutes; medians of RUNS; ratios only
#   against peers of the same run. "/ best peer" divides by the fastest
#   peer with sync (globus-url-copy, rclone, aria2c, curl; not cp, the
#   local limit), in MB/s and in CPU s/GB (that same peer's CPU).
# - Before each run: the source re-read (the kernel drops page cache idle
#   for about 30 s here), a gigabyte of fresh memory touched and freed (its
#   first touch costs seconds per GiB here), the destination emptied and
#   everything synced. A run counts only if the destination holds at least
#   the source's file bytes.
#
# Installs its peers with apt-get when they are missing. Needs root for the
# cpuacct groups (without them the CPU columns say "-"). Needs about
# 3 x BIG_MB of free space under BENCH_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
BIG_MB=${BIG_MB:-4096}
SMALL_N=${SMALL_N:-5000}
MIXED_N=${MIXED_N:-1000}
DATASETS=${DATASETS:-big,small,mixed}
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench}
UPDATE_DOCS=${UPDATE_DOCS:-}
PROFILE_DIR=${PROFILE_DIR:-}
PORT_A=${PORT_A:-17101}
PORT_B=${PORT_B:-17102}
PORT_FTP=${PORT_FTP:-17111}
PORT_HTTP=${PORT_HTTP:-17121}
PORT_IPERF=${PORT_IPERF:-17131}
TOOLS_BIG=${TOOLS_BIG:-cp sluice-3rd sluice-client guc-p1 guc-fast-p4 rclone aria2c curl}
TOOLS_TREE=${TOOLS_TREE:-cp sluice-3rd sluice-client guc-fast-p4 rclone}

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
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || COMMIT="$COMMIT (with uncommitted changes)"
rm -rf "$BENCH_DIR"; mkdir -p "$BENCH_DIR"/{src,dst,state}
chmod 755 "$BENCH_DIR" "$BENCH_DIR/src"; chmod 777 "$BENCH_DIR/dst"
export XDG_STATE_HOME=$BENCH_DIR/state
KEY=$BENCH_DIR/key
$S keygen "$KEY" >/dev/null
prof() { [ -z "$PROFILE_DIR" ] || echo "--cpuprofile=$PROFILE_DIR/$1.pprof"; }
[ -z "$PROFILE_DIR" ] || mkdir -p "$PROFILE_DIR"

# cpuacct groups, one per side of each tool (slcl-: loopback; the WAN
# bench uses slcw-).
CG=/sys/fs/cgroup/cpuacct
GROUPS_ALL="cli agent-a agent-b gftp nginx"
CG_OK=1
for g in $GROUPS_ALL; do mkdir -p "$CG/slcl-$g" 2>/dev/null || CG_OK=; done
[ -n "$CG_OK" ] || echo "no cgroup-v1 cpuacct groups (needs root and $CG): CPU s/GB not measured" >&2
# tasks GROUP: the file that puts a process into cpuacct group GROUP.
tasks() { if [ -n "$CG_OK" ]; then echo "$CG/slcl-$1/tasks"; else echo /dev/null; fi; }
# INCG tasks-file CMD...: CMD in that group (its children stay in it). A
# plain command, not a function, so that $! of `$INCG ... &` is CMD's PID.
INCG=(sh -c 'echo $$ >"$0"; exec "$@"')
# incli CMD...: run CMD (a shell function too) in the client's group.
incli() { ( echo $BASHPID >"$(tasks cli)"; "$@" ); }
cpu_ns() { # groups...: their CPU time, ns
  local g t=0
  [ -n "$CG_OK" ] || { echo 0; return; }
  for g in "$@"; do t=$((t + $(cat "$CG/slcl-$g/cpuacct.usage"))); done
  echo $t
}
# machine_ticks: busy time of all CPUs (user nice system irq softirq steal), in USER_HZ ticks.
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
HZ=$(getconf CLK_TCK)
# tool_groups tool: the groups of its processes at both ends.
tool_groups() {
  case $1 in
    sluice-*) echo cli agent-a agent-b ;;
    guc-*) echo cli gftp ;;
    rclone) echo cli nginx ;;
    aria2c|curl) echo cli agent-a ;; # they fetch from the source agent's HTTP endpoint
    *) echo cli ;;
  esac
}

echo "making datasets ($DATASETS) in $BENCH_DIR/src" >&2
declare -A DESC
mkdata() { # dataset
  case $1 in
    big) head -c $((BIG_MB << 20)) /dev/urandom > "$BENCH_DIR/src/big.bin"
      DESC[big]="1 file of $BIG_MB MiB" ;;
    small) mkdir -p "$BENCH_DIR/src/small"
      for i in $(seq 1 "$SMALL_N"); do head -c 1048576 /dev/urandom > "$BENCH_DIR/src/small/f$i"; done
      DESC[small]="$SMALL_N files of 1 MiB" ;;
    mixed) mkdir -p "$BENCH_DIR/src/mixed"
      python3 - "$BENCH_DIR/src/mixed" "$MIXED_N" <<'PY'
import os, random, sys
random.seed(7)
for i in range(int(sys.argv[2])):
    n = random.randint(1, 10 << 20)
    with open(os.path.join(sys.argv[1], "f%04d" % i), "wb") as f:
        f.write(os.urandom(n))
PY
      DESC[mixed]="$MIXED_N files of 1 B-10 MiB" ;;
    *) echo "unknown dataset $1" >&2; exit 1 ;;
  esac
}
IFS=, read -ra sets <<<"$DATASETS"
for d in "${sets[@]}"; do mkdata "$d"; done
chmod -R a+rX "$BENCH_DIR/src"

# Servers: two agents (the source serves the datasets, the destination an
# empty tree), a GridFTP server, nginx for rclone.
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # The agents write their CPU profiles as they exit.
  for p in "${pids[@]}"; do for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; done
  [ -f "$BENCH_DIR/gftp.pid" ] && kill "$(cat "$BENCH_DIR/gftp.pid")" 2>/dev/null
  [ -f "$BENCH_DIR/nginx.pid" ] && kill "$(cat "$BENCH_DIR/nginx.pid")" 2>/dev/null
  if [ -n "$CG_OK" ]; then
    # A group is removable only once its last process has exited, which
    # lags behind the kill by a moment.
    for g in $GROUPS_ALL; do
      for _ in $(seq 50); do [ -d "$CG/slcl-$g" ] || break; rmdir "$CG/slcl-$g" 2>/dev/null || sleep 0.1; done
    done
  fi
  true
}
trap cleanup EXIT
"${INCG[@]}" "$(tasks agent-a)" $S agent --listen 127.0.0.1:$PORT_A --root "$BENCH_DIR/src" --name a --token-key "$KEY" $(prof agent-a) >"$BENCH_DIR/agent-a.log" 2>&1 & pids+=($!); PID_A=$!
"${INCG[@]}" "$(tasks agent-b)" $S agent --listen 127.0.0.1:$PORT_B --root "$BENCH_DIR/dst" --name b --token-key "$KEY" $(prof agent-b) >"$BENCH_DIR/agent-b.log" 2>&1 & pids+=($!); PID_B=$!
GFTP=$(command -v globus-gridftp-server || echo /usr/sbin/globus-gridftp-server)
"${INCG[@]}" "$(tasks gftp)" $GFTP -aa -p $PORT_FTP -control-interface 127.0.0.1 -data-interface 127.0.0.1 -anonymous-user nobody -S -pidfile "$BENCH_DIR/gftp.pid" -d error
cat > "$BENCH_DIR/nginx.conf" <<EOF
worker_processes 2; pid $BENCH_DIR/nginx.pid; error_log $BENCH_DIR/nginx.err;
events {}
http { access_log off; sendfile on; autoindex on;
  server { listen 127.0.0.1:$PORT_HTTP; root $BENCH_DIR/src; } }
EOF
"${INCG[@]}" "$(tasks nginx)" nginx -c "$BENCH_DIR/nginx.conf"
sleep 1
TOKEN=$($S data-token --token-key "$KEY" --scope rw --prefix / --aud '*' --ttl 4h)

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
    sluice-3rd) $S cp $(prof "cp-$d-$t-$r") --token "$TOKEN" --p 4 --cc 16 -r "sluice://127.0.0.1:$PORT_A/$d" "sluice://127.0.0.1:$PORT_B/" >/dev/null 2>&1 ;;
    sluice-client) $S cp $(prof "cp-$d-$t-$r") --token "$TOKEN" --p 4 --cc 16 -r "$src" "sluice://127.0.0.1:$PORT_B/" >/dev/null 2>&1 ;;
    guc-p1) if [ -d "$src" ]; then globus-url-copy -r -cd "ftp://127.0.0.1:$PORT_FTP$src/" "ftp://127.0.0.1:$PORT_FTP$dst/$d/"; else globus-url-copy "ftp://127.0.0.1:$PORT_FTP$src" "ftp://127.0.0.1:$PORT_FTP$dst/$d"; fi ;;
    guc-fast-p4) if [ -d "$src" ]; then globus-url-copy -r -cd -fast -pp -cc 4 "ftp://127.0.0.1:$PORT_FTP$src/" "ftp://127.0.0.1:$PORT_FTP$dst/$d/"; else globus-url-copy -fast -p 4 "ftp://127.0.0.1:$PORT_FTP$src" "ftp://127.0.0.1:$PORT_FTP$dst/$d"; fi ;;
    rclone) rclone copy --transfers 16 --multi-thread-streams 4 ":http,url='http://127.0.0.1:$PORT_HTTP/':$d" "$dst/$d" 2>/dev/null ;;
    aria2c) [ -d "$src" ] && return 2
      aria2c -q -x16 -s16 --header="Authorization: Bearer $TOKEN" -d "$dst" -o "$d" "http://127.0.0.1:$PORT_A/v1/files/$d" ;;
    curl) [ -d "$src" ] && return 2
      curl -sf -H "Authorization: Bearer $TOKEN" -o "$dst/$d" "http://127.0.0.1:$PORT_A/v1/files/$d" ;;
    *) echo "unknown tool $t" >&2; return 1 ;;
  esac
}
filebytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}'; }
tools_for() { if [ "$1" = big ]; then echo "$TOOLS_BIG"; else echo "$TOOLS_TREE"; fi; }
RAW=$BENCH_DIR/runs.tsv # dataset run tool bytes t_copy t_sync cpu_copy_ns cpu_sync_ns machine_ticks
: >"$RAW"
started=$(date +%s)
when0=$(date -u +%Y-%m-%dT%H:%MZ)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for d in "${sets[@]}"; do
  ds=$d; [ "$d" = big ] && ds=big.bin
  # File bytes only: du would count directories too, whose sizes differ
  # between a tree and its copy (cp's 5,000-file copy measured 4 KiB
  # "short" and was dropped).
  bytes=$(filebytes "$BENCH_DIR/src/$ds")
  for r in $(seq 1 "$RUNS"); do
    for t in $(tools_for "$d"); do
      warm "$BENCH_DIR/src/$ds"
      read -ra grp <<<"$(tool_groups "$t")"
      c0=$(cpu_ns "${grp[@]}") m0=$(machine_ticks)
      start=$(date +%s.%N)
      if incli run_tool "$t" "$ds"; then
        mid=$(date +%s.%N)
        c1=$(cpu_ns "${grp[@]}")
        incli sync
        end=$(date +%s.%N)
        c2=$(cpu_ns "${grp[@]}") m2=$(machine_ticks)
        got=$(filebytes "$BENCH_DIR/dst")
        if [ "$got" -lt "$bytes" ]; then echo "$d run $r $t: copied $got of $bytes bytes" >&2; continue; fi
        row=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$d" "$r" "$t" "$bytes" \
          "$(python3 -c "print($mid - $start)")" "$(python3 -c "print($end - $start)")" \
          $((c1 - c0)) $((c2 - c0)) $((m2 - m0)))
        echo "$row" >>"$RAW"
        python3 -c '
import sys
d, r, t, b, tc, ts, cc, cs, m = sys.argv[1].split("\t")
gb = int(b) / 1e9
cpu = "%.2f" % (int(cs) / 1e9 / gb) if sys.argv[2] else "-"
print("%s run %s %s: %.1f MB/s with sync (%.1f without), %s CPU s/GB, machine %.2f s/GB"
      % (d, r, t, gb * 1e3 / float(ts), gb * 1e3 / float(tc), cpu, int(m) / int(sys.argv[3]) / gb))' "$row" "$CG_OK" "$HZ" >&2
      else
        echo "$d run $r $t: failed or not applicable" >&2
      fi
    done
  done
done
elapsed=$(($(date +%s) - started))
load1=$(cut -d' ' -f1-3 /proc/loadavg)
iperf3 -s -1 -p $PORT_IPERF >/dev/null 2>&1 & sleep 0.5
net=$(iperf3 -c 127.0.0.1 -p $PORT_IPERF -P 4 -t 3 -J 2>/dev/null | python3 -c "import json,sys; print(round(json.load(sys.stdin)['end']['sum_received']['bits_per_second']/8e6,1))" || echo "?")
rss=""
for p in $PID_A $PID_B; do rss="$rss $(awk '/^VmHWM/ {printf "%.0f", $2/1024}' /proc/$p/status 2>/dev/null || echo ?)"; done
read -r rss_a rss_b <<<"$rss"

# The section: markdown on stdout (and, with UPDATE_DOCS, between the
# markers in docs/results/transfer.md).
descs=""
for d in "${sets[@]}"; do descs="$descs$d=${DESC[$d]};"; done
SECTION=$BENCH_DIR/section.md
WHEN=$when0 COMMIT=$COMMIT LOAD0=$load0 LOAD1=$load1 ELAPSED=$elapsed NET=$net RSS_A=$rss_a RSS_B=$rss_b \
NPROC=$(nproc) HZ=$HZ CG_OK=$CG_OK DESCS=$descs RUNS=$RUNS BIG_MB=$BIG_MB SMALL_N=$SMALL_N MIXED_N=$MIXED_N \
DATASETS=$DATASETS TOOLS_BIG=$TOOLS_BIG TOOLS_TREE=$TOOLS_TREE python3 - "$RAW" >"$SECTION" <<'PY'
import os, statistics, sys
e = os.environ
cg = e['CG_OK'] == '1'
desc = dict(x.split('=', 1) for x in e['DESCS'].split(';') if x)
runs = {}
for line in open(sys.argv[1]):
    d, r, t, b, tc, ts, cc, cs, m = line.rstrip('\n').split('\t')
    gb = int(b) / 1e9
    # MB/s with sync, MB/s without, CPU s/GB (with sync), machine CPU s/GB
    runs.setdefault((d, t), []).append((gb * 1e3 / float(ts), gb * 1e3 / float(tc),
                                        int(cs) / 1e9 / gb, int(m) / int(e['HZ']) / gb))
def med(v):
    return statistics.median(v) if v else None
def f(x, p=1):
    return '-' if x is None else '%.*f' % (p, x)
def ratio(a, b):
    return '%.2fx' % (a / b) if a is not None and b else '-'
PEERS = ('guc-', 'rclone', 'aria2c', 'curl')
print('## Loopback, every copy followed by sync: %s, commit %s' % (e['WHEN'], e['COMMIT']))
print()
print('`RUNS=%s BIG_MB=%s SMALL_N=%s MIXED_N=%s DATASETS=%s bash bench/transfer.sh`: %s cores, '
      'load %s at the start and %s at the end, %s s of runs; iperf3 -P 4 on loopback: %s MB/s. '
      'Peak agent memory (RSS), source / destination: %s / %s MiB. Medians of %s interleaved runs; '
      'MB/s = 10^6 bytes/s from the tool\'s start until a `sync` after it returns ("no sync": the '
      'same runs up to the tool\'s exit); CPU s/GB: user + system of every process of the tool at both '
      'ends, over the run with its sync; machine: every CPU\'s busy time over the same interval '
      '(kernel writeback included, and whatever else ran). "/ best peer": against the fastest peer '
      'with sync (no sync: the fastest without), its MB/s and its CPU s/GB.'
      % (e['RUNS'], e['BIG_MB'], e['SMALL_N'], e['MIXED_N'], e['DATASETS'], e['NPROC'], e['LOAD0'],
         e['LOAD1'], e['ELAPSED'], e['NET'], e['RSS_A'], e['RSS_B'], e['RUNS']))
for d in e['DATASETS'].split(','):
    ts = (e['TOOLS_BIG'] if d == 'big' else e['TOOLS_TREE']).split()
    m = {t: [med([x[i] for x in runs.get((d, t), [])]) for i in range(4)] for t in ts}
    peers = [t for t in ts if t.startswith(PEERS) and m[t][0] is not None]
    best = max(peers, key=lambda t: m[t][0], default=None)
    best_ns = max(peers, key=lambda t: m[t][1], default=None)
    print()
    print('### %s: %s' % (d, desc.get(d, d)))
    print()
    if best:
        print('Best peer with sync: %s (%s MB/s, %s CPU s/GB); without sync: %s (%s MB/s).' % (
            best, f(m[best][0]), f(m[best][2], 2) if cg else '-', best_ns, f(m[best_ns][1])))
        print()
    print('| tool | MB/s with sync | runs | / best peer | CPU s/GB | / best peer | MB/s no sync | / best peer no sync | machine CPU s/GB |')
    print('|---|---:|---|---:|---:|---:|---:|---:|---:|')
    for t in ts:
        v = m[t]
        if v[0] is None:
            print('| %s | - | failed | | | | | | |' % t)
            continue
        print('| %s | %s | %s | %s | %s | %s | %s | %s | %s |' % (
            t, f(v[0]), ' '.join('%.0f' % x[0] for x in runs[(d, t)]),
            ratio(v[0], m[best][0] if best else None),
            f(v[2], 2) if cg else '-', ratio(v[2], m[best][2] if best else None) if cg else '-',
            f(v[1]), ratio(v[1], m[best_ns][1] if best_ns else None), f(v[3], 2)))
PY
cat "$SECTION"
if [ -n "$UPDATE_DOCS" ]; then
  doc=docs/results/transfer.md
  python3 - "$doc" "$SECTION" <<'PY'
import sys
doc, section = sys.argv[1:]
begin, end = '<!-- bench/transfer.sh: begin -->', '<!-- bench/transfer.sh: end -->'
s = open(doc).read()
i, j = s.index(begin) + len(begin), s.index(end)
open(doc, 'w').write(s[:i] + '\n' + open(section).read().rstrip('\n') + '\n' + s[j:])
PY
  echo "wrote the section into $doc" >&2
fi
