/*
 * kmeans.c — deterministic Lloyd k-means (VecInfer codebooks).
 * Contract in calib.h. The assignment step is embarrassingly parallel (OpenMP when built with
 * it); the centroid update is serial in double precision, so results do not depend on the
 * number of threads. The assignment reads the centroids transposed (vq_nearest_centroid_t:
 * blocks of 64 centroids, vectorised by the compiler, bitwise the same sums and argmin as the
 * scalar reference vq_nearest_centroid): the 4096-codeword VecInfer 1.5-bit codebooks made the
 * scalar search the whole cost of calibration.
 */
#include <math.h>
#include <string.h>

#include "calib/calib.h"

/* ---- nearest centroid ---------------------------------------------------------------------- */

int vq_nearest_centroid(const float *p, const float *centroids, const float *cn, int k, int dim) {
    int best = 0;
    float best_d = INFINITY;
    for (int i = 0; i < k; i++) {
        const float *c = centroids + (size_t)i * (size_t)dim;
        float dot = 0.0f;
        for (int j = 0; j < dim; j++) dot += p[j] * c[j];
        const float dd = cn[i] - 2.0f * dot;
        if (dd < best_d) {
            best_d = dd;
            best = i;
        }
    }
    return best;
}

int vq_nearest_centroid_t(const float *p, const float *ct, const float *cn, int k, int dim) {
    enum { B = 64 };
    float d[B];
    int best = 0;
    float best_d = INFINITY;
    for (int i0 = 0; i0 < k; i0 += B) {
        const int nb = k - i0 < B ? k - i0 : B;
        /* dot products of a block of centroids, summed over j in order (as the scalar loop) */
        for (int i = 0; i < nb; i++) d[i] = 0.0f;
        for (int j = 0; j < dim; j++) {
            const float pj = p[j];
            const float *row = ct + (size_t)j * (size_t)k + i0;
            for (int i = 0; i < nb; i++) d[i] += pj * row[i];
        }
        for (int i = 0; i < nb; i++) {
            const float dd = cn[i0 + i] - 2.0f * d[i];
            if (dd < best_d) {
                best_d = dd;
                best = i0 + i;
            }
        }
    }
    return best;
}

static void kmeans_norms_(const float *centroids, int k, int dim, float *cn) {
    for (int i = 0; i < k; i++) {
        float s = 0.0f;
        for (int j = 0; j < dim; j++)
            s += centroids[(size_t)i * dim + j] * centroids[(size_t)i * dim + j];
        cn[i] = s;
    }
}

/* ---- Lloyd iterations ---------------------------------------------------------------------- */

