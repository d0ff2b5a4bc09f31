/*
 * fp16_avx512.c — AVX-512 (F, BW, VL, DQ) + F16C kernels of the fp16 codec (contract in
 * codecs/fp16.h).
 * Score: 8 tokens at a time, one zmm accumulator per token (8 independent FMA chains), a
 * masked 8-lane step when head_dim % 16 == 8, then fold to ymm and a hadd tree (8 scores,
 * one store). Leftover tokens use the same per-token operation order (bit-identical scores).
 * Accumulate: channel blocks of 64 (4 zmm) x 2 interleaved token streams = 8 FMA chains; the
 * last 16-lane chunk is masked when head_dim % 16 == 8.
 */
#include <immintrin.h>
#include <stdint.h>

#include "codecs/fp16.h"

#define VQ_INLINE static inline __attribute__((always_inline))

VQ_INLINE __m512 ld16h(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}
/* Loads 8 halves into the low lanes, zeros in the high lanes. */
VQ_INLINE __m512 ld8h(const uint16_t *p) {
    return _mm512_cvtph_ps(
        _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p)));
}
VQ_INLINE __m512 ldh_mask(const uint16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

VQ_INLINE __m256 fold(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

VQ_INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                         __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Same lane order as one lane of hsum8x8 (see fp16_avx2.c). */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

void vq_fp16_score_avx512(const float *q, const uint16_t *x, int d, int64_t n, float *scores) {
    const int d16 = d & ~15;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint16_t *r = x + t * d;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int c = 0; c < d16; c += 16) {
            const __m512 qv = _mm512_loadu_ps(q + c);
            a0 = _mm512_fmadd_ps(qv, ld16h(r + c), a0);
            a1 = _mm512_fmadd_ps(qv, ld16h(r + d + c), a1);
            a2 = _mm512_fmadd_ps(qv, ld16h(r + 2 * d + c), a2);
            a3 = _mm512_fmadd_ps(qv, ld16h(r + 3 * d + c), a3);
            a4 = _mm512_fmadd_ps(qv, ld16h(r + 4 * d + c), a4);
            a5 = _mm512_fmadd_ps(qv, ld16h(r + 5 * d + c), a5);
            a6 = _mm512_fmadd_ps(qv, ld16h(r + 6 * d + c), a6);
            a7 = _mm512_fmadd_ps(qv, ld16h(r + 7 * d + c), a7);
        }
        if (d16 < d) {
            const int c = d16;
            const __m512 qv = _mm512_maskz_loadu_ps(0xFF, q + c);
            a0 = _mm512_fmadd_ps(qv, ld8h(r + c), a0);
            a1 = _mm512_fmadd_ps(qv, ld8h(r + d + c), a1);
            a2 = _mm512_fmadd_ps(qv, ld8h(r + 2 * d + c), a2);
            a3 = _mm512_fmadd_ps(qv, ld8h(r + 3 * d + c), a3);
            a4 = _mm512_fmadd_ps(qv, ld8h(r + 4 * d + c), a4);
            a5 = _mm512_fmadd_ps(qv, ld8h(r + 5 * d + c), a5);
            a6 = _mm512_fmadd_ps(qv, ld8h(r + 6 * d + c), a6);
            a7 = _mm512_fmadd_ps(qv, ld8h(r + 7 * d + c), a7);
        }
        _mm256_storeu_ps(scores + t, hsum8x8(fold(a0), fold(a1), fold(a2), fold(a3), fold(a4),
                                             fold(a5), fold(a6), fold(a7)));
    }
    for (; t < n; t++) {
        const uint16_t *r = x + t * d;
        __m512 a0 = _mm512_setzero_ps();
        for (int c = 0; c < d16; c += 16)
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + c), ld16h(r + c), a0);
        if (d16 < d) a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(0xFF, q + d16), ld8h(r + d16), a0);
        scores[t] = hsum1(fold(a0));
    }
}

/* acc[cb .. cb + 16*NR) += sum_t w[t] x_t[cb ..]; the last chunk uses lane mask `last`
 * (0xFFFF or 0x00FF). NR (1..4) is a compile-time constant at every call site. */
VQ_INLINE void acc_block(const uint16_t *x, int d, int64_t n, const float *w, float *acc, int cb,
                         const int NR, __mmask16 last) {
    __m512 e[4], o[4];
    __mmask16 m[4];
    for (int j = 0; j < NR; j++) {
        e[j] = o[j] = _mm512_setzero_ps();
        m[j] = j == NR - 1 ? last : (__mmask16)0xFFFF;
    }
    int64_t t = 0;
    for (; t + 2 <= n; t += 2) {
        const __m512 w0 = _mm512_set1_ps(w[t]), w1 = _mm512_set1_ps(w[t + 1]);
        const uint16_t *r0 = x + t * d + cb, *r1 = r0 + d;
        for (int j = 0; j < NR; j++) {
            e[j] = _mm512_fmadd_ps(w0, ldh_mask(r0 + 16 * j, m[j]), e[j]);
            o[j] = _mm512_fmadd_ps(w1, ldh_mask(r1 + 16 * j, m[j]), o[j]);
        }
    }
    if (t < n) {
        const __m512 w0 = _mm512_set1_ps(w[t]);
        const uint16_t *r0 = x + t * d + cb;
        for (int j = 0; j < NR; j++) e[j] = _mm512_fmadd_ps(w0, ldh_mask(r0 + 16 * j, m[j]), e[j]);
    }
    for (int j = 0; j < NR; j++) {
        float *a = acc + cb + 16 * j;
        const __m512 s = _mm512_add_ps(_mm512_maskz_loadu_ps(m[j], a), _mm512_add_ps(e[j], o[j]));
        _mm512_mask_storeu_ps(a, m[j], s);
    }
}

void vq_fp16_accumulate_avx512(const uint16_t *x, int d, int64_t n, const float *w, float *acc) {
    int cb = 0;
    for (; cb + 64 <= d; cb += 64) acc_block(x, d, n, w, acc, cb, 4, 0xFFFF);
    const int rest = d - cb; /* 0..56, multiple of 8 */
    const __mmask16 last = (rest % 16) ? (__mmask16)0x00FF : (__mmask16)0xFFFF;
    switch ((rest + 15) / 16) {
    case 4: acc_block(x, d, n, w, acc, cb, 4, last); break;
    case 3: acc_block(x, d, n, w, acc, cb, 3, last); break;
    case 2: acc_block(x, d, n, w, acc, cb, 2, last); break;
    case 1: acc_block(x, d, n, w, acc, cb, 1, last); break;
    default: break;
    }
}
