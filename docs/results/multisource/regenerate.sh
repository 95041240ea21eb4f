#!/usr/bin/env bash
# Regenerates docs/results/multisource: the paper's four configurations
# (Yang, Schopf, Foster, Table 1), 30 run groups of every policy each,
# alternated; then again with --same-links.
# About 40 minutes on this 2-core machine (fig6's slow links take half).
set -euo pipefail
cd "$(dirname "$0")/../../.."
make build >/dev/null
./bin/sluice testbed multisource --config all --runs 30 --out docs/results/multisource -v
# The same with every policy of a group on the same stretch of the links
# (--same-links; see README.md). The four configurations are independent
# (each has its own agents and emulated links), so they run at once:
# about 20 minutes, fig6 the longest.
mkdir -p docs/results/multisource/same-links
pids=()
for c in fig3 fig4 fig5 fig6; do
	./bin/sluice testbed multisource --config "$c" --runs 30 --same-links \
		--out docs/results/multisource/same-links -v 2>"docs/results/multisource/same-links/$c.log" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done # set -e: a failed configuration fails the script
