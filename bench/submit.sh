#!/usr/bin/env bash
# Submission throughput of the live service on its default store (SQLite):
# one job of 100,000 files (sizes given, as a catalogue would) through
# `sluice submit -f`, from the request to the job id, three times; prints
# each time and the median. Target: under 10 s.
set -euo pipefail
BIN=${BIN:-bin/sluice}
N=${SLUICE_BENCH_FILES:-100000}
source "$(dirname "$0")/../scripts/local-service.sh"
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
