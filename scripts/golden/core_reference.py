#!/usr/bin/env python3
"""Plain-Python (no packages) reference numerics behind tests/golden/core: Lloyd-Max codebooks
and the Kronecker Hadamard transform, written independently of the C library so that the
golden files test it against a second implementation (docs/ALGORITHMS.md sections 1.3, 2).

Contents
  gauss_lloyd(L)          Lloyd-Max quantizer of N(0,1): closed-form cell means
                          (phi(a) - phi(b)) / (Phi(b) - Phi(a)), iterated to 1e-15.
  gauss_newton(L)         the same fixed point for many levels (L = 32..256, where the plain
                          iteration converges too slowly): Newton steps on c -> cell means(c)
                          - c, whose Jacobian is tridiagonal, from the pdf^(1/3) (N(0, 3))
                          quantiles.
  laplace_lloyd(L)        Lloyd-Max quantizer of Laplace(0, 1) (density exp(-|x|)/2, variance 2):
                          closed-form cell means on the positive half, mirrored.
  sphere_density(d)       density of one coordinate of a uniform random unit vector in R^d,
                          Gamma(d/2) / (sqrt(pi) Gamma((d-1)/2)) (1 - y^2)^((d-3)/2) on [-1, 1].
  Tabulated(pdf, lo, hi)  cumulative trapezoid integrals of f and y f on a uniform grid,
                          normalized; interval mass and first moment by linear interpolation.
  grid_lloyd(tab, init)   Lloyd iteration on a Tabulated law, iterated to 1e-13.
  paley_i(q), paley_ii(q) Hadamard matrices of order q + 1 (q prime, q = 3 mod 4) and 2(q + 1)
                          (q prime, q = 1 mod 4); H12 = paley_i(11), H20 = paley_i(19),
                          H28 = paley_ii(13).
  sphere_scaled_mse(d, c) d * MSE of a sqrt(d)-scaled codebook on that law.
  polar_angle_lloyd(l, b) PolarQuant level-l angle codebook (density sin(2 psi)^(2^(l-1)-1)).
  kron_hadamard(x, K, H)  (H_K kron H_P) x / sqrt(d) for d = K P, P a power of two, x indexed
                          x[k P + p]: a Walsh-Hadamard transform inside each block of P, then
                          the K x K matrix mixes position p of all blocks. No random signs.

Run as a script it prints the tables (codebooks with their MSE, Hadamard checks).
"""
import math

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _pdf_n(x):
    return 0.0 if math.isinf(x) else math.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _cdf_n(x):
    if x == math.inf:
        return 1.0
    if x == -math.inf:
        return 0.0
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _midpoints(c):
    return [(c[i] + c[i + 1]) / 2 for i in range(len(c) - 1)]


def gauss_lloyd(L, max_iter=20000, tol=1e-15):
    """Centroids (ascending), boundaries and MSE of the L-level N(0,1) Lloyd-Max quantizer."""
    c = [-2.5 + 5.0 * (i + 0.5) / L for i in range(L)]
    for _ in range(max_iter):
        edges = [-math.inf] + _midpoints(c) + [math.inf]
        new = []
        for i in range(L):
            lo, hi = edges[i], edges[i + 1]
            new.append((_pdf_n(lo) - _pdf_n(hi)) / (_cdf_n(hi) - _cdf_n(lo)))
        moved = max(abs(a - b) for a, b in zip(c, new))
        c = new
        if moved < tol:
            break
    t = _midpoints(c)
    edges = [-math.inf] + t + [math.inf]
    mse = 1.0 - sum(c[i] ** 2 * (_cdf_n(edges[i + 1]) - _cdf_n(edges[i])) for i in range(L))
    return c, t, mse


