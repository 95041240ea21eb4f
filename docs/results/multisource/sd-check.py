#!/usr/bin/env python3
"""Back-of-envelope check of the SD criterion (README, "Run-to-run spread").

A fluid model of fig4's emulated links (Table 1 scaled as the testbed
scales it: a Mb/s is 0.5 MB/s, the 200 MB file 25 MB), each an AR(1)
series of correlation time TAU around its mean with its SD. It times an
equal split (EAS) and a split in proportion to the means (the plan MS,
NTSS and TCS make on these links, near enough) with perfect knowledge of
the means: no prediction error, no probes. It asks whether a shorter
correlation time than the testbed's 2.5 s would make the proportional
split's SD smaller than EAS's. It is not the evaluation (that is
`sluice testbed multisource`); it is a check of an argument.

    python3 sd-check.py
"""
import math
import random
import statistics as st

LINKS = [(1.51, 0.04), (47.77, 15.77), (39.75, 12.98)]  # Mb/s mean, SD
SIZE = 25e6  # bytes


def run(tau, plan, rng, dt):
    phi = math.exp(-dt / tau)
    x = [rng.gauss(0, 1) for _ in LINKS]  # stationary start
    left = list(plan)
    done = [p <= 0 for p in plan]
    fin = [0.0] * len(LINKS)
    t = 0.0
    while not all(done):
        for i, (m, sd) in enumerate(LINKS):
            x[i] = phi * x[i] + math.sqrt(1 - phi * phi) * rng.gauss(0, 1)
            if done[i]:
                continue
            left[i] -= max(0.05 * m, m + sd * x[i]) * 0.5e6 * dt
            if left[i] <= 0:
                done[i], fin[i] = True, t + dt
        t += dt
    return max(fin)


def main():
    rng = random.Random(1)
    means = [m for m, _ in LINKS]
    prop = [SIZE * m / sum(means) for m in means]
    eas = [SIZE / len(LINKS)] * len(LINKS)
    for tau in (2.5, 0.5, 0.07):
        a = [run(tau, eas, rng, 0.02) for _ in range(30)]
        b = [run(tau, prop, rng, 0.002) for _ in range(60)]
        print(f"correlation time {tau:4} s: EAS {st.mean(a):5.2f} s, SD {st.stdev(a):.3f}; "
              f"proportional {st.mean(b):4.2f} s, SD {st.stdev(b):.3f}")


if __name__ == "__main__":
    main()
