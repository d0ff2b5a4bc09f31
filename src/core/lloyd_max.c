/* lloyd_max.c — Lloyd-Max scalar codebooks (docs/ALGORITHMS.md §2): N(0,1) and Laplace(0,1) with
 * closed-form cell means, and the rotated-unit-vector coordinate law (Beta, scaled by sqrt(d))
 * by grid integration. Gaussian tables for bits 1..8 and Laplace tables for bits 1..6 are
 * computed once on first use (pthread_once; Gaussian 7 and 8 bits by Newton's method, the
 * plain Lloyd iteration converges too slowly with 64+ cells per half); sphere tables are
 * computed per (d, bits) on first request under a mutex and kept for the process lifetime. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define LM_MAX_BITS 8  /* Gaussian */
#define LAP_MAX_BITS 6 /* Laplace */
#define LM_MAX_L (1 << LM_MAX_BITS)
#define SPH_MAX_BITS 4
#define SPH_MAX_D 4096

typedef struct lm_table {
    float c[LM_MAX_L];
    float t[LM_MAX_L - 1];
} lm_table;

static lm_table g_gauss[LM_MAX_BITS + 1], g_lap[LAP_MAX_BITS + 1];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_sph_mu = PTHREAD_MUTEX_INITIALIZER;
static lm_table *g_sph[SPH_MAX_D + 1][SPH_MAX_BITS + 1];

static const double INV_SQRT_2PI = 0.39894228040143267794;

static double phi_(double x) { return isinf(x) ? 0.0 : INV_SQRT_2PI * exp(-0.5 * x * x); }
static double Phi_(double x) {
    if (isinf(x)) return x > 0 ? 1.0 : 0.0;
    return 0.5 * erfc(-x * 0.70710678118654752440);
}

/* Lloyd iteration for N(0,1) on the positive half (L even, boundary at 0). cpos: L/2 values. */
static void lloyd_gauss(int L, double *cpos) {
    int h = L / 2;
    for (int i = 0; i < h; i++) cpos[i] = (i + 0.5) * 3.0 / h; /* rough init */
    double t[LM_MAX_L / 2 + 1];
    for (int it = 0; it < 200000; it++) {
        t[0] = 0.0;
        for (int i = 1; i < h; i++) t[i] = 0.5 * (cpos[i - 1] + cpos[i]);
        t[h] = INFINITY;
        double delta = 0.0;
        for (int i = 0; i < h; i++) {
            double p = Phi_(t[i + 1]) - Phi_(t[i]);
            double nc = (phi_(t[i]) - phi_(t[i + 1])) / p;
            delta = fmax(delta, fabs(nc - cpos[i]));
            cpos[i] = nc;
        }
        if (delta < 1e-13) break;
    }
}

/* Newton's method on the Lloyd-Max fixed point for N(0,1) (L even, L/2 positive centroids
 * cpos): F_i(c) = m_i(c) - c_i with m_i the mean of cell (t_i, t_{i+1}), t_i the midpoints
 * (t_0 = 0, t_h = inf). m_i depends on c_{i-1}, c_i, c_{i+1} only, so the Jacobian is
 * tridiagonal (dm/da = phi(a) (m - a) / P, dm/db = phi(b) (b - m) / P for a cell (a, b) of
 * mass P) and each step is one Thomas solve. Start: the high-resolution (companding) point
 * density, proportional to pdf^(1/3), i.e. N(0, 3) quantiles. */
static void newton_gauss(int L, double *cpos) {
    const int h = L / 2;
    for (int i = 0; i < h; i++) {
        /* N(0,3) quantile of (h + i + 0.5) / L by bisection on Phi */
        double p = (h + i + 0.5) / L, lo = 0.0, hi = 10.0;
        for (int it = 0; it < 200; it++) {
            double mid = 0.5 * (lo + hi);
            if (Phi_(mid) < p) lo = mid;
            else hi = mid;
        }
        cpos[i] = 0.5 * (lo + hi) * sqrt(3.0);
    }
    double t[LM_MAX_L / 2 + 1], lo_[LM_MAX_L / 2], di[LM_MAX_L / 2], up[LM_MAX_L / 2];
    double rhs[LM_MAX_L / 2];
    for (int it = 0; it < 100; it++) {
        t[0] = 0.0;
        for (int i = 1; i < h; i++) t[i] = 0.5 * (cpos[i - 1] + cpos[i]);
        t[h] = INFINITY;
        double delta = 0.0;
        for (int i = 0; i < h; i++) {
            const double a = t[i], b = t[i + 1];
            const double P = Phi_(b) - Phi_(a), m = (phi_(a) - phi_(b)) / P;
            const double da = i > 0 ? phi_(a) * (m - a) / P : 0.0; /* t_0 = 0 is fixed */
            const double db = isinf(b) ? 0.0 : phi_(b) * (b - m) / P;
            lo_[i] = 0.5 * da;
            up[i] = 0.5 * db;
            di[i] = 0.5 * (da + db) - 1.0;
            rhs[i] = -(m - cpos[i]);
            delta = fmax(delta, fabs(m - cpos[i]));
        }
        if (delta < 1e-13) break;
        for (int i = 1; i < h; i++) { /* Thomas: forward elimination */
            const double f = lo_[i] / di[i - 1];
            di[i] -= f * up[i - 1];
            rhs[i] -= f * rhs[i - 1];
        }
        rhs[h - 1] /= di[h - 1];
        for (int i = h - 2; i >= 0; i--) rhs[i] = (rhs[i] - up[i] * rhs[i + 1]) / di[i];
        for (int i = 0; i < h; i++) cpos[i] += rhs[i];
    }
}

