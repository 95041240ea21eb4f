#!/usr/bin/env bash
# Transfer benchmarks over the emulated wide-area network (package wan,
# docs/wan.md): the sources run in host a, every tool pulls from a into
# host b, kernel TCP over the profile's path. The loopback sibling is
# bench/transfer.sh; the rules are those of
# ../shared/notes/measuring-transfers-here.md: runs interleaved
# (A B C A B C ...) because this machine's speed drifts over minutes,
# medians, ratios only against peers measured in the same run, the source
# re-read before each run (the kernel drops page cache idle for ~30 s) and
# fresh memory touched so no tool pays for it inside its timed run.
#
#   bash bench/transfer-wan.sh wan-untuned
#   RUNS=1 DATASETS=big,tiny bash bench/transfer-wan.sh intercontinental
#   TOOLS_BIG="sluice guc-fast-p8" bash bench/transfer-wan.sh wan-tuned
#
# Datasets (DATASETS, comma-separated), sized from the profile's link rate
# so that a run at the link rate lasts SECS_* seconds (the slower tools take
# several times that; scale down with the SECS_* variables if runs are too
# long): big (one file, SECS_BIG=8), small (1 MiB files, SECS_SMALL=4),
# mixed (1 B-10 MiB, SECS_MIXED=6), tiny (64 KiB files, SECS_TINY=1).
#
# Sources in a: two sluice agents (a serves the data, b receives: `sluice
# cp` with no flags is a third-party copy), globus-gridftp-server (flags
# from the notes; `sluice net` names the hosts so it starts), nginx with
# sendfile and autoindex for rclone, aria2c and curl. A peer whose tool is
# missing is skipped and the table says so. To install them (Debian):
#
#   apt-get install globus-gass-copy-progs globus-gridftp-server-progs \
#     nginx-light rclone aria2 curl jq
#
# CPU seconds per GB: user + system of every process of the tool at both
# ends (the client in b, its servers in a and, for sluice, the agent in b),
# from cgroup-v1 cpuacct groups the processes are started in. The
# forwarder's CPU (the network) is not counted. Each result's bytes are
# compared with the source (cmp / diff -rq) before it counts.
#
# Needs root. Uses its own prefix (slcw-), so other emulated networks are
# left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${1:?usage: bench/transfer-wan.sh PROFILE}
RUNS=${RUNS:-3}
DATASETS=${DATASETS:-big,small,mixed,tiny}
SECS_BIG=${SECS_BIG:-8} SECS_SMALL=${SECS_SMALL:-4} SECS_MIXED=${SECS_MIXED:-6} SECS_TINY=${SECS_TINY:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
BENCH_DIR=${BENCH_DIR:-/tmp/sluice-bench-wan}
PREFIX=${PREFIX:-slcw-}
P_AGENT_A=17201 P_AGENT_B=17202 P_JOB_A=17203 P_JOB_B=17204 P_SERVE=17230 P_FTP=17211 P_HTTP=17221
# Tools: "default" peers run with no tuning flags; the others are the grid.
# sluice-pN and sluice-ccN are Sluice's fixed settings (--p N for the file;
# --cc N --pp 32 for trees), the sweep --auto is judged against.
TOOLS_BIG=${TOOLS_BIG:-sluice sluice-job sluice-p4 sluice-p8 sluice-p16 sluice-p32 guc guc-fast-p4 guc-fast-p8 guc-fast-p16 rclone rclone-mts16 aria2c-x16 curl}
TOOLS_TREE=${TOOLS_TREE:-sluice sluice-job sluice-cc4 sluice-cc8 sluice-cc16 sluice-cc32 guc-cc4 guc-cc8 guc-cc16 rclone rclone-t16 curl-Z}
DEFAULTS=" sluice sluice-job guc rclone curl "

[ "$(id -u)" = 0 ] || { echo "bench/transfer-wan.sh: needs root (network namespaces)" >&2; exit 1; }
for t in jq python3; do command -v $t >/dev/null || { echo "bench/transfer-wan.sh: needs $t" >&2; exit 1; }; done
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
skipped=()
tool_ok() { # tool: is its program installed?
	case $1 in
	guc*) have globus-url-copy && have globus-gridftp-server ;;
	rclone*) have rclone && have nginx ;;
	aria2c*) have aria2c && have nginx ;;
	curl*) have curl && have nginx ;;
	*) true ;;
	esac
}
keep=()
for t in $TOOLS_BIG; do tool_ok "$t" && keep+=("$t") || skipped+=("$t (not installed)"); done
TOOLS_BIG="${keep[*]}"
keep=()
for t in $TOOLS_TREE; do tool_ok "$t" && keep+=("$t") || skipped+=("$t (not installed)"); done
TOOLS_TREE="${keep[*]}"

