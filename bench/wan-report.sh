#!/usr/bin/env bash
# The transfer results of every emulated-WAN profile in one command:
# bench/transfer-wan.sh on each profile (wan-untuned, wan-tuned,
# intercontinental, campus), bench/wanplot for the plots
# (docs/results/plots/transfer-wan-PROFILE-DATASET.svg), and the tables
# and plots written into docs/results/wan.md between its
# "bench/wan-report.sh" markers.
#
#   bash bench/wan-report.sh                        # every profile (about 2 h here)
#   PROFILES="wan-untuned campus" bash bench/wan-report.sh
#   ASSEMBLE=DIR bash bench/wan-report.sh           # only rebuild the section from
#                                                   # DIR/PROFILE.md and DIR/PROFILE.log
#
# Each profile's tools and dataset durations are below (PROFILE_ENV); the
# full grid of bench/transfer-wan.sh on every profile would take about
# 4 hours on a 2-core machine. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILES=${PROFILES:-wan-untuned wan-tuned intercontinental campus}
OUT=${ASSEMBLE:-${OUT:-/tmp/sluice-wan-report}}
DOC=docs/results/wan.md
# What each profile runs: wan-untuned gets the full set (the service's
# job included), the others a grid trimmed to the settings that won there.
declare -A PROFILE_ENV=(
	[wan-untuned]='TOOLS_BIG="sluice sluice-job sluice-p8 sluice-p16 sluice-p32 guc guc-fast-p8 guc-fast-p16 rclone aria2c-x16 curl" TOOLS_TREE="sluice sluice-job sluice-cc8 sluice-cc16 sluice-cc32 guc-cc8 guc-cc16 rclone rclone-t16 curl-Z" SECS_BIG=8 SECS_SMALL=5 SECS_MIXED=6 SECS_TINY=1.5'
	[wan-tuned]='TOOLS_BIG="sluice sluice-p8 sluice-p32 guc guc-fast-p8 guc-fast-p16 rclone aria2c-x16 curl" TOOLS_TREE="sluice sluice-cc8 sluice-cc32 guc-cc8 guc-cc16 rclone rclone-t16 curl-Z" SECS_BIG=8 SECS_SMALL=5 SECS_MIXED=6 SECS_TINY=1.5'
	[intercontinental]='TOOLS_BIG="sluice sluice-p8 sluice-p32 guc guc-fast-p8 guc-fast-p16 rclone aria2c-x16 curl" TOOLS_TREE="sluice sluice-cc8 sluice-cc32 guc-cc8 guc-cc16 rclone rclone-t16 curl-Z" SECS_BIG=10 SECS_SMALL=8 SECS_MIXED=8 SECS_TINY=3'
	[campus]='DATASETS=big,small TOOLS_BIG="sluice sluice-p4 sluice-p16 guc guc-fast-p4 guc-fast-p16 rclone aria2c-x16 curl" TOOLS_TREE="sluice sluice-cc8 sluice-cc32 guc-cc8 guc-cc16 rclone rclone-t16 curl-Z" SECS_BIG=8 SECS_SMALL=5'
)
mkdir -p "$OUT"
if [ -z "${ASSEMBLE:-}" ]; then
	for p in $PROFILES; do
		echo "== $p" >&2
		eval "${PROFILE_ENV[$p]:-} bash bench/transfer-wan.sh $p" >"$OUT/$p.md" 2>"$OUT/$p.log"
	done
fi
section=$(mktemp)
trap 'rm -f "$section"' EXIT
{
	echo "<!-- bench/wan-report.sh: begin (generated; edit the script, not this section) -->"
	echo
	echo "# Transfers over the emulated WAN, every profile"
	echo
	echo "Regenerate with \`bash bench/wan-report.sh\` (method: \`bench/transfer-wan.sh\`'s header and"
	echo "\`docs/results/transfer-wan.md\`). Each table: MB/s medians of 3 interleaved runs, the fraction of the"
	echo "link, CPU seconds per GB at both ends, and the ratios to the best peer at any setting and at its"
	echo "defaults. sluice-pN / sluice-ccN are Sluice's fixed settings; \"sluice\" is \`sluice cp\` with no flags."
	for p in $PROFILES; do
		[ -f "$OUT/$p.md" ] || continue
		go run ./bench/wanplot -profile "$p" -out docs/results/plots "$OUT/$p.log" >/dev/null
		echo
		# One level down: the profile's heading is ## in this page.
		sed -e 's/^### /#### /' -e 's/^## /### /' -e 's/^# /## /' "$OUT/$p.md"
		echo
		for f in docs/results/plots/transfer-wan-"$p"-*.svg; do
			[ -f "$f" ] && echo "![$(basename "$f" .svg)](plots/$(basename "$f"))"
		done
	done
	echo
	echo "<!-- bench/wan-report.sh: end -->"
} >"$section"
python3 - "$DOC" "$section" <<'PY'
import re, sys
doc, sec = sys.argv[1], open(sys.argv[2]).read()
s = open(doc).read()
pat = re.compile(r"<!-- bench/wan-report.sh: begin.*?<!-- bench/wan-report.sh: end -->\n?", re.S)
s = pat.sub(lambda m: sec, s) if pat.search(s) else s.rstrip("\n") + "\n\n" + sec
open(doc, "w").write(s)
PY
echo "wrote the section into $DOC" >&2
