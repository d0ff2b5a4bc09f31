/* calib_test_util.h — shared helpers of the calibrated-codec tests (test_vecinfer.c,
 * test_spectral.c): synthetic correlated data, the generic codec contract, quality metrics. */
#ifndef VQ_CALIB_TEST_UTIL_H
#define VQ_CALIB_TEST_UTIL_H
#include "test.h"
#include "veloxquant.h"
#include "core/core.h"

/* Random orthogonal d x d matrix (row-major) by Gram-Schmidt on Gaussian columns. */
static void cu_orthogonal(vq_rng *r, int d, double *Q) {
    for (int j = 0; j < d; j++) {
        for (int i = 0; i < d; i++) Q[i * d + j] = vq_rng_normal(r);
        for (int pass = 0; pass < 2; pass++)
            for (int p = 0; p < j; p++) {
                double dot = 0;
                for (int i = 0; i < d; i++) dot += Q[i * d + j] * Q[i * d + p];
                for (int i = 0; i < d; i++) Q[i * d + j] -= dot * Q[i * d + p];
            }
        double nn = 0;
        for (int i = 0; i < d; i++) nn += Q[i * d + j] * Q[i * d + j];
        for (int i = 0; i < d; i++) Q[i * d + j] /= sqrt(nn);
    }
}

/* n samples x = Q diag(sqrt(lam)) z (+ channel offsets mu), z ~ N(0, I). */
static void cu_gen(vq_rng *r, int d, const double *Q, const double *lam, const float *mu, int64_t n,
                   float *x) {
    double z[1024];
    for (int64_t t = 0; t < n; t++) {
        for (int j = 0; j < d; j++) z[j] = sqrt(lam[j]) * vq_rng_normal(r);
        for (int i = 0; i < d; i++) {
            double s = 0;
            for (int j = 0; j < d; j++) s += Q[i * d + j] * z[j];
            x[t * d + i] = (float)s + (mu ? mu[i] : 0.0f);
        }
    }
}

/* Relative MSE sum ||x - decode(encode(x))||^2 / sum ||x||^2 of codec c on x (n, d). */
static double cu_rel_mse(const vq_codec *c, const float *x, int64_t n) {
    const int d = vq_codec_params_get(c)->head_dim;
    uint8_t *codes = malloc(vq_codec_block_bytes(c) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)(n * d));
    double e = 0, s = 0;
    if (vq_codec_encode(c, x, n, codes) != VQ_STATUS_OK ||
        vq_codec_decode(c, codes, n, y) != VQ_STATUS_OK) {
        e = 1e9;
    } else {
        for (int64_t i = 0; i < n * d; i++) {
            e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            s += (double)x[i] * x[i];
        }
    }
    free(codes);
    free(y);
    return e / s;
}

/* Generic contract on x (n, d): deterministic encode, fused score == <q, decode>, accumulate +
 * finish == sum_t w_t decode(x_t) (both within 1e-4 relative). Returns the number of
 * mismatches (0 = pass). */
static int cu_contract(const vq_codec *c, const float *x, int64_t n, vq_rng *r) {
    const int d = vq_codec_params_get(c)->head_dim;
    const size_t bb = vq_codec_block_bytes(c);
    uint8_t *a = malloc(bb * (size_t)n), *b = malloc(bb * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)(n * d)), *sc = malloc(sizeof(float) * (size_t)n);
    float *w = malloc(sizeof(float) * (size_t)n), q[1024], out[1024];
    void *qs = vq_alloc(vq_codec_query_bytes(c));
    float *acc = calloc(vq_codec_acc_floats(c), sizeof(float));
    int bad = 0;
    bad += vq_codec_encode(c, x, n, a) != VQ_STATUS_OK;
    bad += vq_codec_encode(c, x, n, b) != VQ_STATUS_OK;
    bad += memcmp(a, b, bb * (size_t)n) != 0;
    bad += vq_codec_decode(c, a, n, y) != VQ_STATUS_OK;
    for (int i = 0; i < d; i++) q[i] = (float)vq_rng_normal(r);
    for (int64_t t = 0; t < n; t++) w[t] = (float)vq_rng_uniform(r);
    vq_codec_prepare_query(c, q, qs);
    vq_codec_score(c, qs, a, n, sc);
    vq_codec_accumulate(c, a, n, w, acc);
    vq_codec_finish(c, acc, out);
    double qn = 0, ref[1024] = {0}, on = 0;
    for (int i = 0; i < d; i++) qn += (double)q[i] * q[i];
    for (int64_t t = 0; t < n; t++) {
        double dot = 0, yn = 0;
        for (int i = 0; i < d; i++) {
            dot += (double)q[i] * y[t * d + i];
            yn += (double)y[t * d + i] * y[t * d + i];
            ref[i] += (double)w[t] * y[t * d + i];
        }
        bad += fabs(sc[t] - dot) > 1e-4 * sqrt(qn * yn) + 1e-6;
    }
    for (int i = 0; i < d; i++) on += ref[i] * ref[i];
    for (int i = 0; i < d; i++) bad += fabs(out[i] - ref[i]) > 1e-4 * sqrt(on) + 1e-6;
    free(a);
    free(b);
    free(y);
    free(sc);
    free(w);
    vq_free(qs);
    free(acc);
    return bad;
}

#endif
