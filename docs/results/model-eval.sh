#!/usr/bin/env bash
# Regenerates model-eval.txt and model-eval.json: the throughput models
# (Yin, Yildirim et al.) against three real GridFTP tuning campaigns, each curve
# predicted from a few samples. SGData.csv is the project's calibration
# data (../shared); the other two paths were held out from every choice
# made on it (model/testdata/tuning/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/sluice ./cmd/sluice
out=docs/results
sg=${SGDATA:-../shared/data/xsede-gridftp-tuning/SGData.csv}
paths=("$sg" model/testdata/tuning/BTData.csv model/testdata/tuning/enDataSB.csv)
{
  for d in "${paths[@]}"; do
    echo "=== $d"
    echo
    echo "--- the service's sampling (Algorithm 2, levels 1, 4, 16, ...: the default)"
    bin/sluice model eval --data "$d"
    echo
    echo "--- the paper's doubling (Algorithm 2, levels 1, 2, 4, 8, ...)"
    bin/sluice model eval --data "$d" --growth 2
    echo
    echo "--- the issue's fixed samples 1, 2, 4"
    bin/sluice model eval --data "$d" --samples 1,2,4
    echo
  done
} > "$out/model-eval.txt"
bin/sluice model eval --data "$sg" --json > "$out/model-eval.json"
echo "wrote $out/model-eval.txt and $out/model-eval.json"
