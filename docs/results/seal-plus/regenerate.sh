#!/usr/bin/env bash
# Regenerates the seal+ results (issue 11): the grid sweep and the ablation
# on the default cell. About five minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/../../.."
go build -o bin/sluice ./cmd/sluice
out=docs/results/seal-plus
base=basecc1,basecc2,basecc4,basevary
grid=(--param per-stream=1,0.25,0.1 --param decline=none,mild,strong --param burstiness=0.05,1.2)
bin/sluice sim sweep --trace 25,45,60 --seeds 1..10 --schedulers "$base,seal,seal+" "${grid[@]}" --json > "$out/sweep-grid.json"
bin/sluice sim sweep --trace 25,45,60 --seeds 1..10 --schedulers "$base,seal,seal+" "${grid[@]}" > "$out/sweep-grid.txt"
ablation=seal,seal+
for c in arrival cost retune idle-beta short-first guard startup; do ablation="$ablation,seal+:$c,seal+:-$c"; done
ablation=${ablation/seal+:-startup/seal+:arrival+cost+retune+idle-beta+short-first+guard+startup}
bin/sluice sim sweep --trace 25,45,60 --seeds 1..10 --schedulers "$base,$ablation" --json > "$out/ablation-default.json"
echo "wrote $out"