go build -o bin/sluice ./cmd/sluice
S=$PWD/bin/sluice
net() { "$S" net --prefix "$PREFIX" "$@"; }
CG=/sys/fs/cgroup/cpuacct
cleanup() {
	net down >/dev/null 2>&1 || true
	# A group is removable only once its last process has exited, which
	# can lag behind net down by a moment.
	for g in "$CG"/slcw-*; do
		for _ in $(seq 50); do [ -d "$g" ] || break; rmdir "$g" 2>/dev/null || sleep 0.1; done
	done
	true
}
trap cleanup EXIT
for g in cli sluice job gftp nginx; do mkdir -p "$CG/slcw-$g"; done
# in GROUP CMD...: run CMD in cpuacct group GROUP (children stay in it).
incg() { local g=$1; shift; sh -c 'echo $$ > "$0"; exec "$@"' "$CG/slcw-$g/tasks" "$@"; }
cpu_ns() { cat "$CG/slcw-$1/cpuacct.usage"; }

net up --profile "$PROFILE" >/dev/null
st=$(net status --json)
RATE_MBPS=$(jq '.links[] | select(.name == "a>b") | .path.rate_mbps // 0' <<<"$st")
RTT=$(jq '[.links[] | select(.name == "a>b" or .name == "b>a") | .path.delay_ms] | add' <<<"$st")
LINK_MBS=$(jq -n "$RATE_MBPS / 8") # MB/s, 10^6 bytes
[ "$(jq -n "$LINK_MBS > 0")" = true ] || { echo "profile $PROFILE has no a>b rate" >&2; exit 1; }

rm -rf "$BENCH_DIR"; mkdir -p "$BENCH_DIR"/{src,dst,state}
chmod 755 "$BENCH_DIR" "$BENCH_DIR/src"; chmod 777 "$BENCH_DIR/dst"
export XDG_STATE_HOME=$BENCH_DIR/state
KEY=$BENCH_DIR/key
$S keygen "$KEY" >/dev/null

# Datasets, flat directories (except big), sized from the link rate.
bytes_for() { jq -n "$LINK_MBS * 1e6 * $1 | floor"; }
declare -A DESC
mkdata() {
	local d=$1 n
	case $d in
	big)
		n=$(($(bytes_for "$SECS_BIG") >> 20))
		head -c $((n << 20)) /dev/urandom >"$BENCH_DIR/src/big"
		DESC[big]="1 file of $n MiB" ;;
	small)
		n=$(($(bytes_for "$SECS_SMALL") >> 20))
		mkdir -p "$BENCH_DIR/src/small"
		python3 - "$BENCH_DIR/src/small" "$n" 1048576 <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%06d" % i), "wb") as f:
        f.write(os.urandom(int(sys.argv[3])))
PY
		DESC[small]="$n files of 1 MiB" ;;
	tiny)
		n=$(($(bytes_for "$SECS_TINY") >> 16))
		mkdir -p "$BENCH_DIR/src/tiny"
		python3 - "$BENCH_DIR/src/tiny" "$n" 65536 <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%06d" % i), "wb") as f:
        f.write(os.urandom(int(sys.argv[3])))
PY
		DESC[tiny]="$n files of 64 KiB" ;;
	mixed)
		# Sizes uniform in 1 B-10 MiB (mean 5 MiB).
		n=$(($(bytes_for "$SECS_MIXED") / (5 << 20)))
		mkdir -p "$BENCH_DIR/src/mixed"
		python3 - "$BENCH_DIR/src/mixed" "$n" <<'PY'
