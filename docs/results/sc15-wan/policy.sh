#!/usr/bin/env bash
# The constrained comparison of Chervenak et al. (Table VIII, Fig. 9) on
# kernel TCP: one adaptive client with the Policy Service against the
# non-adaptive client (128 files x 8 streams), the data crossing the
# intercontinental network profile (150 ms RTT, 500 Mbit/s, 0.01% loss)
# from host a to host b, every file verified. Seeds 1-3 draw the file sizes.
#
#   bash docs/results/sc15-wan/policy.sh          # about 6 minutes; needs root
#   ALL=1 bash docs/results/sc15-wan/policy.sh    # also Tables IV-VII over wan-untuned (+8 min)
#
# Tables IV-VII (slow and fast clients and Policy Services, 8 clients,
# NERSC to UNL in the paper) run over wan-untuned: 50 ms RTT, 1 Gbit/s,
# 2 MB buffers, so one stream is window-limited and the number of streams
# a client is allowed decides its rate.
set -euo pipefail
cd "$(dirname "$0")/../../.."
SEEDS=${SEEDS:-1 2 3}
go build -o bin/sluice ./cmd/sluice
for s in $SEEDS; do
	bin/sluice testbed policy-exp --profile policy-wan --net intercontinental --exp constrained \
		--seed "$s" --json -v > "docs/results/sc15-wan/policy-constrained-$s.json"
done
if [ "${ALL:-0}" = 1 ]; then
	bin/sluice testbed policy-exp --profile policy-wan --net wan-untuned \
		--exp slow-client,fast-client,slow-ps,fast-ps --json -v > docs/results/sc15-wan/policy-tables-4-7.json
	jq -r '.[] | [.experiment, .seconds, (.bytes / .seconds / 1e6), .peak_streams] | @tsv' docs/results/sc15-wan/policy-tables-4-7.json
fi
python3 - "$@" <<'PY'
import json, statistics
rows = []
for s in (1, 2, 3):
    try:
        runs = json.load(open(f"docs/results/sc15-wan/policy-constrained-{s}.json"))
    except FileNotFoundError:
        continue
    by = {r["variant"]: r for r in runs}
    a, n = by["adaptive"], by["non-adaptive"]
    rows.append((s, a["seconds"], n["seconds"], 100 * (n["seconds"] - a["seconds"]) / n["seconds"], a["peak_streams"], n["peak_streams"]))
print("| seed | adaptive with the Policy Service (s) | non-adaptive (s) | adaptive sooner by | peak streams (adaptive / non-adaptive) |")
print("|---|---|---|---|---|")
for s, a, n, d, pa, pn in rows:
    print(f"| {s} | {a:.1f} | {n:.1f} | {d:.1f}% | {pa} / {pn} |")
if rows:
    print(f"\nmedian: adaptive sooner by {statistics.median(r[3] for r in rows):.1f}%")
PY
