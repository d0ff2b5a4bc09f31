/*
 * dense_avx2.c — AVX2 decode-once attention kernels (contract in cache/dense.h): scores as
 * 6 queries x 16 keys of broadcast-FMA over the transposed keys, values as 6 weight rows x 16
 * channels over the value rows (then 4 and 1: 12 accumulators, 2 loads and a broadcast fill
 * the 16 registers; 6 rows share each load from L2, 4 did before); masked tails.
 */
#include <immintrin.h>
#include <math.h>

#include "cache/dense.h"

static inline __m256i tail8(int64_t left) {
    const int c = left >= 8 ? 8 : left <= 0 ? 0 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __attribute__((always_inline)) void sc_block(const float *q, int jn, int d,
                                                           const float *kt, size_t ldk, __m256i m0,
                                                           __m256i m1, float scale, float *s,
                                                           size_t lds) {
    __m256 a0[6], a1[6];
    for (int j = 0; j < 6; j++) a0[j] = a1[j] = _mm256_setzero_ps();
    for (int i = 0; i < d; i++) {
        const float *kr = kt + (size_t)i * ldk;
        const __m256 k0 = _mm256_maskload_ps(kr, m0), k1 = _mm256_maskload_ps(kr + 8, m1);
        for (int j = 0; j < 6; j++)
            if (j < jn) {
                const __m256 qv = _mm256_broadcast_ss(q + (size_t)j * (size_t)d + (size_t)i);
                a0[j] = _mm256_fmadd_ps(qv, k0, a0[j]);
                a1[j] = _mm256_fmadd_ps(qv, k1, a1[j]);
            }
    }
    const __m256 sv = _mm256_set1_ps(scale);
    for (int j = 0; j < jn; j++) {
        _mm256_maskstore_ps(s + (size_t)j * lds, m0, _mm256_mul_ps(a0[j], sv));
        _mm256_maskstore_ps(s + (size_t)j * lds + 8, m1, _mm256_mul_ps(a1[j], sv));
    }
}

void vq_dense_scores_avx2(const float *q, int nq, int d, const float *kt, size_t ldk, int64_t n,
                          float scale, float *s, size_t lds) {
    for (int64_t t = 0; t < n; t += 16) {
        const __m256i m0 = tail8(n - t), m1 = tail8(n - t - 8);
        int j = 0;
        for (; j + 6 <= nq; j += 6)
            sc_block(q + (size_t)j * (size_t)d, 6, d, kt + t, ldk, m0, m1, scale,
                     s + (size_t)j * lds + (size_t)t, lds);
        for (; j + 4 <= nq; j += 4)
            sc_block(q + (size_t)j * (size_t)d, 4, d, kt + t, ldk, m0, m1, scale,
                     s + (size_t)j * lds + (size_t)t, lds);
        for (; j < nq; j++)
            sc_block(q + (size_t)j * (size_t)d, 1, d, kt + t, ldk, m0, m1, scale,
                     s + (size_t)j * lds + (size_t)t, lds);
    }
}

static inline __attribute__((always_inline)) void pv_block(float *acc, int jn, int d,
                                                           const float *p, size_t ldp,
                                                           const float *v, int64_t n, __m256i m0,
                                                           __m256i m1) {
    __m256 a0[6], a1[6];
    for (int j = 0; j < 6; j++) {
        a0[j] = j < jn ? _mm256_maskload_ps(acc + (size_t)j * (size_t)d, m0) : _mm256_setzero_ps();
        a1[j] = j < jn ? _mm256_maskload_ps(acc + (size_t)j * (size_t)d + 8, m1)
                       : _mm256_setzero_ps();
    }
    for (int64_t t = 0; t < n; t++) {
        const float *vr = v + (size_t)t * (size_t)d;
        const __m256 v0 = _mm256_maskload_ps(vr, m0), v1 = _mm256_maskload_ps(vr + 8, m1);
        for (int j = 0; j < 6; j++)
            if (j < jn) {
                const __m256 w = _mm256_broadcast_ss(p + (size_t)j * ldp + (size_t)t);
                a0[j] = _mm256_fmadd_ps(w, v0, a0[j]);
                a1[j] = _mm256_fmadd_ps(w, v1, a1[j]);
            }
    }
    for (int j = 0; j < jn; j++) {
        _mm256_maskstore_ps(acc + (size_t)j * (size_t)d, m0, a0[j]);
        _mm256_maskstore_ps(acc + (size_t)j * (size_t)d + 8, m1, a1[j]);
    }
}

void vq_dense_pv_avx2(float *acc, int nq, int d, const float *p, size_t ldp, const float *v,
                      int64_t n) {
    for (int i0 = 0; i0 < d; i0 += 16) {
        const __m256i m0 = tail8(d - i0), m1 = tail8(d - i0 - 8);
        int j = 0;
        for (; j + 6 <= nq; j += 6)
            pv_block(acc + (size_t)j * (size_t)d + (size_t)i0, 6, d, p + (size_t)j * ldp, ldp,
                     v + i0, n, m0, m1);
        for (; j + 4 <= nq; j += 4)
            pv_block(acc + (size_t)j * (size_t)d + (size_t)i0, 4, d, p + (size_t)j * ldp, ldp,
                     v + i0, n, m0, m1);
        for (; j < nq; j++)
            pv_block(acc + (size_t)j * (size_t)d + (size_t)i0, 1, d, p + (size_t)j * ldp, ldp,
                     v + i0, n, m0, m1);
    }
}

float vq_dense_max_avx2(const float *x, int64_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    float r = -INFINITY;
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    const float v = _mm_cvtss_f32(h);
    return v > r ? v : r;
}
