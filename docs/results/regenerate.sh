#!/usr/bin/env bash
# Regenerates the simulator results in this folder from the current code.
# Every figure here comes from running the simulator; nothing is edited by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/sluice ./cmd/sluice
out=docs/results
bin/sluice sim fig2 > "$out/fig2.txt"
for s in 1 2 3; do
  bin/sluice sim compare --trace 25,45,60,45-4x --seed "$s" --schedulers basecc1,basecc2,basecc4,basevary,seal,seal+ > "$out/compare-seed$s.txt"
  bin/sluice sim compare --trace 25,45,60,45-4x --seed "$s" --schedulers basecc1,basecc2,basecc4,basevary,seal,seal+ --json > "$out/compare-seed$s.json"
  bin/sluice sim steal --trace 25,45,60,60-hv --lambda 1,0.9,0.8 --seed "$s" > "$out/steal-seed$s.txt"
  bin/sluice sim steal --trace 25,45,60,60-hv --lambda 1,0.9,0.8 --seed "$s" --json > "$out/steal-seed$s.json"
done
# The charts of seed 1 (SC'15 Figures 3 and 6).
bin/sluice sim compare --trace 25,45,60,45-4x --seed 1 --schedulers basecc1,basecc2,basecc4,basevary,seal,seal+ --plot "$out/plots" > /dev/null
bin/sluice sim steal --trace 25,45,60,60-hv --lambda 1,0.9,0.8 --seed 1 --plot "$out/plots" > /dev/null
# The regime map: SEAL and seal+ over per-connection share, decline, the
# baselines' admission and load, with intervals, and STEAL over seeds.
bash "$out/regime-map.sh"
echo "wrote $out"
