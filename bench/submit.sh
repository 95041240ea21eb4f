#!/usr/bin/env bash
# Submission throughput of the live service on its default store (SQLite):
# one job of 100,000 files (sizes given, as a catalogue would) through
# `sluice submit -f`, from the request to the job id, three times; prints
# each time and the median. Target (issue 4): under 10 s.
set -euo pipefail
BIN=${BIN:-bin/sluice}
N=${SLUICE_BENCH_FILES:-100000}
D=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$D"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve --listen 127.0.0.1:"$port" --data-dir "$D/srv" >"$D/server.log" 2>&1 &
pids+=($!)
for i in $(seq 100); do [ -f "$D/srv/join.token" ] && (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
mkdir -p "$D/a1" "$D/a2"
for n in a1 a2; do
	"$BIN" agent --listen 127.0.0.1:0 --root "$D/$n" --name "$n" --server http://127.0.0.1:"$port" \
		--join-token @"$D/srv/join.token" >"$D/$n.log" 2>&1 &
	pids+=($!)
done
sleep 1
python3 - "$N" >"$D/job.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"label": "bench", "files": [
    {"source": "sluice://a1/bench/%07d" % i, "destination": "sluice://a2/bench/%07d" % i, "size": 1 << 20}
    for i in range(n)]}))
PY
export SLUICE_SERVER=http://127.0.0.1:$port SLUICE_TOKEN=@$D/srv/admin.token
times=()
for run in 1 2 3; do
	t0=$(date +%s.%N)
	id=$("$BIN" submit -f "$D/job.json")
	t1=$(date +%s.%N)
	"$BIN" cancel "$id" >/dev/null # the sources do not exist; keep the store small
	times+=("$(echo "$t1 - $t0" | bc)")
	echo "run $run: $N files accepted in ${times[-1]} s (job $id)"
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
echo "submit: $N files, median $median s over 3 runs (target < 10 s; $(echo "scale=0; $N / $median" | bc) files/s)"
