#!/usr/bin/env python3
"""Cuts the measured link series of `sluice testbed multisource --traces`.

Reads the FCC Measuring Broadband America series that Kan et al. keep in
their MIT-licensed collection (Real-world-bandwidth-traces, directory
fcc_ori/cooked_traces: one file per measuring unit and web target, lines
"time_s<TAB>Mbit/s"), and writes into this directory:

  fcc/<file>   the chosen series, byte for byte as in the source
  links.tsv    config, link, Table 1 mean and SD (Mb/s), the series that
               drive the link, in order (comma-separated)

The rule (no randomness, no look at any policy's result):
  1. The pool is every file of fcc_ori/cooked_traces whose name starts
     with "trace_" (the FCC series; the directory also holds Norway HSDPA
     logs, which are not used) and that has at least MIN_SAMPLES lines.
  2. A series' relative variation is its coefficient of variation (SD /
     mean, population SD over all its samples).
  3. For each configuration of Yang, Schopf and Foster's Table 1, the three
     links take series in turns (link 1, 2, 3, 1, 2, 3, ...): at its turn a
     link takes the unused series (unused within this configuration) whose
     CV is nearest its Table 1 SD / mean, ties broken by file name, until it
     has at least NEED_SAMPLES samples. Configurations may share series.
The testbed scales each series on its own to the link's Table 1 mean
(multiplying every sample by mean / the series' mean, so its CV is kept)
and plays the link's series one after another, one sample per 0.25 s.

    python3 cut.py /path/to/Real-world-bandwidth-traces
(a checkout, or a bare git directory: then the files are read with git show)
"""
import os
import shutil
import statistics
import subprocess
import sys

MIN_SAMPLES = 200
NEED_SAMPLES = 1600
SRC = "fcc_ori/cooked_traces"

# Table 1: (link, mean Mb/s, SD Mb/s) per configuration.
TABLE1 = {
    "fig3": [("cirque.ucsd.edu", 3.51, 1.44), ("nouba.ucsd.edu", 51.02, 23.79), ("dralion.ucsd.edu", 19.43, 12.76)],
    "fig4": [("torc1.cs.utk.edu", 1.51, 0.04), ("nouba.ucsd.edu", 47.77, 15.77), ("dralion.ucsd.edu", 39.75, 12.98)],
    "fig5": [("torc1.cs.utk.edu", 1.54, 0.025), ("mssc01.cs.utk.edu", 1.70, 0.032), ("dralion.ucsd.edu", 48.99, 11.59)],
    "fig6": [("torc1.cs.utk.edu", 1.56, 0.051), ("mssc01.cs.utk.edu", 1.72, 0.012), ("mckinley.cs.uh.edu", 2.71, 0.174)],
}


def reader(root):
    if os.path.isdir(os.path.join(root, SRC)):
        names = sorted(os.listdir(os.path.join(root, SRC)))
        return names, lambda n: open(os.path.join(root, SRC, n), "rb").read()
    out = subprocess.run(["git", "--git-dir", root, "ls-tree", "--name-only", "HEAD", SRC + "/"],
                         check=True, capture_output=True, text=True).stdout
    names = sorted(os.path.basename(l) for l in out.split("\n") if l)
    return names, lambda n: subprocess.run(["git", "--git-dir", root, "show", f"HEAD:{SRC}/{n}"],
                                           check=True, capture_output=True).stdout


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    names, read = reader(sys.argv[1])
    pool = {}
    raw = {}
    for n in names:
        if not n.startswith("trace_"):
            continue
        data = read(n)
        xs = [float(l.split()[1]) for l in data.decode().splitlines() if l.strip()]
        if len(xs) < MIN_SAMPLES:
            continue
        m = statistics.fmean(xs)
        pool[n] = (statistics.pstdev(xs) / m, len(xs))
        raw[n] = data
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "fcc")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    used_any = set()
    rows = []
    for cfg, links in TABLE1.items():
        used = set()
        chains = [[] for _ in links]
        have = [0] * len(links)
        while min(have) < NEED_SAMPLES:
            for i, (name, mean, sd) in enumerate(links):
                if have[i] >= NEED_SAMPLES:
                    continue
                target = sd / mean
                best = min((n for n in pool if n not in used), key=lambda n: (abs(pool[n][0] - target), n))
                used.add(best)
                chains[i].append(best)
                have[i] += pool[best][1]
        for i, (name, mean, sd) in enumerate(links):
            rows.append((cfg, name, mean, sd, chains[i]))
            used_any.update(chains[i])
            cvs = ", ".join(f"{pool[n][0]:.3f}" for n in chains[i])
            print(f"{cfg} {name:20s} Table 1 CV {sd / mean:.3f}; series CVs {cvs}; {have[i]} samples")
    for n in sorted(used_any):
        with open(os.path.join(out, n), "wb") as f:
            f.write(raw[n])
    with open(os.path.join(here, "links.tsv"), "w") as f:
        f.write("# config\tlink\tmean_mbps\tsd_mbps\tseries (played in this order)\n")
        for cfg, name, mean, sd, chain in rows:
            f.write(f"{cfg}\t{name}\t{mean}\t{sd}\t{','.join('fcc/' + n for n in chain)}\n")
    print(f"{len(used_any)} series of {len(pool)} in the pool")


if __name__ == "__main__":
    main()