import os, random, sys
random.seed(7)
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%06d" % i), "wb") as f:
        f.write(os.urandom(random.randint(1, 10 << 20)))
PY
		DESC[mixed]="$n files of 1 B-10 MiB" ;;
	*) echo "unknown dataset $d" >&2; exit 1 ;;
	esac
}
IFS=, read -ra sets <<<"$DATASETS"
echo "making datasets (${sets[*]}) in $BENCH_DIR/src" >&2
for d in "${sets[@]}"; do mkdata "$d"; done
chmod -R a+rX "$BENCH_DIR/src"
for d in "${sets[@]}"; do
	(cd "$BENCH_DIR/src" && find "$d" -type f | sort) | jq -R '{source: "sluice://wa/\(.)", destination: "sluice://wb/\(.)"}' |
		jq -s '{label: "bench", files: .}' >"$BENCH_DIR/job-$d.json"
done

# Sources in a; the receiving agent in b.
incg sluice "$S" net --prefix "$PREFIX" exec a -- "$S" agent --listen 198.18.0.1:$P_AGENT_A --root "$BENCH_DIR/src" --name a --token-key "$KEY" >"$BENCH_DIR/agent-a.log" 2>&1 &
incg sluice "$S" net --prefix "$PREFIX" exec b -- "$S" agent --listen 198.18.0.2:$P_AGENT_B --root "$BENCH_DIR/dst" --name b --token-key "$KEY" >"$BENCH_DIR/agent-b.log" 2>&1 &
# The service: sluice serve in b, an agent joined to it in each host
# (named wa and wb); a job lists every file of a dataset.
if [[ " $TOOLS_BIG $TOOLS_TREE " == *" sluice-job "* ]]; then
	incg job "$S" net --prefix "$PREFIX" exec b -- "$S" serve --listen 198.18.0.2:$P_SERVE --data-dir "$BENCH_DIR/serve" >"$BENCH_DIR/serve.log" 2>&1 &
	for _ in $(seq 100); do [ -f "$BENCH_DIR/serve/join.token" ] && break; sleep 0.1; done
	incg job "$S" net --prefix "$PREFIX" exec a -- "$S" agent --listen 198.18.0.1:$P_JOB_A --root "$BENCH_DIR/src" --name wa \
		--server http://b:$P_SERVE --join-token @"$BENCH_DIR/serve/join.token" >"$BENCH_DIR/agent-wa.log" 2>&1 &
	incg job "$S" net --prefix "$PREFIX" exec b -- "$S" agent --listen 198.18.0.2:$P_JOB_B --root "$BENCH_DIR/dst" --name wb \
		--server http://198.18.0.2:$P_SERVE --join-token @"$BENCH_DIR/serve/join.token" >"$BENCH_DIR/agent-wb.log" 2>&1 &
fi
if have globus-gridftp-server; then
	GFTP=$(command -v globus-gridftp-server || echo /usr/sbin/globus-gridftp-server)
	incg gftp "$S" net --prefix "$PREFIX" exec a -- "$GFTP" -aa -p $P_FTP -control-interface 198.18.0.1 -data-interface 198.18.0.1 -anonymous-user nobody -S -pidfile "$BENCH_DIR/gftp.pid" -d error
fi
if have nginx; then
	cat >"$BENCH_DIR/nginx.conf" <<EOF
worker_processes 2; pid $BENCH_DIR/nginx.pid; error_log $BENCH_DIR/nginx.err;
events {}
http { access_log off; sendfile on; autoindex on;
  server { listen 198.18.0.1:$P_HTTP; root $BENCH_DIR/src; } }
EOF
	incg nginx "$S" net --prefix "$PREFIX" exec a -- nginx -c "$BENCH_DIR/nginx.conf"
fi
for _ in $(seq 100); do
	net exec a -- ss -ltnH "sport = :$P_AGENT_A" | grep -q . && net exec b -- ss -ltnH "sport = :$P_AGENT_B" | grep -q . && break
	sleep 0.1
