#!/usr/bin/env python3
"""Generate the core-numerics golden files in tests/golden/core/ from the plain-Python reference
numerics of scripts/golden/core_reference.py (no packages; docs/ALGORITHMS.md sections 1.3, 2):

  lloyd_max.txt   Lloyd-Max centroids:
                  "gauss <b> c_0 .. c_{L-1}", "laplace <b> ...", "sphere <d> <b> ..." (the sphere
                  law scaled by sqrt(d)), full precision, ascending.
  kron_rht.txt    Kronecker Hadamard transforms (Paley H_12, H_20, H_28; no random signs):
                  "x <d> <K> x_0 .. x_{d-1}" then "y <d> <K> y_0 ..", y = (H_K (x) H_P) x / sqrt(d)
                  for x ~ N(0,1) from random.Random(d).

Usage: python3 scripts/golden/gen_core_golden.py [--out tests/golden/core]
Deterministic; writes SHA256SUMS next to the files. tests/unit/test_core_golden.c checks the C
library against these files.
"""
import argparse
import hashlib
import math
import os
import random

import core_reference as ref


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "golden", "core"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    lines = []
    for b in (1, 2, 3, 4):
        c, _, _ = ref.gauss_lloyd(2 ** b)
        lines.append("gauss %d %s" % (b, " ".join("%.10f" % v for v in c)))
    for b in (5, 6, 7, 8):
        c, _, _ = ref.gauss_newton(2 ** b)
        lines.append("gauss %d %s" % (b, " ".join("%.10f" % v for v in c)))
    for b in (1, 2, 3, 4):
        c, _, _ = ref.laplace_lloyd(2 ** b)
        lines.append("laplace %d %s" % (b, " ".join("%.10f" % v for v in c)))
    for d in (64, 80, 96, 128, 256):
        tab = ref.Tabulated(ref.sphere_density(d), -1.0, 1.0)
        for b in (1, 2, 3, 4):
            init = [v / math.sqrt(d) for v in ref.gauss_lloyd(2 ** b)[0]]
            c = ref.grid_lloyd(tab, init)
            lines.append("sphere %d %d %s" % (d, b, " ".join("%.10f" % (v * math.sqrt(d)) for v in c)))
    with open(os.path.join(a.out, "lloyd_max.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    lines = []
    for d, K, HK in ((24, 12, ref.H12), (80, 20, ref.H20), (96, 12, ref.H12), (112, 28, ref.H28),
                     (160, 20, ref.H20), (192, 12, ref.H12), (224, 28, ref.H28)):
        rng = random.Random(d)
        x = [rng.gauss(0, 1) for _ in range(d)]
        y = ref.kron_hadamard(x, K, HK)
        lines.append("x %d %d %s" % (d, K, " ".join("%.9g" % v for v in x)))
        lines.append("y %d %d %s" % (d, K, " ".join("%.9g" % v for v in y)))
    with open(os.path.join(a.out, "kron_rht.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    with open(os.path.join(a.out, "SHA256SUMS"), "w") as f:
        for name in ("lloyd_max.txt", "kron_rht.txt"):
            with open(os.path.join(a.out, name), "rb") as g:
                f.write("%s  %s\n" % (hashlib.sha256(g.read()).hexdigest(), name))


if __name__ == "__main__":
    main()
