"""Derives the simulator's sc15-wan testbed from calibrate.sh's iperf3
measurements of the sc15 network profile and prints both as one JSON
document: {"measured": ..., "testbed": ...}.

The model is the one package emul and the simulator share (sim.Testbed
with per-connection caps): a task with c connections on a path moves at
most c times one connection's rate there, and the path carries what the
endpoints allow. So per destination:
  - conn_gbps: the median rate of one stream (loss over the path's RTT
    limits it, so it differs by path);
  - capacity_gbps: the most any number of streams reached (its NIC);
and the source's capacity is the most the five paths reached together.
A decline with more connections is fitted only if the source's aggregate
falls by more than 5% from its best as the streams grow (it did not:
drop-tail queues and fair sharing, no disks or CPUs that thrash).
With a second file (calibrate-sizes.sh: one stream moving 256 KiB to
64 MiB, the scaled traces' sizes), each path's conn_gbps and start-up come
instead from a least-squares fit of time = start-up + size / rate to those
transfers, plus one round trip for the request iperf3's timer does not
see: the rate a connection reaches over the sizes that are transferred,
slow start and all, rather than the steady rate of an 8 s stream.

Without it, startup_seconds: per path, a finite one-stream transfer's time beyond
what the steady one-stream rate explains, but at least two round trips
(the TCP handshake and the request, from the profile's delays: a short
transfer can beat the steady rate of a lossy path, having met no loss
yet, which makes the excess negative); the median over paths.
"""
import json
import statistics
import sys

m = json.load(open(sys.argv[1]))
mini = json.load(open("sim/testbeds/sc15-mini.json"))
profile = json.load(open("wan/profiles/sc15.json"))
rtt = {l["hosts"][1]: 2 * l["delay_ms"] / 1000 for l in profile["links"]}

def size_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)

eps = []
startups = []
for p in m["paths"]:
    med = {int(k): v["median_mbps"] for k, v in p["streams"].items()}
    one = med[1]
    cap = max(med.values())
    small = p["small"]
    excess = small["median_seconds"] - size_bytes(small["bytes"]) * 8 / (one * 1e6)
    startups.append(max(excess, 2 * rtt[p["host"]]))
    eps.append({"name": p["host"], "capacity_gbps": round(cap / 1000, 4), "conn_gbps": round(min(one, cap) / 1000, 4)})
src = {int(k): v["median_mbps"] for k, v in m["source"].items()}
best = max(src.values())
decline = any(src[k] < 0.95 * best for k in src if k > max(src, key=src.get))
# Five iperf3 clients started one after another each report their own
# mean over their own interval, so the sum overstates the source a little
# (611 Mbit/s through a 588.8 Mbit/s NIC). The source is capped at its NIC
# times the goodput fraction the single paths measured against theirs.
nic = {h["name"]: h["nic"]["egress_mbps"] for h in profile["hosts"]}
goodput = statistics.median(e["capacity_gbps"] * 1000 / nic[e["name"]] for e in eps)
fits = {}
if len(sys.argv) > 2:
    pts = {}
    for x in json.load(open(sys.argv[2]))["sizes"]:
        pts.setdefault(x["host"], []).append((size_bytes(x["bytes"]), x["seconds"]))
    for e in eps:
        xs, ys = zip(*pts[e["name"]])
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        a = my - k * mx
        rate = 8 / k / 1e9  # Gbit/s
        fits[e["name"]] = {"startup_s": round(a, 4), "rate_gbps": round(rate, 4)}
        e["conn_gbps"] = round(min(rate, e["capacity_gbps"]), 4)
    startups = [max(fits[e["name"]]["startup_s"], 0) + rtt[e["name"]] for e in eps]
source = {"name": "stampede", "capacity_gbps": round(min(best, goodput * nic["stampede"]) / 1000, 4)}
tb = {
    "name": "sc15-wan",
    "description": "The sc15 network profile (kernel TCP over the emulated WAN, package wan) as the simulator models it, every figure measured with iperf3 by docs/results/sc15-wan/calibrate.sh and fitted by fit.py, never from a scheduler's run: per destination one connection's rate (conn_gbps) and the most its NIC carried (capacity_gbps), the source's aggregate with all five receiving, no contention decline (none was measured), the start-up cost of a connection from finite transfers (at least two round trips). Traces replay as on sc15-mini (the same scale); run with `sluice testbed compare --profile sc15-wan --net sc15`.",
    "source": "stampede",
    "total_max_cc": mini["total_max_cc"],
    "chunk_min_bytes": mini["chunk_min_bytes"],
    "replay": {"size_scale": mini["replay"]["size_scale"], "time_scale": mini["replay"]["time_scale"],
               "startup_seconds": round(max(0.0, statistics.median(startups)), 3)},
    "endpoints": [source] + eps,
}
if fits:
    tb["description"] += " Here conn_gbps and startup_seconds are fitted instead to one-stream transfers of 256 KiB to 64 MiB, the sizes the scaled traces move (calibrate-sizes.sh): time = start-up + size / rate per path, plus the request's round trip."
if decline:
    tb["description"] += " NOTE: the source's aggregate declined with more streams; the fit has no term for it."
json.dump({"measured": m, "size_fits": fits, "source_sum_mbps": round(best, 1), "goodput_fraction": round(goodput, 4), "startups_seconds": [round(s, 3) for s in startups], "source_declines": decline, "testbed": tb}, sys.stdout, indent=1)
print()
