/*
 * fp16_avx2.c — AVX2 + F16C + FMA kernels of the fp16 codec (contract in codecs/fp16.h).
 * Score: 8 tokens at a time, one accumulator per token (8 independent FMA chains), then a
 * hadd tree that reduces the 8 accumulators to 8 scores with one store. Leftover tokens use
 * the same per-token operation order, so scores do not depend on a token's place in a call.
 * Accumulate: channel blocks of 32 (4 ymm) x 2 interleaved token streams = 8 FMA chains.
 * head_dim is a multiple of 8 (checked at codec creation), so there are no partial vectors.
 */
#include <immintrin.h>
#include <stdint.h>

#include "codecs/fp16.h"

#define VQ_INLINE static inline __attribute__((always_inline))

VQ_INLINE __m256 ld8h(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* Returns [sum(a0), sum(a1), ..., sum(a7)]. */
VQ_INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                         __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Sum of the 8 lanes in the same order as one lane of hsum8x8, so a token scores bit-identically
 * whether it is reduced alone or in a group of 8. */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

void vq_fp16_score_avx2(const float *q, const uint16_t *x, int d, int64_t n, float *scores) {
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint16_t *r = x + t * d;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int c = 0; c < d; c += 8) {
            const __m256 qv = _mm256_loadu_ps(q + c);
            a0 = _mm256_fmadd_ps(qv, ld8h(r + c), a0);
            a1 = _mm256_fmadd_ps(qv, ld8h(r + d + c), a1);
            a2 = _mm256_fmadd_ps(qv, ld8h(r + 2 * d + c), a2);
            a3 = _mm256_fmadd_ps(qv, ld8h(r + 3 * d + c), a3);
            a4 = _mm256_fmadd_ps(qv, ld8h(r + 4 * d + c), a4);
            a5 = _mm256_fmadd_ps(qv, ld8h(r + 5 * d + c), a5);
            a6 = _mm256_fmadd_ps(qv, ld8h(r + 6 * d + c), a6);
            a7 = _mm256_fmadd_ps(qv, ld8h(r + 7 * d + c), a7);
        }
        _mm256_storeu_ps(scores + t, hsum8x8(a0, a1, a2, a3, a4, a5, a6, a7));
    }
    for (; t < n; t++) {
        const uint16_t *r = x + t * d;
        __m256 a0 = _mm256_setzero_ps();
        for (int c = 0; c < d; c += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), ld8h(r + c), a0);
        scores[t] = hsum1(a0);
    }
}

/* acc[cb .. cb + 8*NR) += sum_t w[t] x_t[cb ..]; NR (1..4) is a compile-time constant at every
 * call site so the accumulator arrays live in registers. */
VQ_INLINE void acc_block(const uint16_t *x, int d, int64_t n, const float *w, float *acc, int cb,
                         const int NR) {
    __m256 e[4], o[4];
    for (int j = 0; j < NR; j++) e[j] = o[j] = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t + 2 <= n; t += 2) {
        const __m256 w0 = _mm256_broadcast_ss(w + t), w1 = _mm256_broadcast_ss(w + t + 1);
        const uint16_t *r0 = x + t * d + cb, *r1 = r0 + d;
        for (int j = 0; j < NR; j++) {
            e[j] = _mm256_fmadd_ps(w0, ld8h(r0 + 8 * j), e[j]);
            o[j] = _mm256_fmadd_ps(w1, ld8h(r1 + 8 * j), o[j]);
        }
    }
    if (t < n) {
        const __m256 w0 = _mm256_broadcast_ss(w + t);
        const uint16_t *r0 = x + t * d + cb;
        for (int j = 0; j < NR; j++) e[j] = _mm256_fmadd_ps(w0, ld8h(r0 + 8 * j), e[j]);
    }
    for (int j = 0; j < NR; j++) {
        float *a = acc + cb + 8 * j;
        _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), _mm256_add_ps(e[j], o[j])));
    }
}

void vq_fp16_accumulate_avx2(const uint16_t *x, int d, int64_t n, const float *w, float *acc) {
    int cb = 0;
    for (; cb + 32 <= d; cb += 32) acc_block(x, d, n, w, acc, cb, 4);
    switch ((d - cb) / 8) {
    case 3: acc_block(x, d, n, w, acc, cb, 3); break;
    case 2: acc_block(x, d, n, w, acc, cb, 2); break;
    case 1: acc_block(x, d, n, w, acc, cb, 1); break;
    default: break;
    }
}