def gauss_newton(L, max_iter=100, tol=1e-14):
    """Centroids (ascending), boundaries and MSE of the L-level N(0,1) Lloyd-Max quantizer by
    Newton's method on the full (not half) codebook; L even."""
    def inv_cdf3(p):  # quantile of N(0, 3) by bisection
        lo, hi = -20.0, 20.0
        for _ in range(200):
            mid = (lo + hi) / 2
            if _cdf_n(mid / math.sqrt(3.0)) < p:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    c = [inv_cdf3((i + 0.5) / L) for i in range(L)]
    for _ in range(max_iter):
        edges = [-math.inf] + _midpoints(c) + [math.inf]
        sub, diag, sup, rhs = [0.0] * L, [0.0] * L, [0.0] * L, [0.0] * L
        moved = 0.0
        for i in range(L):
            a, b = edges[i], edges[i + 1]
            P = _cdf_n(b) - _cdf_n(a)
            m = (_pdf_n(a) - _pdf_n(b)) / P
            dma = 0.0 if math.isinf(a) else _pdf_n(a) * (m - a) / P
            dmb = 0.0 if math.isinf(b) else _pdf_n(b) * (b - m) / P
            sub[i], sup[i], diag[i] = dma / 2, dmb / 2, (dma + dmb) / 2 - 1.0
            rhs[i] = c[i] - m
            moved = max(moved, abs(m - c[i]))
        if moved < tol:
            break
        for i in range(1, L):
            f = sub[i] / diag[i - 1]
            diag[i] -= f * sup[i - 1]
            rhs[i] -= f * rhs[i - 1]
        x = [0.0] * L
        x[L - 1] = rhs[L - 1] / diag[L - 1]
        for i in range(L - 2, -1, -1):
            x[i] = (rhs[i] - sup[i] * x[i + 1]) / diag[i]
        c = [c[i] + x[i] for i in range(L)]
    t = _midpoints(c)
    edges = [-math.inf] + t + [math.inf]
    mse = 1.0 - sum(c[i] ** 2 * (_cdf_n(edges[i + 1]) - _cdf_n(edges[i])) for i in range(L))
    return c, t, mse


def _laplace_cell(a, b):
    """Mass and first moment of exp(-x)/2 on (a, b), 0 <= a < b <= inf."""
    ea = math.exp(-a)
    eb = 0.0 if b == math.inf else math.exp(-b)
    mass = 0.5 * (ea - eb)
    moment = 0.5 * ((a + 1) * ea - (0.0 if b == math.inf else (b + 1) * eb))
    return mass, moment


def laplace_lloyd(L, max_iter=200000, tol=1e-15):
    """Centroids, boundaries (full, ascending) and MSE of the L-level Laplace(0,1) quantizer
    (L even: 0 is a boundary, so the positive half is solved alone and mirrored)."""
    half = L // 2
    c = [0.5 + 1.5 * i for i in range(half)]
    for _ in range(max_iter):
        edges = [0.0] + _midpoints(c) + [math.inf]
        new = []
        for i in range(half):
            mass, moment = _laplace_cell(edges[i], edges[i + 1])
            new.append(moment / mass)
        moved = max(abs(a - b) for a, b in zip(c, new))
        c = new
        if moved < tol:
            break
    t = _midpoints(c)
    edges = [0.0] + t + [math.inf]
    energy = 0.0
    for i in range(half):
        mass, _ = _laplace_cell(edges[i], edges[i + 1])
        energy += 2 * mass * c[i] ** 2
    full_c = [-v for v in reversed(c)] + c
    full_t = [-v for v in reversed(t)] + [0.0] + t
    return full_c, full_t, 2.0 - energy


def sphere_density(d):
    """Density of one coordinate of a uniform unit vector in R^d (d >= 3) on [-1, 1]."""
    log_norm = math.lgamma(d / 2) - 0.5 * math.log(math.pi) - math.lgamma((d - 1) / 2)
    a = (d - 3) / 2

    def f(y):
        u = 1 - y * y
        return 0.0 if u <= 0 else math.exp(log_norm + a * math.log(u))
    return f


