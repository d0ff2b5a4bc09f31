/*
 * dense_avx512.c — AVX-512 decode-once attention kernels (contract in cache/dense.h): scores
 * as 8 queries x 32 keys of broadcast-FMA over the transposed keys, values as 8 weight rows x
 * 32 channels of broadcast-FMA over the value rows (4 and 1 for the rest); masked tails.
 */
#include <immintrin.h>
#include <math.h>

#include "cache/dense.h"

static inline __mmask16 tail16(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
}

/* Scores of jn (<= 8, a constant at each call) queries against keys [0, 32) of kt under masks
 * m0 / m1. Eight queries share each pair of key loads: the transposed page comes from L2, and
 * with four a block was bound by that traffic rather than by the FMAs. */
static inline __attribute__((always_inline)) void sc_block(const float *q, int jn, int d,
                                                           const float *kt, size_t ldk,
                                                           __mmask16 m0, __mmask16 m1, float scale,
                                                           float *s, size_t lds) {
    __m512 a0[8], a1[8];
    for (int j = 0; j < 8; j++) a0[j] = a1[j] = _mm512_setzero_ps();
    for (int i = 0; i < d; i++) {
        const float *kr = kt + (size_t)i * ldk;
        const __m512 k0 = _mm512_maskz_loadu_ps(m0, kr), k1 = _mm512_maskz_loadu_ps(m1, kr + 16);
        for (int j = 0; j < 8; j++)
            if (j < jn) {
                const __m512 qv = _mm512_set1_ps(q[(size_t)j * (size_t)d + (size_t)i]);
                a0[j] = _mm512_fmadd_ps(qv, k0, a0[j]);
                a1[j] = _mm512_fmadd_ps(qv, k1, a1[j]);
            }
    }
    const __m512 sv = _mm512_set1_ps(scale);
    for (int j = 0; j < jn; j++) {
        _mm512_mask_storeu_ps(s + (size_t)j * lds, m0, _mm512_mul_ps(a0[j], sv));
        _mm512_mask_storeu_ps(s + (size_t)j * lds + 16, m1, _mm512_mul_ps(a1[j], sv));
    }
}

void vq_dense_scores_avx512(const float *q, int nq, int d, const float *kt, size_t ldk, int64_t n,
                            float scale, float *s, size_t lds) {
    for (int64_t t = 0; t < n; t += 32) {
        const __mmask16 m0 = tail16(n - t), m1 = tail16(n - t - 16);
        int j = 0;
        for (; j + 8 <= nq; j += 8)
            sc_block(q + (size_t)j * (size_t)d, 8, d, kt + t, ldk, m0, m1, scale,
                     s + (size_t)j * lds + (size_t)t, lds);
        for (; j + 4 <= nq; j += 4)
            sc_block(q + (size_t)j * (size_t)d, 4, d, kt + t, ldk, m0, m1, scale,
                     s + (size_t)j * lds + (size_t)t, lds);
        for (; j < nq; j++)
            sc_block(q + (size_t)j * (size_t)d, 1, d, kt + t, ldk, m0, m1, scale,
                     s + (size_t)j * lds + (size_t)t, lds);
    }
}

/* acc rows of jn (<= 8, constant) weight rows, channels [i0, i0 + 32) under masks m[2]. Eight
 * rows share each value load: the value page comes from L2, which bound the earlier block of
 * 4 rows x 64 channels (the same 16 accumulators, twice the loads per FMA). */
static inline __attribute__((always_inline)) void pv_block(float *acc, int jn, int d,
                                                           const float *p, size_t ldp,
                                                           const float *v, int64_t n,
                                                           const __mmask16 *m) {
    __m512 a[8][2];
    for (int j = 0; j < 8; j++)
        for (int u = 0; u < 2; u++)
            a[j][u] = j < jn ? _mm512_maskz_loadu_ps(m[u], acc + (size_t)j * (size_t)d + 16 * u)
                             : _mm512_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        const float *vr = v + (size_t)t * (size_t)d;
        const __m512 v0 = _mm512_maskz_loadu_ps(m[0], vr),
                     v1 = _mm512_maskz_loadu_ps(m[1], vr + 16);
        for (int j = 0; j < 8; j++)
            if (j < jn) {
                const __m512 w = _mm512_set1_ps(p[(size_t)j * ldp + (size_t)t]);
                a[j][0] = _mm512_fmadd_ps(w, v0, a[j][0]);
                a[j][1] = _mm512_fmadd_ps(w, v1, a[j][1]);
            }
    }
    for (int j = 0; j < jn; j++)
        for (int u = 0; u < 2; u++)
            _mm512_mask_storeu_ps(acc + (size_t)j * (size_t)d + 16 * u, m[u], a[j][u]);
}

void vq_dense_pv_avx512(float *acc, int nq, int d, const float *p, size_t ldp, const float *v,
                        int64_t n) {
    for (int i0 = 0; i0 < d; i0 += 32) {
        const __mmask16 m[2] = {tail16(d - i0), tail16(d - i0 - 16)};
        int j = 0;
        for (; j + 8 <= nq; j += 8)
            pv_block(acc + (size_t)j * (size_t)d + (size_t)i0, 8, d, p + (size_t)j * ldp, ldp,
                     v + i0, n, m);
        for (; j + 4 <= nq; j += 4)
            pv_block(acc + (size_t)j * (size_t)d + (size_t)i0, 4, d, p + (size_t)j * ldp, ldp,
                     v + i0, n, m);
        for (; j < nq; j++)
            pv_block(acc + (size_t)j * (size_t)d + (size_t)i0, 1, d, p + (size_t)j * ldp, ldp,
                     v + i0, n, m);
    }
}

float vq_dense_max_avx512(const float *x, int64_t n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
    if (i < n)
        m = _mm512_mask_max_ps(m, tail16(n - i), m, _mm512_maskz_loadu_ps(tail16(n - i), x + i));
    return _mm512_reduce_max_ps(m);
}
