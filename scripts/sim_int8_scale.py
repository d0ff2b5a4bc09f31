#!/usr/bin/env python3
"""Scale choice of the int8 codec (docs/ALGORITHMS.md §3.8), simulated on Gaussian vectors (the
law of rotated coordinates): relative MSE ||y - s c||^2 / ||y||^2 of
  absmax     s = sf16(m/127), c = round(y/s)                   (plain absmax, stored scale)
  ls         s = sf16(<y,c0>/<c0,c0>), c = c0 = round(y*127/m)  (least squares of absmax codes)
  ls+recode  as ls, then c = round(y/s) for the stored scale    (what src/codecs/int8.c does)
  0.95 / 0.90 x absmax step (clipping the largest coordinates).
sf16 rounding: 10 significant bits (docs/FORMAT.md §1). Needs numpy (pip install numpy).
Usage: python3 scripts/sim_int8_scale.py [--n 200000] [--seed 1]"""
import argparse

import numpy as np


def sf16(s):
    e = np.floor(np.log2(np.abs(s)))
    q = 2.0 ** (e - 9)
    return np.round(s / q) * q


def codes(y, s):
    return np.clip(np.floor(y / s + 0.5), -127, 127)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    for d in (64, 128):
        y = rng.standard_normal((a.n, d))
        n2 = (y * y).sum(1)

        def err(s, c):
            return (((y - s * c) ** 2).sum(1) / n2).mean()

        m = np.abs(y).max(1, keepdims=True)
        sa = sf16(m / 127)
        c0 = codes(y, m / 127)
        sl = sf16((y * c0).sum(1, keepdims=True) / (c0 * c0).sum(1, keepdims=True))
        print("d=%d absmax %.4e  ls %.4e  ls+recode %.4e  0.95 step %.4e  0.90 step %.4e"
              % (d, err(sa, codes(y, sa)), err(sl, c0), err(sl, codes(y, sl)),
                 err(sf16(0.95 * m / 127), codes(y, sf16(0.95 * m / 127))),
                 err(sf16(0.90 * m / 127), codes(y, sf16(0.90 * m / 127)))))


if __name__ == "__main__":
    main()
