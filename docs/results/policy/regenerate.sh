#!/usr/bin/env bash
# Regenerates docs/results/policy: the five experiments of Chervenak et al. on
# the policy-mini profile (seed 1, with CSVs), and the constrained comparison
# again with seeds 2 and 3 for the median. About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../../.."
make build >/dev/null
out=docs/results/policy
./bin/sluice testbed policy-exp --exp all --csv "$out" --seed 1 | tee "$out/all-seed1.txt"
for s in 2 3; do
  ./bin/sluice testbed policy-exp --exp constrained --seed "$s" --json > "$out/constrained-seed$s.json"
done
