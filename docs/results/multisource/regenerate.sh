#!/usr/bin/env bash
# Regenerates docs/results/multisource: the paper's four configurations
# (seed paper 002, Table 1), 30 run groups of every policy each, alternated.
# About 40 minutes on this 2-core machine (fig6's slow links take half).
set -euo pipefail
cd "$(dirname "$0")/../../.."
make build >/dev/null
./bin/sluice testbed multisource --config all --runs 30 --out docs/results/multisource -v