done
TOKEN=$($S data-token --token-key "$KEY" --scope rw --prefix / --aud '*' --ttl 4h)

warm() { # dataset bytes: the source re-read, memory touched, the destination empty
	find "$BENCH_DIR/src/$1" -type f -exec cat {} + >/dev/null
	rm -rf "${BENCH_DIR:?}"/dst/* "$BENCH_DIR"/state/sluice/journal 2>/dev/null || true
	# As much fresh memory as the dataset (at most 1 GiB): its first touch
	# costs seconds per GiB here, which no tool should pay inside its run.
	python3 -c "import sys; b = bytearray(min(1 << 30, int(sys.argv[1]))); b[::4096] = b'\x01' * len(b[::4096])" "$2" 2>/dev/null || true
	sync
}

# server_group tool: the cpuacct group of the tool's servers.
server_group() { case $1 in sluice-job) echo job ;; sluice*) echo sluice ;; guc*) echo gftp ;; *) echo nginx ;; esac; }

# run_tool tool dataset: copy src/DATASET from a into b's dst/DATASET.
run_tool() {
	local t=$1 d=$2 src=$BENCH_DIR/src/$2 dst=$BENCH_DIR/dst
	local http=http://a:$P_HTTP ftp=ftp://a:$P_FTP
	local -a c
	case $t in
	sluice) if [ -d "$src" ]; then c=("$S" cp --token "$TOKEN" -r "sluice://a:$P_AGENT_A/$d" "sluice://198.18.0.2:$P_AGENT_B/$d")
		else c=("$S" cp --token "$TOKEN" "sluice://a:$P_AGENT_A/$d" "sluice://198.18.0.2:$P_AGENT_B/$d"); fi ;;
	sluice-p*) c=("$S" cp --token "$TOKEN" --p "${t#sluice-p}" "sluice://a:$P_AGENT_A/$d" "sluice://198.18.0.2:$P_AGENT_B/$d") ;;
	sluice-cc*) c=("$S" cp --token "$TOKEN" -r --cc "${t#sluice-cc}" --pp 32 "sluice://a:$P_AGENT_A/$d" "sluice://198.18.0.2:$P_AGENT_B/$d") ;;
	sluice-sample) c=("$S" cp --token "$TOKEN" -r --sample "sluice://a:$P_AGENT_A/$d" "sluice://198.18.0.2:$P_AGENT_B/$d") ;;
	sluice-job) # submitted in b, then polled until it is no longer active
		incg cli "$S" net --prefix "$PREFIX" exec b -- env SLUICE_SERVER=http://198.18.0.2:$P_SERVE SLUICE_TOKEN=@"$BENCH_DIR/serve/admin.token" \
			timeout "$RUN_TIMEOUT" bash -c '
			s=$1 job=$2
			id=$("$s" submit -f "$job") || exit 1
			while st=$("$s" status "$id" --json | jq -r .state) && [ "$st" = active ]; do sleep 0.25; done
			[ "$st" = done ] || { echo "job $id ended $st" >&2; "$s" status "$id" --files >&2; exit 1; }' _ "$S" "$BENCH_DIR/job-$d.json" >>"$BENCH_DIR/tools.log" 2>&1
		return ;; # (its CPU includes the polls: two Go processes every 0.25 s)
	guc) c=(globus-url-copy "$ftp$src" "file://$dst/$d") ;;
	guc-fast-p*) c=(globus-url-copy -fast -p "${t#guc-fast-p}" "$ftp$src" "file://$dst/$d") ;;
	guc-cc*) c=(globus-url-copy -r -cd -fast -pp -cc "${t#guc-cc}" "$ftp$src/" "file://$dst/$d/") ;;
	rclone) if [ -d "$src" ]; then c=(rclone copy ":http,url='$http/':$d" "$dst/$d")
		else c=(rclone copyto ":http,url='$http/':$d" "$dst/$d"); fi ;;
	rclone-mts16) c=(rclone copyto --multi-thread-streams 16 ":http,url='$http/':$d" "$dst/$d") ;;
	rclone-t16) c=(rclone copy --transfers 16 ":http,url='$http/':$d" "$dst/$d") ;;
	aria2c-x16) c=(aria2c -q -x16 -s16 -d "$dst" -o "$d" "$http/$d") ;;
	curl) c=(curl -sf -o "$dst/$d" "$http/$d") ;;
	curl-Z) # one curl, every file in parallel (its default of 50 at once)
		mkdir -p "$dst/$d"
		find "$src" -type f -printf 'url = "'"$http/$d"'/%f"\noutput = "'"$dst/$d"'/%f"\n' >"$BENCH_DIR/curl.cfg"
		c=(curl -sf -Z -K "$BENCH_DIR/curl.cfg") ;;
	*) echo "unknown tool $t" >&2; return 1 ;;
	esac
	incg cli timeout "$RUN_TIMEOUT" "$S" net --prefix "$PREFIX" exec b -- "${c[@]}" >>"$BENCH_DIR/tools.log" 2>&1
}

verify() { # dataset
	if [ -d "$BENCH_DIR/src/$1" ]; then diff -rq "$BENCH_DIR/src/$1" "$BENCH_DIR/dst/$1" >/dev/null 2>&1
	else cmp -s "$BENCH_DIR/src/$1" "$BENCH_DIR/dst/$1"; fi
}

filebytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}'; }
declare -A MBS CPU
failures=()
started=$(date +%s)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for d in "${sets[@]}"; do
	bytes=$(filebytes "$BENCH_DIR/src/$d")
	tools=$TOOLS_TREE; [ -f "$BENCH_DIR/src/$d" ] && tools=$TOOLS_BIG
	for r in $(seq 1 "$RUNS"); do
		for t in $tools; do
			warm "$d" "$bytes"
			g=$(server_group "$t")
			c0=$(cpu_ns cli) s0=$(cpu_ns "$g")
			start=$(date +%s.%N)
			if run_tool "$t" "$d"; then
				end=$(date +%s.%N)
				c1=$(cpu_ns cli) s1=$(cpu_ns "$g")
				if ! verify "$d"; then
					failures+=("$d run $r $t: the copy differs from the source")
					echo "$d run $r $t: copy differs from the source" >&2
					continue
				fi
				mbs=$(jq -n "$bytes / ($end - $start) / 1e6 * 10 | round / 10")
				cpu=$(jq -n "($c1 - $c0 + $s1 - $s0) / 1e9 / ($bytes / 1e9) * 100 | round / 100")
				MBS[$d,$t]="${MBS[$d,$t]:-} $mbs"
				CPU[$d,$t]="${CPU[$d,$t]:-} $cpu"
				echo "$d run $r $t: $mbs MB/s, $cpu CPU s/GB" >&2
			else
				rc=$?
				failures+=("$d run $r $t: exit status $rc$([ $rc = 124 ] && echo " (timed out after $RUN_TIMEOUT s)")")
				echo "$d run $r $t: failed ($rc)" >&2
			fi
		done
	done
done
elapsed=$(($(date +%s) - started))
fwd=$(net status --json | jq -r '"\(.cpu_seconds | round) s forwarder CPU; a>b queue drops \(.links[] | select(.name == "a>b") | .queue_drops), random drops \(.links[] | select(.name == "a>b") | .random_drops); TUN tx_dropped \([.hosts[].tun_tx_dropped] | add)"')

median() { [ $# -gt 0 ] && python3 -c "import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 2))" "$@" || echo -; }
echo "# Transfers over the emulated WAN: $PROFILE ($RATE_MBPS Mbit/s = $LINK_MBS MB/s, RTT $RTT ms), a -> b"
echo
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $load0 at the start and $(cut -d' ' -f1-3 /proc/loadavg) at the end; $RUNS interleaved runs per tool, medians; ${elapsed} s of runs. $fwd."
[ ${#skipped[@]} -gt 0 ] && echo && echo "Skipped: ${skipped[*]}."
for d in "${sets[@]}"; do
	tools=$TOOLS_TREE; [ -f "$BENCH_DIR/src/$d" ] && tools=$TOOLS_BIG
	best=0 bestt=- bestdef=0 bestdeft=-
	for t in $tools; do
		[ "${t%%-*}" = sluice ] && continue
		m=$(median ${MBS[$d,$t]:-})
		[ "$m" = - ] && continue
		if [ "$(jq -n "$m > $best")" = true ]; then best=$m bestt=$t; fi
		if [[ $DEFAULTS == *" $t "* ]] && [ "$(jq -n "$m > $bestdef")" = true ]; then bestdef=$m bestdeft=$t; fi
	done
	echo
	echo "## $d: ${DESC[$d]}"
	echo
	echo "Best peer: $bestt ($best MB/s); best peer at its defaults: $bestdeft ($bestdef MB/s)."
	echo
	echo "| tool | MB/s (median) | runs | of link | CPU s/GB | / best peer | / best default peer |"
	echo "|---|---:|---|---:|---:|---:|---:|"
	for t in $tools; do
		m=$(median ${MBS[$d,$t]:-})
		c=$(median ${CPU[$d,$t]:-})
		name=$t; [[ $DEFAULTS == *" $t "* ]] && name="$t (defaults)"
		if [ "$m" = - ]; then echo "| $name | - | failed | | | | |"; continue; fi
		frac=$(jq -n "100 * $m / $LINK_MBS | round")
		# Arguments, not text: jq rejects a literal division by zero even
		# in a branch not taken (no peer measured).
		rb=$(jq -n --argjson m "$m" --argjson b "$best" 'if $b > 0 then ($m / $b * 100 | round / 100) else null end')
		rd=$(jq -n --argjson m "$m" --argjson b "$bestdef" 'if $b > 0 then ($m / $b * 100 | round / 100) else null end')
		# null: no peer measured to divide by (all failed or timed out).
		[ "$rb" = null ] && rb=- || rb=${rb}x
		[ "$rd" = null ] && rd=- || rd=${rd}x
		echo "| $name | $m | ${MBS[$d,$t]# } | $frac% | $c | $rb | $rd |"
	done
done
# Throughput against streams (files or partial transfers at once) for the
# tools swept over them: MB/s medians, one row per tool.
streams_of() { # tool -> streams, or nothing for a tool not swept
	case $1 in
	sluice-p* | sluice-cc*) echo "${1##*[a-z]}" ;;
	guc-fast-p* | guc-cc*) echo "${1##*[a-z]}" ;;
	guc | curl) echo 1 ;;
	rclone) echo 4 ;;
	rclone-mts16 | rclone-t16 | aria2c-x16) echo 16 ;;
	curl-Z) echo 50 ;;
	esac
}
for d in "${sets[@]}"; do
	tools=$TOOLS_TREE; [ -f "$BENCH_DIR/src/$d" ] && tools=$TOOLS_BIG
	echo
	echo "### $d: MB/s against streams"
	echo
	echo "| family | 1 | 4 | 8 | 16 | 32 | 50 | no flags |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	for fam in sluice guc rclone aria2c curl; do
		declare -A row=()
		any=
		for t in $tools; do
			[ "${t%%-*}" = "$fam" ] || continue
			m=$(median ${MBS[$d,$t]:-})
			[ "$m" = - ] && continue
			case $t in sluice | sluice-job | sluice-sample) row[$t]=$m; any=1; continue ;; esac
			n=$(streams_of "$t")
			[ -n "$n" ] && row[$n]=$m && any=1
		done
		[ -n "$any" ] || continue
		nf=${row[sluice]:-}
		[ -n "$nf" ] && nf="$nf (auto)"
		echo "| $fam | ${row[1]:--} | ${row[4]:--} | ${row[8]:--} | ${row[16]:--} | ${row[32]:--} | ${row[50]:--} | ${nf:--} |"
		unset row
	done
done
if [ ${#failures[@]} -gt 0 ]; then
	echo
	echo "Failed runs (not in the medians):"
	for f in "${failures[@]}"; do echo "- $f"; done
fi
