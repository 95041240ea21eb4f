"""Summarizes `sluice testbed compare --json` runs on the sc15 network
profile: per trace and repetition each scheduler's measured averages
beside the simulator's prediction, SEAL's and seal+'s change against the
best baseline, and whether the simulator ranks the schedulers as
measured. Prints Markdown.

    python3 docs/results/sc15-wan/summarize.py docs/results/sc15-wan/compare-*.json
"""
import json
import statistics
import sys

BASELINES = ("basecc1", "basecc2", "basecc4", "basecc8", "basevary")


def rank(vals):
    return [k for k, _ in sorted(vals.items(), key=lambda kv: kv[1])]


def kendall(a, b):
    """Kendall's tau between two orders of the same names."""
    pos = {k: i for i, k in enumerate(b)}
    n = len(a)
    c = d = 0
    for i in range(n):
        for j in range(i + 1, n):
            if pos[a[i]] < pos[a[j]]:
                c += 1
            else:
                d += 1
    return (c - d) / max(1, c + d)


for path in sys.argv[1:]:
    cmp = json.load(open(path))
    runs = cmp["runs"]
    reps = sorted({r["rep"] for r in runs})
    print(f"### {path.split('/')[-1]}: trace {cmp['trace']}, profile {cmp['profile']}, {cmp['date']}\n")
    print("| rep (seed) | scheduler | files verified | avg slowdown | sim | err | avg turnaround s | sim | err | batch avg turnaround s | net GB | random / queue drops |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    errs = []
    for rep in reps:
        rr = [r for r in runs if r["rep"] == rep]
        for r in rr:
            m, p = r["measured"]["interactive"], r["predicted"]["interactive"]
            es = 100 * (p["avg_slowdown"] - m["avg_slowdown"]) / m["avg_slowdown"]
            et = 100 * (p["avg_turnaround"] - m["avg_turnaround"]) / m["avg_turnaround"]
            errs.append((r["scheduler"], es, et))
            b = r["measured"].get("batch", {})
            bt = f"{b['avg_turnaround']:.2f}" if b.get("n") else ""
            net = r.get("network") or {}
            print(f"| {rep} ({r['seed']}) | {r['scheduler']} | {r['verified']}/{r['files']} | {m['avg_slowdown']:.3f} | {p['avg_slowdown']:.3f} | {es:+.0f}% | {m['avg_turnaround']:.3f} | {p['avg_turnaround']:.3f} | {et:+.0f}% | {bt} | {net.get('bytes', 0)/1e9:.2f} | {net.get('random_drops', 0)} / {net.get('queue_drops', 0)} |")
    print()
    within = sum(1 for _, es, et in errs if abs(es) <= 20 and abs(et) <= 20)
    print(f"Simulator within 20% on both averages: {within} of {len(errs)} runs; "
          f"median |error| slowdown {statistics.median(abs(e[1]) for e in errs):.0f}%, turnaround {statistics.median(abs(e[2]) for e in errs):.0f}%.\n")
    for rep in reps:
        rr = {r["scheduler"]: r for r in runs if r["rep"] == rep}
        for metric in ("avg_slowdown", "avg_turnaround"):
            meas = {k: v["measured"]["interactive"][metric] for k, v in rr.items()}
            pred = {k: v["predicted"]["interactive"][metric] for k, v in rr.items()}
            base = {k: v for k, v in meas.items() if k in BASELINES}
            line = f"- rep {rep}, {metric.replace('_', ' ')}: measured order {' < '.join(rank(meas))}; simulated {' < '.join(rank(pred))} (Kendall tau {kendall(rank(meas), rank(pred)):+.2f})"
            if base:
                best = min(base, key=base.get)
                for s in ("seal", "seal+", "steal"):
                    if s in meas:
                        line += f"; {s} vs best baseline {best}: {100 * (meas[s] - base[best]) / base[best]:+.1f}%"
                if "steal" in meas and "seal" in meas:
                    line += f"; steal vs seal (SEAL1): {100 * (meas['steal'] - meas['seal']) / meas['seal']:+.1f}%"
            print(line)
    print()
