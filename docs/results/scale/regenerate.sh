#!/usr/bin/env bash
# Regenerates the facility-scale results (issue 10): a small facility day
# (50 endpoints, 250,000 transfers; under a minute) and the first 4 hours
# of the full facility day (5,000 endpoints, 25 million transfers a day;
# about 35 minutes of one core, see facility.md). Pass "day" to replay the
# whole 24-hour day instead, with completion times in steps of 50 ms
# (--resolution 0.05; about 2 hours of one core; exact times would take
# about 3.3 hours).
set -euo pipefail
cd "$(dirname "$0")/../../.."
go build -o bin/sluice ./cmd/sluice
out=docs/results/scale
mkdir -p "$out/plots"
cd "$out"
../../../bin/sluice sim facility --endpoints 50 --transfers 250000 \
	--out facility-50ep-250k.json --plot plots | tee facility-50ep-250k.txt
if [ "${1:-}" = day ]; then
	../../../bin/sluice sim facility --endpoints 5000 --transfers 25000000 --hours 24 --resolution 0.05 \
		--progress --out facility-5000ep-25M-day.json --plot plots \
		2> >(tee facility-5000ep-25M-day.progress.txt >&2) | tee facility-5000ep-25M-day.txt
else
	../../../bin/sluice sim facility --endpoints 5000 --transfers 25000000 --hours 24 --until 4 \
		--progress --out facility-5000ep-25M-4h.json --plot plots \
		2> >(tee facility-5000ep-25M-4h.progress.txt >&2) | tee facility-5000ep-25M-4h.txt
fi
echo "wrote $out"