vq_status vq_kmeans(const float *x, int64_t n, int dim, int k, int iters, uint64_t seed,
                    float *centroids, int32_t *assign) {
    if (!x || !centroids || dim < 1 || k < 1 || n < k || iters < 0) return VQ_STATUS_INVALID_ARG;
    if (k > (1 << 24) || n > ((int64_t)1 << 40)) return VQ_STATUS_INVALID_ARG;
    for (int64_t i = 0; i < n * dim; i++)
        if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;

    int32_t *as = vq_alloc((size_t)n * sizeof(int32_t));
    float *dist = vq_alloc((size_t)n * sizeof(float));
    float *cn = vq_alloc((size_t)k * sizeof(float));
    double *sum = vq_alloc((size_t)k * (size_t)dim * sizeof(double));
    int64_t *cnt = vq_alloc((size_t)k * sizeof(int64_t));
    float *ct = vq_alloc((size_t)k * (size_t)dim * sizeof(float)); /* (dim, k) transposed */
    float *xt = vq_alloc((size_t)n * (size_t)dim * sizeof(float)); /* (dim, n) transposed */
    float *dd = vq_alloc((size_t)n * sizeof(float));               /* (n) init distances */
    if (!as || !dist || !cn || !sum || !cnt || !ct || !xt || !dd) {
        vq_free(as);
        vq_free(dist);
        vq_free(cn);
        vq_free(sum);
        vq_free(cnt);
        vq_free(ct);
        vq_free(xt);
        vq_free(dd);
        return VQ_STATUS_NO_MEMORY;
    }
    for (int64_t j = 0; j < n; j++)
        for (int e = 0; e < dim; e++) xt[(size_t)e * (size_t)n + (size_t)j] = x[j * dim + e];

    /* init: k-means++ (D^2 sampling) from the seeded RNG. The first centroid is a uniform
     * sample, each next one a sample drawn with probability proportional to its squared
     * distance to the nearest chosen centroid (uniform when all distances are 0). Same cost as
     * one Lloyd iteration; plain random-sample init often leaves two centroids inside one
     * cluster, a local optimum Lloyd never leaves. */
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    int64_t pick = (int64_t)(vq_rng_u64(&rng) % (uint64_t)n);
    for (int i = 0; i < k; i++) {
        memcpy(centroids + (size_t)i * dim, x + pick * dim, (size_t)dim * sizeof(float));
        if (i + 1 == k) break;
        const float *c = centroids + (size_t)i * dim;
        /* squared distances to the new centroid, summed over e in order for every point (the
         * points transposed so that the loops over j vectorise) */
        for (int64_t j = 0; j < n; j++) dd[j] = 0.0f;
        for (int e = 0; e < dim; e++) {
            const float ce = c[e], *xe = xt + (size_t)e * (size_t)n;
            for (int64_t j = 0; j < n; j++) dd[j] += (xe[j] - ce) * (xe[j] - ce);
        }
        for (int64_t j = 0; j < n; j++)
            if (i == 0 || dd[j] < dist[j]) dist[j] = dd[j];
        double total = 0.0;
        for (int64_t j = 0; j < n; j++) total += dist[j];
        if (total > 0.0) {
            const double r = vq_rng_uniform(&rng) * total;
            double acc = 0.0;
            pick = -1;
            for (int64_t j = 0; j < n; j++) {
                if (dist[j] <= 0.0f) continue;
                acc += dist[j];
                pick = j;
                if (acc > r) break;
            }
        } else {
            pick = (int64_t)(vq_rng_u64(&rng) % (uint64_t)n);
        }
    }
    for (int64_t i = 0; i < n; i++) as[i] = -1;

    for (int it = 0; it <= iters; it++) {
        kmeans_norms_(centroids, k, dim, cn);
        for (int i = 0; i < k; i++)
            for (int j = 0; j < dim; j++) ct[(size_t)j * k + i] = centroids[(size_t)i * dim + j];
        int64_t changed = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(+ : changed)
#endif
        for (int64_t i = 0; i < n; i++) {
            const float *p = x + i * dim;
            const int a = vq_nearest_centroid_t(p, ct, cn, k, dim);
            const float *c = centroids + (size_t)a * dim;
            float di = 0.0f;
            for (int j = 0; j < dim; j++) di += (p[j] - c[j]) * (p[j] - c[j]);
            dist[i] = di;
            if (as[i] != a) changed++;
            as[i] = a;
        }
        if (it == iters || changed == 0) break; /* last assignment matches the centroids */

        memset(sum, 0, (size_t)k * (size_t)dim * sizeof(double));
        memset(cnt, 0, (size_t)k * sizeof(int64_t));
        for (int64_t i = 0; i < n; i++) {
            const int a = as[i];
            cnt[a]++;
            for (int j = 0; j < dim; j++) sum[(size_t)a * dim + j] += x[i * dim + j];
        }
        for (int c = 0; c < k; c++) {
            if (cnt[c] > 0) {
                for (int j = 0; j < dim; j++)
                    centroids[(size_t)c * dim + j] = (float)(sum[(size_t)c * dim + j] /
                                                             (double)cnt[c]);
                continue;
            }
            /* empty cluster: reseed with the farthest point not used yet this iteration */
            int64_t far = -1;
            for (int64_t i = 0; i < n; i++)
                if (dist[i] >= 0.0f && (far < 0 || dist[i] > dist[far])) far = i;
            VQ_ASSERT(far >= 0); /* n >= k guarantees enough points */
            dist[far] = -1.0f;
            memcpy(centroids + (size_t)c * dim, x + far * dim, (size_t)dim * sizeof(float));
        }
    }
    if (assign) memcpy(assign, as, (size_t)n * sizeof(int32_t));
    vq_free(as);
    vq_free(dist);
    vq_free(cn);
    vq_free(sum);
    vq_free(cnt);
    vq_free(ct);
    vq_free(xt);
    vq_free(dd);
    return VQ_STATUS_OK;
}