/* Laplace(0,1) cell (a, b), 0 <= a < b <= inf: probability and first moment. */
static void lap_cell(double a, double b, double *P, double *M) {
    double ea = exp(-a), eb = isinf(b) ? 0.0 : exp(-b);
    *P = 0.5 * (ea - eb);
    *M = 0.5 * ((a + 1.0) * ea - (isinf(b) ? 0.0 : (b + 1.0) * eb));
}

static void lloyd_laplace(int L, double *cpos) {
    int h = L / 2;
    for (int i = 0; i < h; i++) cpos[i] = 0.5 + 1.5 * i;
    double t[LM_MAX_L / 2 + 1];
    for (int it = 0; it < 400000; it++) {
        t[0] = 0.0;
        for (int i = 1; i < h; i++) t[i] = 0.5 * (cpos[i - 1] + cpos[i]);
        t[h] = INFINITY;
        double delta = 0.0;
        for (int i = 0; i < h; i++) {
            double P, M;
            lap_cell(t[i], t[i + 1], &P, &M);
            double nc = M / P;
            delta = fmax(delta, fabs(nc - cpos[i]));
            cpos[i] = nc;
        }
        if (delta < 1e-13) break;
    }
}

/* Mirrors a positive half codebook into a full ascending table with midpoint boundaries. */
static void fill_symmetric(lm_table *tb, int L, const double *cpos) {
    int h = L / 2;
    for (int i = 0; i < h; i++) {
        tb->c[h + i] = (float)cpos[i];
        tb->c[h - 1 - i] = (float)-cpos[i];
    }
    tb->t[h - 1] = 0.0f;
    for (int i = 1; i < h; i++) {
        float b = (float)(0.5 * (cpos[i - 1] + cpos[i]));
        tb->t[h - 1 + i] = b;
        tb->t[h - 1 - i] = -b;
    }
}

static void init_closed_forms(void) {
    double cpos[LM_MAX_L / 2];
    for (int b = 1; b <= LM_MAX_BITS; b++) {
        if (b <= 6) lloyd_gauss(1 << b, cpos);
        else newton_gauss(1 << b, cpos);
        fill_symmetric(&g_gauss[b], 1 << b, cpos);
    }
    for (int b = 1; b <= LAP_MAX_BITS; b++) {
        lloyd_laplace(1 << b, cpos);
        fill_symmetric(&g_lap[b], 1 << b, cpos);
    }
}

/* ---- sphere law: z = sqrt(d) * y, density ~ (1 - z^2/d)^((d-3)/2) on |z| < sqrt(d) ---- */

typedef struct grid {
    int n;
    double lo, h;
    double *F, *M1; /* normalized cumulative trapezoid of f and z f */
} grid;

static void cum_at(const grid *g, double x, double *F, double *M) {
    if (x <= g->lo) {
        *F = 0.0;
        *M = 0.0;
        return;
    }
    double pos = (x - g->lo) / g->h;
    if (pos >= g->n - 1) {
        *F = g->F[g->n - 1];
        *M = g->M1[g->n - 1];
        return;
    }
    int k = (int)pos;
    double fr = pos - k;
    *F = g->F[k] + fr * (g->F[k + 1] - g->F[k]);
    *M = g->M1[k] + fr * (g->M1[k + 1] - g->M1[k]);
}

