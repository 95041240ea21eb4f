#!/usr/bin/env bash
# Store scale benchmark (the target of docs/SCALING.md): 1 M queued tasks, 10
# k running, 1 k endpoints on PostgreSQL; the start-up claim and the store
# work of one scheduling cycle (claim, cancellations, endpoint loads, snapshot
# build, decision write, progress save), with one server owning every
# partition and with three servers sharing them. Results:
# docs/results/scale/store.md.
#
#   bash bench/store-scale.sh                      # default URL below
#   bash bench/store-scale.sh postgres:///db?host=/var/run/postgresql
#   bash bench/store-scale.sh URL -keep -cycles 20 # further flags: go run ./bench/storescale -h
#
# The URL must allow CREATE DATABASE: the program makes sluice_scale_<pid>
# and drops it at the end (unless -keep). It needs about 1.5 GB of memory
# and, with the defaults, 10-15 minutes on a 2-core machine (over an hour
# with the first ClaimTasks query). The program runs under nice (the
# PostgreSQL backends do not); the machines are noisy, so compare medians.
# At the end it runs server.BenchmarkSnapshot, the live loop's snapshot
# build at the same scale. -snapshot-only times the in-memory snapshot
# build alone, without a database; -load-only -keep leaves a loaded
# database for EXPLAIN work.
set -euo pipefail
cd "$(dirname "$0")/.."
url=postgres:///sluice_test?host=/var/run/postgresql
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  url=$1
  shift
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/storescale" ./bench/storescale
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+dirty'): storescale $* $url"
echo "# $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GB", $2/1048576}' /proc/meminfo), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n 10 "$bin/storescale" "$@" "$url"
# The live loop's own snapshot build at the same scale (server/world.go,
# BenchmarkSnapshot: 1 M queued, 10 k running, 1 k endpoints, no database).
echo
echo "# server.BenchmarkSnapshot (the live code), 5 runs of 10 builds:"
nice -n 10 go test -run '^$' -bench '^BenchmarkSnapshot$' -benchtime 10x -count 5 ./server/ | grep -E '^Benchmark'
