#!/usr/bin/env bash
# Regenerates the SC'15 regime map (docs/results/regime-map.md): the sweep
# over per-connection share, decline, baseline admission and load (10 seeds,
# seven schedulers, SEAL's ablations where it does not win), STEAL against
# SEAL1 and BaseVary over 10 seeds, their JSON in regime-map/, the chart in
# plots/, and the generated section of regime-map.md. Deterministic: the
# same code gives the same files. About 3 minutes on two cores (at most two
# simulations at once).
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/sluice ./cmd/sluice
out=docs/results
doc=$out/regime-map.md
mkdir -p "$out/regime-map"
sweep=(sim sweep --testbed sc15 --trace 25,45,60 --seeds 1..10
	--schedulers basecc1,basecc2,basecc4,basecc8,basevary,seal,seal+
	--param per-stream=0.025,0.05,0.1,0.25 --param decline=none,mild --param admission=arrival,cycle
	--pf 1.5 --beta 0.1
	--ablate cycle=0.1 --ablate pf=off --ablate pf=3 --ablate cc=literal --ablate cycle=0.1+pf=off
	--workers 2)
steal=(sim steal --testbed sc15 --trace 25,45,60,60-hv --lambda 1 --seeds 1..10)
map=$(mktemp)
stl=$(mktemp)
section=$(mktemp)
trap 'rm -f "$map" "$stl" "$section"' EXIT
bin/sluice "${sweep[@]}" --markdown --out "$out/regime-map/sweep.json" --plot "$out/plots" >"$map"
bin/sluice "${steal[@]}" --markdown --out "$out/regime-map/steal.json" >"$stl"
{
	echo "<!-- docs/results/regime-map.sh: begin (generated; edit the script, not this section) -->"
	echo
	echo "## The map (generated)"
	echo
	echo "\`sluice ${sweep[*]} --markdown\`"
	echo
	cat "$map"
	echo
	echo "![regime map](plots/regime-map.svg)"
	echo
	echo "## STEAL over seeds (generated)"
	echo
	echo "\`sluice ${steal[*]} --markdown\`"
	echo
	cat "$stl"
	echo
	echo "<!-- docs/results/regime-map.sh: end -->"
} >"$section"
python3 - "$doc" "$section" <<'PY'
import re, sys
doc, sec = sys.argv[1], open(sys.argv[2]).read()
try:
    s = open(doc).read()
except FileNotFoundError:
    s = ""
pat = re.compile(r"<!-- docs/results/regime-map.sh: begin.*?<!-- docs/results/regime-map.sh: end -->\n?", re.S)
s = pat.sub(lambda m: sec, s) if pat.search(s) else s.rstrip("\n") + "\n\n" + sec
open(doc, "w").write(s)
PY
echo "wrote $doc, $out/regime-map/ and $out/plots/regime-map.{svg,png}" >&2