static vq_status sphere_table(int d, int bits, lm_table *out) {
    grid g;
    g.n = 200001;
    double zmax = fmin(sqrt((double)d), 20.0);
    g.lo = -zmax;
    g.h = 2.0 * zmax / (g.n - 1);
    g.F = (double *)malloc(sizeof(double) * (size_t)g.n);
    g.M1 = (double *)malloc(sizeof(double) * (size_t)g.n);
    if (!g.F || !g.M1) {
        free(g.F);
        free(g.M1);
        return VQ_STATUS_NO_MEMORY;
    }
    double a = 0.5 * (d - 3), prevf = 0.0, prevx = g.lo;
    for (int i = 0; i < g.n; i++) {
        double x = g.lo + i * g.h;
        double u = 1.0 - x * x / d;
        double f = u <= 0.0 ? (a == 0.0 ? 1.0 : 0.0) : exp(a * log(u));
        if (i == 0) {
            g.F[0] = 0.0;
            g.M1[0] = 0.0;
        } else {
            g.F[i] = g.F[i - 1] + 0.5 * g.h * (prevf + f);
            g.M1[i] = g.M1[i - 1] + 0.5 * g.h * (prevx * prevf + x * f);
        }
        prevf = f;
        prevx = x;
    }
    double Z = g.F[g.n - 1];
    for (int i = 0; i < g.n; i++) {
        g.F[i] /= Z;
        g.M1[i] /= Z;
    }
    int L = 1 << bits;
    double c[1 << SPH_MAX_BITS], e[(1 << SPH_MAX_BITS) + 1];
    for (int i = 0; i < L; i++) c[i] = g_gauss[bits].c[i];
    for (int it = 0; it < 5000; it++) {
        e[0] = -1e300;
        e[L] = 1e300;
        for (int i = 1; i < L; i++) e[i] = 0.5 * (c[i - 1] + c[i]);
        double delta = 0.0;
        for (int i = 0; i < L; i++) {
            double Fa, Ma, Fb, Mb;
            cum_at(&g, e[i], &Fa, &Ma);
            cum_at(&g, e[i + 1], &Fb, &Mb);
            double nc = Fb - Fa > 1e-300 ? (Mb - Ma) / (Fb - Fa) : c[i];
            delta = fmax(delta, fabs(nc - c[i]));
            c[i] = nc;
        }
        if (delta < 1e-13) break;
    }
    /* Symmetrize (the law is even) so tables are exactly mirror images. */
    for (int i = 0; i < L / 2; i++) {
        double m = 0.5 * (c[L - 1 - i] - c[i]);
        c[L - 1 - i] = m;
        c[i] = -m;
    }
    fill_symmetric(out, L, c + L / 2);
    free(g.F);
    free(g.M1);
    return VQ_STATUS_OK;
}

/* Returns library-owned centroids (2^bits, ascending) and boundaries (2^bits - 1) of the
 * Lloyd-Max quantizer for `law` at unit scale (see core.h). GAUSS: bits 1..8; LAPLACE: 1..6;
 * SPHERE: bits 1..4 and 3 <= d <= 4096. INVALID_ARG otherwise, NO_MEMORY if a sphere table
 * cannot be built. Thread-safe; the first sphere request for a d costs a few milliseconds. */
vq_status vq_lloyd_max(enum vq_law law, int bits, int d, const float **centroids,
                       const float **boundaries) {
    pthread_once(&g_once, init_closed_forms);
    const lm_table *tb = NULL;
    switch (law) {
    case VQ_LAW_GAUSS:
        if (bits < 1 || bits > LM_MAX_BITS) return VQ_STATUS_INVALID_ARG;
        tb = &g_gauss[bits];
        break;
    case VQ_LAW_LAPLACE:
        if (bits < 1 || bits > LAP_MAX_BITS) return VQ_STATUS_INVALID_ARG;
        tb = &g_lap[bits];
        break;
    case VQ_LAW_SPHERE: {
        if (bits < 1 || bits > SPH_MAX_BITS || d < 3 || d > SPH_MAX_D) return VQ_STATUS_INVALID_ARG;
        pthread_mutex_lock(&g_sph_mu);
        if (!g_sph[d][bits]) {
            lm_table *n = (lm_table *)calloc(1, sizeof(lm_table));
            vq_status st = n ? sphere_table(d, bits, n) : VQ_STATUS_NO_MEMORY;
            if (st != VQ_STATUS_OK) {
                free(n);
                pthread_mutex_unlock(&g_sph_mu);
                return st;
            }
            g_sph[d][bits] = n;
        }
        tb = g_sph[d][bits];
        pthread_mutex_unlock(&g_sph_mu);
        break;
    }
    default: return VQ_STATUS_INVALID_ARG;
    }
    if (centroids) *centroids = tb->c;
    if (boundaries) *boundaries = tb->t;
    return VQ_STATUS_OK;
}