class Tabulated:
    """A law given by its density on [lo, hi], integrated on n uniform grid points."""

    def __init__(self, pdf, lo, hi, n=200001):
        self.lo, self.n = lo, n
        self.h = h = (hi - lo) / (n - 1)
        self.y = [lo + i * h for i in range(n)]
        f = [pdf(v) for v in self.y]
        F, M = [0.0], [0.0]
        for i in range(1, n):
            F.append(F[-1] + 0.5 * h * (f[i - 1] + f[i]))
            M.append(M[-1] + 0.5 * h * (self.y[i - 1] * f[i - 1] + self.y[i] * f[i]))
        z = F[-1]
        self.F = [v / z for v in F]
        self.M = [v / z for v in M]

    def cumulative(self, x):
        """(mass below x, first moment below x), linear between grid points."""
        if x <= self.y[0]:
            return 0.0, 0.0
        if x >= self.y[-1]:
            return self.F[-1], self.M[-1]
        k = min(int((x - self.lo) / self.h), self.n - 2)
        w = (x - self.y[k]) / self.h
        return (self.F[k] + w * (self.F[k + 1] - self.F[k]),
                self.M[k] + w * (self.M[k + 1] - self.M[k]))


def grid_lloyd(tab, init, max_iter=5000, tol=1e-13):
    """Lloyd-Max centroids (ascending) of a Tabulated law from the starting centroids init."""
    c = list(init)
    L = len(c)
    for _ in range(max_iter):
        edges = [-1e300] + _midpoints(c) + [1e300]
        new = []
        for i in range(L):
            fa, ma = tab.cumulative(edges[i])
            fb, mb = tab.cumulative(edges[i + 1])
            new.append((mb - ma) / (fb - fa) if fb - fa > 1e-300 else c[i])
        moved = max(abs(a - b) for a, b in zip(c, new))
        c = new
        if moved < tol:
            break
    return c


def sphere_lloyd(d, bits):
    """sqrt(d)-scaled Lloyd-Max centroids of the unit-vector coordinate law in R^d, started
    from the N(0,1) centroids / sqrt(d)."""
    tab = Tabulated(sphere_density(d), -1.0, 1.0)
    init = [v / math.sqrt(d) for v in gauss_lloyd(2 ** bits)[0]]
    return [v * math.sqrt(d) for v in grid_lloyd(tab, init)]


def sphere_scaled_mse(d, cb, tab=None):
    """d * MSE of the sqrt(d)-scaled codebook cb (ascending, midpoint boundaries) on the
    unit-vector coordinate law in R^d: E[Y^2] - 2 sum c_i M_i + sum c_i^2 P_i with E[Y^2] = 1/d,
    which holds for any codebook (not only a Lloyd-Max one)."""
    tab = tab or Tabulated(sphere_density(d), -1.0, 1.0)
    c = [v / math.sqrt(d) for v in cb]
    edges = [-1e300] + _midpoints(c) + [1e300]
    mse = 1.0 / d
    for i in range(len(c)):
        fa, ma = tab.cumulative(edges[i])
        fb, mb = tab.cumulative(edges[i + 1])
        mse += -2 * c[i] * (mb - ma) + c[i] ** 2 * (fb - fa)
    return d * mse


def polar_angle_lloyd(level, bits):
    """Lloyd-Max centroids (radians, ascending) of a PolarQuant level >= 2 angle, density
    proportional to sin(2 psi)^(2^(level-1) - 1) on [0, pi/2]."""
    e = 2 ** (level - 1) - 1
    tab = Tabulated(lambda x: max(math.sin(2 * x), 0.0) ** e, 0.0, math.pi / 2, 20001)
    L = 2 ** bits
    return grid_lloyd(tab, [math.pi / 4 + (i - (L - 1) / 2) * 0.3 / L for i in range(L)])


