#!/usr/bin/env python3
"""Generate the core-numerics golden files in tests/golden/core/ from the reference
simulations of ALGORITHMS.md (/work/shared/reference, plain Python, no numpy):

  lloyd_max.txt   Lloyd-Max centroids from lloyd_max_tables.py:
                  "gauss <b> c_0 .. c_{L-1}", "laplace <b> ...", "sphere <d> <b> ..." (the sphere
                  law scaled by sqrt(d)), full precision, ascending.
  kron_rht.txt    Kronecker Hadamard transforms from hadamard_nonpow2.py (no random signs):
                  "x <d> <K> x_0 .. x_{d-1}" then "y <d> <K> y_0 ..", y = (H_K (x) H_P) x / sqrt(d)
                  for x ~ N(0,1) from random.Random(d).

Usage: python3 scripts/golden/gen_core_golden.py [--ref /work/shared/reference] [--out tests/golden/core]
Deterministic; writes SHA256SUMS next to the files. tests/unit/test_core_golden.c checks the C
library against these files.
"""
import argparse
import hashlib
import math
import os
import random
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default=os.environ.get("VQ_REFERENCE", "/work/shared/reference"))
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "golden", "core"))
    a = ap.parse_args()
    sys.path.insert(0, a.ref)
    import lloyd_max_tables as lm  # noqa: E402
    import hadamard_nonpow2 as hn  # noqa: E402

    os.makedirs(a.out, exist_ok=True)
    lines = []
    gauss = {}
    for b in (1, 2, 3, 4):
        c, _, _ = lm.lloyd_gauss(2 ** b)
        gauss[b] = c
        lines.append("gauss %d %s" % (b, " ".join("%.10f" % v for v in c)))
    for b in (1, 2, 3, 4):
        c, _, _ = lm.lloyd_laplace(2 ** b)
        lines.append("laplace %d %s" % (b, " ".join("%.10f" % v for v in c)))
    for d in (64, 80, 96, 128, 256):
        grid = lm.make_grid(lm.beta_pdf_factory(d), -1.0, 1.0, 200001)
        for b in (1, 2, 3, 4):
            init = [v / math.sqrt(d) for v in gauss[b]]
            c, _, _ = lm.lloyd_grid(grid, 2 ** b, init)
            lines.append("sphere %d %d %s" % (d, b, " ".join("%.10f" % (v * math.sqrt(d)) for v in c)))
    with open(os.path.join(a.out, "lloyd_max.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    lines = []
    for d, K, HK in ((24, 12, hn.H12), (80, 20, hn.H20), (96, 12, hn.H12), (112, 28, hn.H28),
                     (160, 20, hn.H20), (192, 12, hn.H12), (224, 28, hn.H28)):
        rng = random.Random(d)
        x = [rng.gauss(0, 1) for _ in range(d)]
        y = hn.kron_hadamard(x, K, HK)
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
