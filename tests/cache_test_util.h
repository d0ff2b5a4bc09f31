/* cache_test_util.h — helpers shared by the cache modifier tests (test_cache_keyscale.c,
 * test_cache_chanbits.c, test_cache.c, test_cache_outlier.c): Gaussian rows with per-channel
 * spreads and the fused-vs-reference attention comparison (tolerance: fused_tol.h). Include
 * after test_data.h (uses nrand and rel_l2). One test thread. */
#ifndef VQ_CACHE_TEST_UTIL_H
#define VQ_CACHE_TEST_UTIL_H

#include <stdlib.h>

#include "fused_tol.h"
#include "veloxquant.h"

/* (n, heads, d) rows: mean[i] + sd[i] * N(0, 1) per channel i (mean may be NULL). Caller frees
 * (free). */
static inline float *gen_rows(int64_t n, int heads, int d, const float *mean, const float *sd) {
    float *x = malloc((size_t)(n * heads * d) * sizeof(float));
    for (int64_t t = 0; t < n; t++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < d; i++)
                x[(t * heads + h) * d + i] = (mean ? mean[i] : 0.0f) + sd[i] * nrand();
    return x;
}

/* Attends nq queries of nqh heads (rows of d) on `layer` with vq_cache_attend (scale 0.125)
 * and with vq_cache_attend_ref; raises *worst to the largest relative L2 difference of one
 * (query, head) output. Returns the fused output (nq * nqh * d floats, caller frees), NULL if
 * either call fails. */
static inline float *attend_vs_ref(vq_cache *c, int layer, const float *q, int nqh, int64_t nq,
                                   int d, double *worst) {
    const size_t no = (size_t)(nq * nqh * d);
    float *o1 = malloc(no * sizeof(float)), *o2 = malloc(no * sizeof(float));
    if (vq_cache_attend(c, layer, q, nqh, nq, NULL, 0.125f, o1) != VQ_STATUS_OK ||
        vq_cache_attend_ref(c, layer, q, nqh, nq, NULL, 0.125f, o2) != VQ_STATUS_OK) {
        free(o1);
        free(o2);
        return NULL;
    }
    for (int64_t i = 0; i < nq * nqh; i++) {
        const double e = rel_l2(o1 + i * d, o2 + i * d, d);
        if (e > *worst) *worst = e;
    }
    free(o2);
    return o1;
}

#endif
