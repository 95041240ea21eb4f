#!/usr/bin/env bash
# Round trips on the sc15 network idle and with the source's NIC busy:
# ping from Stampede to Mason (10 ms RTT) for 10 s, alone and while
# iperf3 sends 4 streams each to Yellowstone and Gordon (together more
# than the 588.8 Mbit/s NIC). Needs root, iperf3, ping (iputils-ping).
set -euo pipefail
cd "$(dirname "$0")/../../.."
. docs/results/sc15-wan/net.sh
summary() { tail -1 | sed 's/.*= //'; }
echo "idle:  rtt min/avg/max/mdev $(net exec stampede -- ping -q -i 0.1 -c 100 "$(addr mason)" | summary)"
for h in yellowstone gordon; do net exec "$h" -- iperf3 -s -D -1 >/dev/null; done
sleep 0.3
for h in yellowstone gordon; do net exec stampede -- iperf3 -c "$(addr "$h")" -P 4 -t 14 >/dev/null & done
sleep 3
echo "busy:  rtt min/avg/max/mdev $(net exec stampede -- ping -q -i 0.1 -c 100 "$(addr mason)" | summary)"
wait
