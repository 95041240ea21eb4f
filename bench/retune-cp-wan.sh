#!/usr/bin/env bash
# Live re-tuning on the emulated WAN: a `sluice cp` with no flags runs
# between agents in hosts a and b of PROFILE (default wan-untuned) while
# the a>b rate is halved at HALVE_AT seconds and then set to three times
# that (1.5x the start) at TRIPLE_AT; cp's tuning windows (--json
# "tuning") are printed with the link's rate, and for each step the
# seconds until the copy ran at 80% of the new rate.
#
#   bash bench/retune-cp-wan.sh [PROFILE]
#
# (bench/retune-wan.sh does the same for a job through sluice serve.)
#
# Needs root. Uses its own prefix (slcr-).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${1:-wan-untuned}
SIZE_MIB=${SIZE_MIB:-3072}
HALVE_AT=${HALVE_AT:-8} TRIPLE_AT=${TRIPLE_AT:-18}
PREFIX=slcr-
D=$(mktemp -d /tmp/sluice-retune.XXXX)
go build -o bin/sluice ./cmd/sluice
S=$PWD/bin/sluice
net() { "$S" net --prefix "$PREFIX" "$@"; }
cleanup() { net down >/dev/null 2>&1 || true; rm -rf "$D"; }
# (net down stops the agents: their namespaces go.)
trap cleanup EXIT
net up --profile "$PROFILE" >/dev/null
RATE=$(net status --json | jq '.links[] | select(.name == "a>b") | .path.rate_mbps')
mkdir -p "$D/a" "$D/b" "$D/state"; chmod 777 "$D/b"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$D/a/f"
"$S" keygen "$D/key" >/dev/null
net exec a -- "$S" agent --listen 198.18.0.1:17501 --root "$D/a" --name a --token-key "$D/key" >"$D/a.log" 2>&1 &
net exec b -- "$S" agent --listen 198.18.0.2:17502 --root "$D/b" --name b --token-key "$D/key" >"$D/b.log" 2>&1 &
for _ in $(seq 100); do net exec b -- ss -ltnH "sport = :17502" | grep -q . && break; sleep 0.1; done
sleep 0.5
T0=$(date +%s.%N)
(
	sleep "$HALVE_AT"; net set 'a>b' "{\"rate_mbps\": $(jq -n "$RATE / 2")}" >/dev/null
	echo "$(jq -n "$(date +%s.%N) - $T0") halve $(jq -n "$RATE / 2")" >>"$D/steps"
	sleep $((TRIPLE_AT - HALVE_AT)); net set 'a>b' "{\"rate_mbps\": $(jq -n "$RATE * 3 / 2")}" >/dev/null
	echo "$(jq -n "$(date +%s.%N) - $T0") triple $(jq -n "$RATE * 3 / 2")" >>"$D/steps"
) &
steps=$!
XDG_STATE_HOME=$D/state net exec b -- "$S" cp --token-key "$D/key" --json sluice://198.18.0.1:17501/f sluice://198.18.0.2:17502/f >"$D/rep.json"
wait "$steps"
cmp -s "$D/a/f" "$D/b/f" || { echo "the copy differs from the source" >&2; exit 1; }
echo "# Re-tuning on $PROFILE: $SIZE_MIB MiB, a>b $RATE Mbit/s, halved at ${HALVE_AT} s, then 1.5x at ${TRIPLE_AT} s"
echo
cat "$D/steps"
echo
echo "| t (s, from cp's first window) | streams | MB/s |"
echo "|---:|---:|---:|"
jq -r '.tuning[] | "| \(.t * 10 | round / 10) | \(.level) | \(.bytes_per_s / 1e5 | round / 10) |"' "$D/rep.json"
jq -r '"copied \(.bytes / 1e6 | round) MB in \(.seconds * 10 | round / 10) s (\(.mb_per_s * 10 | round / 10) MB/s)"' "$D/rep.json"
