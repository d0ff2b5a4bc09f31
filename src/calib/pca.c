/*
 * pca.c — symmetric eigendecomposition (cyclic Jacobi), participation ratio, VecInfer
 * smoothing factors and the deterministic block Walsh-Hadamard transform. Contracts in
 * calib.h. Jacobi is O(n^3) per sweep; n <= 1024 (head dims) converges in < 15 sweeps.
 */
#include <math.h>
#include <string.h>

#include "calib/calib.h"

/* ---- Jacobi eigendecomposition ------------------------------------------------------------- */

vq_status vq_sym_eig(double *a, int n, double *evals, double *evecs) {
    if (!a || !evals || !evecs || n < 1 || n > 4096) return VQ_STATUS_INVALID_ARG;
    const size_t nn = (size_t)n * (size_t)n;
    double *v = vq_alloc(nn * sizeof(double));
    int *order = vq_alloc((size_t)n * sizeof(int));
    if (!v || !order) {
        vq_free(v);
        vq_free(order);
        return VQ_STATUS_NO_MEMORY;
    }
    for (int i = 0; i < n; i++) v[(size_t)i * n + i] = 1.0;
    double total = 0.0;
    for (size_t i = 0; i < nn; i++) total += a[i] * a[i];
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0.0;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++)
                off += 2.0 * a[(size_t)p * n + q] * a[(size_t)p * n + q];
        if (off <= 1e-30 * total || off == 0.0) break;
        for (int p = 0; p < n - 1; p++) {
            for (int q = p + 1; q < n; q++) {
                const double apq = a[(size_t)p * n + q];
                if (fabs(apq) < 1e-300) continue;
                const double theta = (a[(size_t)q * n + q] - a[(size_t)p * n + p]) / (2.0 * apq);
                const double t = (theta >= 0 ? 1.0 : -1.0) /
                                 (fabs(theta) + sqrt(theta * theta + 1.0));
                const double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < n; k++) { /* A <- A J (columns p, q) */
                    const double akp = a[(size_t)k * n + p], akq = a[(size_t)k * n + q];
                    a[(size_t)k * n + p] = c * akp - s * akq;
                    a[(size_t)k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) { /* A <- J^T A (rows p, q) */
                    const double apk = a[(size_t)p * n + k], aqk = a[(size_t)q * n + k];
                    a[(size_t)p * n + k] = c * apk - s * aqk;
                    a[(size_t)q * n + k] = s * apk + c * aqk;
                }
                a[(size_t)p * n + q] = a[(size_t)q * n + p] = 0.0;
                for (int k = 0; k < n; k++) { /* V <- V J */
                    const double vkp = v[(size_t)k * n + p], vkq = v[(size_t)k * n + q];
                    v[(size_t)k * n + p] = c * vkp - s * vkq;
                    v[(size_t)k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    /* sort descending (stable insertion sort on indices: deterministic) */
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) {
        const int oi = order[i];
        int j = i - 1;
        while (j >= 0 && a[(size_t)order[j] * n + order[j]] < a[(size_t)oi * n + oi]) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = oi;
    }
    for (int j = 0; j < n; j++) {
        const int src = order[j];
        evals[j] = a[(size_t)src * n + src];
        int big = 0;
        for (int i = 1; i < n; i++)
            if (fabs(v[(size_t)i * n + src]) > fabs(v[(size_t)big * n + src])) big = i;
        const double sg = v[(size_t)big * n + src] < 0 ? -1.0 : 1.0;
        for (int i = 0; i < n; i++) evecs[(size_t)i * n + j] = sg * v[(size_t)i * n + src];
    }
    vq_free(v);
    vq_free(order);
    return VQ_STATUS_OK;
}

double vq_participation_ratio(const double *evals, int n) {
    double s = 0.0, s2 = 0.0;
    for (int i = 0; i < n; i++) {
        const double l = evals[i] > 0 ? evals[i] : 0.0;
        s += l;
        s2 += l * l;
    }
    return s2 > 0 ? s * s / s2 : 0.0;
}

/* ---- VecInfer: smoothing factors and block WHT ----------------------------------------------- */

void vq_smooth_factors(const float *x, int64_t n, int d, float *lambda) {
    for (int c = 0; c < d; c++) lambda[c] = 0.0f;
    for (int64_t t = 0; t < n; t++)
        for (int c = 0; c < d; c++) {
            const float a = fabsf(x[t * d + c]);
            if (a > lambda[c]) lambda[c] = a;
        }
    for (int c = 0; c < d; c++) {
        const float l = sqrtf(lambda[c]);
        lambda[c] = l > 1e-4f ? l : 1e-4f;
    }
}

void vq_wht_blocks(float *v, int d) {
    int off = 0;
    while (off < d) {
        int b = 1;
        while (b * 2 <= d - off) b *= 2;
        vq_fwht(v + off, b);
        const float s = 1.0f / sqrtf((float)b);
        for (int i = 0; i < b; i++) v[off + i] *= s;
        off += b;
    }
}