def _legendre(a, q):
    a %= q
    if a == 0:
        return 0
    return 1 if pow(a, (q - 1) // 2, q) == 1 else -1


def paley_i(q):
    """Hadamard matrix of order q + 1: first row +1; row i + 1 = [-1, chi(j - i) + [i == j]]."""
    rows = [[1] * (q + 1)]
    for i in range(q):
        rows.append([-1] + [_legendre(j - i, q) + (1 if i == j else 0) for j in range(q)])
    return rows


def paley_ii(q):
    """Hadamard matrix of order 2(q + 1) from the symmetric conference matrix C of order q + 1:
    an entry 0 becomes [[1, 1], [1, -1]], an entry s = +-1 becomes s [[1, -1], [-1, -1]]."""
    m = q + 1
    conf = [[0] * m for _ in range(m)]
    for j in range(1, m):
        conf[0][j] = conf[j][0] = 1
    for i in range(q):
        for j in range(q):
            conf[i + 1][j + 1] = _legendre(j - i, q)
    zero_blk, sign_blk = ((1, 1), (1, -1)), ((1, -1), (-1, -1))
    out = [[0] * (2 * m) for _ in range(2 * m)]
    for i in range(m):
        for j in range(m):
            s = conf[i][j]
            for a in range(2):
                for b in range(2):
                    out[2 * i + a][2 * j + b] = zero_blk[a][b] if s == 0 else s * sign_blk[a][b]
    return out


H12, H20, H28 = paley_i(11), paley_i(19), paley_ii(13)


def _fwht_block(v, start, n):
    h = 1
    while h < n:
        for i in range(start, start + n, 2 * h):
            for j in range(i, i + h):
                a, b = v[j], v[j + h]
                v[j], v[j + h] = a + b, a - b
        h *= 2


def kron_hadamard(x, K, HK):
    """(H_K kron H_P) x / sqrt(d), d = len(x) = K P."""
    d = len(x)
    P = d // K
    v = list(x)
    for k in range(K):
        _fwht_block(v, k * P, P)
    out = [0.0] * d
    for p in range(P):
        col = [v[k * P + p] for k in range(K)]
        for i in range(K):
            out[i * P + p] = sum(HK[i][k] * col[k] for k in range(K))
    s = 1 / math.sqrt(d)
    return [t * s for t in out]


def is_hadamard(H):
    n = len(H)
    return all(sum(H[i][k] * H[j][k] for k in range(n)) == (n if i == j else 0)
               for i in range(n) for j in range(n))


if __name__ == "__main__":
    for b in (1, 2, 3, 4):
        c, t, mse = gauss_lloyd(2 ** b)
        print("gauss   b=%d mse=%.6f c+=%s" % (b, mse, " ".join("%.6f" % v for v in c[2 ** (b - 1):])))
    for b in (1, 2, 3, 4):
        c, t, mse = laplace_lloyd(2 ** b)
        print("laplace b=%d mse=%.6f c+=%s" % (b, mse, " ".join("%.6f" % v for v in c[2 ** (b - 1):])))
    for b in (5, 6):
        print("gauss   b=%d mse=%.6f" % (b, gauss_lloyd(2 ** b)[2]))
    for b in (5, 6, 7, 8):
        mse = gauss_newton(2 ** b)[2]
        print("gauss   b=%d mse=%.8f (Newton; mse*4^b = %.4f, high-rate limit sqrt(3)pi/2 = %.4f)"
              % (b, mse, mse * 4 ** b, math.sqrt(3) * math.pi / 2))
    for d in (64, 80, 96, 128, 256):
        tab = Tabulated(sphere_density(d), -1.0, 1.0)
        for b in (1, 2, 3, 4):
            g = gauss_lloyd(2 ** b)[0]
            c = [v * math.sqrt(d) for v in grid_lloyd(tab, [v / math.sqrt(d) for v in g])]
            opt, with_g = sphere_scaled_mse(d, c, tab), sphere_scaled_mse(d, g, tab)
            print("sphere  d=%d b=%d d*mse=%.5f (N(0,1) codebook: %.5f, +%.2f%%) c+=%s"
                  % (d, b, opt, with_g, 100 * (with_g / opt - 1),
                     " ".join("%.5f" % v for v in c[2 ** (b - 1):])))
    for level, bits in ((2, 1), (2, 2), (2, 3), (3, 2), (4, 2)):
        c = polar_angle_lloyd(level, bits)
        print("polar   level=%d b=%d c=%s t=%s" % (level, bits, " ".join("%.5f" % v for v in c),
                                                  " ".join("%.5f" % v for v in _midpoints(c))))
    for name, H in (("H12", H12), ("H20", H20), ("H28", H28)):
        print(name, "Hadamard" if is_hadamard(H) else "NOT Hadamard")
