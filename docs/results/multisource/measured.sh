#!/usr/bin/env bash
# Regenerates docs/results/multisource/measured/ (see ../measured.md): the
# paper's four configurations with every link playing measured FCC series
# (traces/), every policy of a group on the same stretch of the links, 30
# groups; then the EAS comparison again (EAS and TCS only, fig4-fig6) with
# the slow links' level drifting by 5%, 10% and 20% every 10 s.
# All thirteen evaluations run at once (each has its own agents and links;
# they wait on the emulated links far more than they compute): about 20
# minutes on this 2-core machine, fig6's main evaluation the longest.
set -euo pipefail
cd "$(dirname "$0")/../../.."
make build >/dev/null
out=docs/results/multisource/measured
tr=docs/results/multisource/traces
mkdir -p "$out/main"
pids=()
for c in fig3 fig4 fig5 fig6; do
	./bin/sluice testbed multisource --config "$c" --runs 30 --same-links --traces "$tr" \
		--out "$out/main" -v 2>"$out/main/$c.log" &
	pids+=($!)
done
for d in 0.05 0.10 0.20; do
	dir="$out/drift-${d#0.}"
	mkdir -p "$dir"
	for c in fig4 fig5 fig6; do
		./bin/sluice testbed multisource --config "$c" --runs 30 --same-links --traces "$tr" \
			--policies eas,tcs --slow-drift "$d" --out "$dir" -v 2>"$dir/$c.log" &
		pids+=($!)
	done
done
for p in "${pids[@]}"; do wait "$p"; done # set -e: a failed evaluation fails the script
# The tables again from the saved runs (the same figures as the .txt files).
for d in main drift-05 drift-10 drift-20; do
	./bin/sluice testbed multisource --show "$(ls "$out/$d"/fig*.json | paste -sd,)" >"$out/$d/summary.txt"
done
