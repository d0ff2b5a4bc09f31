/*
 * ggml_avx512.c — AVX-512 (F/BW/DQ/VL) dot-product kernels for ggml weight rows: two 32-element
 * blocks per 512-bit register. Each matches its scalar _ref twin up to summation order.
 */
#include <immintrin.h>

#include "engine/ggml.h"

static inline __m512i unpack_nibbles2(const uint8_t *qs0, const uint8_t *qs1) {
    __m128i t0 = _mm_loadu_si128((const __m128i *)qs0), t1 = _mm_loadu_si128((const __m128i *)qs1);
    __m256i v0 = _mm256_set_m128i(_mm_srli_epi16(t0, 4), t0);
    __m256i v1 = _mm256_set_m128i(_mm_srli_epi16(t1, 4), t1);
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1);
    return _mm512_and_si512(v, _mm512_set1_epi8(15));
}

static inline __m512i load2(const int8_t *a0, const int8_t *a1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a0)),
                              _mm256_loadu_si256((const __m256i *)a1), 1);
}

static inline __m512 scale2(float d0, float d1) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1), 1);
}

static inline __m512 dot_u8s8(__m512i u, __m512i s) {
    return _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
}

float vq_vec_dot_f32_f32_avx512(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

float vq_vec_dot_q4_0_q8a_avx512(int64_t n, const void *w, const void *a) {
    const vq_block_q4_0 *x = w;
    const vq_block_q8a *y = a;
    int64_t nb = n / 32, i = 0;
    __m512 acc = _mm512_setzero_ps();
    float corr = 0;
    for (; i + 2 <= nb; i += 2) {
        float d0 = _cvtsh_ss(x[i].d), d1 = _cvtsh_ss(x[i + 1].d);
        __m512i q = unpack_nibbles2(x[i].qs, x[i + 1].qs);
        __m512i qa = load2(y[i].qs, y[i + 1].qs);
        acc = _mm512_fmadd_ps(scale2(d0 * y[i].d, d1 * y[i + 1].d), dot_u8s8(q, qa), acc);
        corr += d0 * y[i].s + d1 * y[i + 1].s;
    }
    float s = _mm512_reduce_add_ps(acc) - 8.0f * corr;
    if (i < nb) s += vq_vec_dot_q4_0_q8a_avx2(32, x + i, y + i);
    return s;
}

float vq_vec_dot_q4_1_q8a_avx512(int64_t n, const void *w, const void *a) {
    const vq_block_q4_1 *x = w;
    const vq_block_q8a *y = a;
    int64_t nb = n / 32, i = 0;
    __m512 acc = _mm512_setzero_ps();
    float summ = 0;
    for (; i + 2 <= nb; i += 2) {
        __m512i q = unpack_nibbles2(x[i].qs, x[i + 1].qs);
        __m512i qa = load2(y[i].qs, y[i + 1].qs);
        __m512 d = scale2(_cvtsh_ss(x[i].d) * y[i].d, _cvtsh_ss(x[i + 1].d) * y[i + 1].d);
        acc = _mm512_fmadd_ps(d, dot_u8s8(q, qa), acc);
        summ += _cvtsh_ss(x[i].m) * y[i].s + _cvtsh_ss(x[i + 1].m) * y[i + 1].s;
    }
    float s = _mm512_reduce_add_ps(acc) + summ;
    if (i < nb) s += vq_vec_dot_q4_1_q8a_avx2(32, x + i, y + i);
    return s;
}

float vq_vec_dot_q8_0_q8a_avx512(int64_t n, const void *w, const void *a) {
    const vq_block_q8_0 *x = w;
    const vq_block_q8a *y = a;
    int64_t nb = n / 32, i = 0;
    __m512 acc = _mm512_setzero_ps();
    for (; i + 2 <= nb; i += 2) {
        __m512i q = load2(x[i].qs, x[i + 1].qs);
        __m512i qa = load2(y[i].qs, y[i + 1].qs);
        __m512i aq = _mm512_abs_epi8(q);
        /* sign of q applied to qa: negate where q < 0, zero where q == 0 (aq = 0 then) */
        __mmask64 neg = _mm512_movepi8_mask(q);
        __m512i sa = _mm512_mask_sub_epi8(qa, neg, _mm512_setzero_si512(), qa);
        __m512 d = scale2(_cvtsh_ss(x[i].d) * y[i].d, _cvtsh_ss(x[i + 1].d) * y[i + 1].d);
        acc = _mm512_fmadd_ps(d, dot_u8s8(aq, sa), acc);
    }
    float s = _mm512_reduce_add_ps(acc);
    if (i < nb) s += vq_vec_dot_q8_0_q8a_avx2(32, x + i, y + i);
    return s;
}

/* ---- one weight row against 4 activation rows. Per row, the operation sequence is exactly
 * that of the single-row kernel above, so batched prefill and one-token decode give
 * bit-identical results. ---- */

static inline const vq_block_q8a *arow(const void *a, size_t stride, int j) {
    return (const vq_block_q8a *)(const void *)((const uint8_t *)a + (size_t)j * stride);
}

void vq_vec_dot4_q4_1_q8a_avx512(int64_t n, const void *w, const void *a, size_t a_stride, float *out) {
    const vq_block_q4_1 *x = w;
    const vq_block_q8a *y[4] = {arow(a, a_stride, 0), arow(a, a_stride, 1), arow(a, a_stride, 2), arow(a, a_stride, 3)};
    int64_t nb = n / 32, i = 0;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    float summ[4] = {0, 0, 0, 0};
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = unpack_nibbles2(x[i].qs, x[i + 1].qs);
        const float d0 = _cvtsh_ss(x[i].d), d1 = _cvtsh_ss(x[i + 1].d);
        const float m0 = _cvtsh_ss(x[i].m), m1 = _cvtsh_ss(x[i + 1].m);
        for (int j = 0; j < 4; j++) {
            const vq_block_q8a *yj = y[j];
            __m512i qa = load2(yj[i].qs, yj[i + 1].qs);
            acc[j] = _mm512_fmadd_ps(scale2(d0 * yj[i].d, d1 * yj[i + 1].d), dot_u8s8(q, qa), acc[j]);
            summ[j] += m0 * yj[i].s + m1 * yj[i + 1].s;
        }
    }
    for (int j = 0; j < 4; j++) {
        float s = _mm512_reduce_add_ps(acc[j]) + summ[j];
        if (i < nb) s += vq_vec_dot_q4_1_q8a_avx2(32, x + i, y[j] + i);
        out[j] = s;
    }
}

void vq_vec_dot4_q4_0_q8a_avx512(int64_t n, const void *w, const void *a, size_t a_stride, float *out) {
    const vq_block_q4_0 *x = w;
    const vq_block_q8a *y[4] = {arow(a, a_stride, 0), arow(a, a_stride, 1), arow(a, a_stride, 2), arow(a, a_stride, 3)};
    int64_t nb = n / 32, i = 0;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    float corr[4] = {0, 0, 0, 0};
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = unpack_nibbles2(x[i].qs, x[i + 1].qs);
        const float d0 = _cvtsh_ss(x[i].d), d1 = _cvtsh_ss(x[i + 1].d);
        for (int j = 0; j < 4; j++) {
            const vq_block_q8a *yj = y[j];
            __m512i qa = load2(yj[i].qs, yj[i + 1].qs);
            acc[j] = _mm512_fmadd_ps(scale2(d0 * yj[i].d, d1 * yj[i + 1].d), dot_u8s8(q, qa), acc[j]);
            corr[j] += d0 * yj[i].s + d1 * yj[i + 1].s;
        }
    }
    for (int j = 0; j < 4; j++) {
        float s = _mm512_reduce_add_ps(acc[j]) - 8.0f * corr[j];
        if (i < nb) s += vq_vec_dot_q4_0_q8a_avx2(32, x + i, y[j] + i);
        out[j] = s;
    }
}

void vq_vec_dot4_q8_0_q8a_avx512(int64_t n, const void *w, const void *a, size_t a_stride, float *out) {
    const vq_block_q8_0 *x = w;
    const vq_block_q8a *y[4] = {arow(a, a_stride, 0), arow(a, a_stride, 1), arow(a, a_stride, 2), arow(a, a_stride, 3)};
    int64_t nb = n / 32, i = 0;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = load2(x[i].qs, x[i + 1].qs);
        const __m512i aq = _mm512_abs_epi8(q);
        const __mmask64 neg = _mm512_movepi8_mask(q);
        const float d0 = _cvtsh_ss(x[i].d), d1 = _cvtsh_ss(x[i + 1].d);
        for (int j = 0; j < 4; j++) {
            const vq_block_q8a *yj = y[j];
            __m512i qa = load2(yj[i].qs, yj[i + 1].qs);
            __m512i sa = _mm512_mask_sub_epi8(qa, neg, _mm512_setzero_si512(), qa);
            acc[j] = _mm512_fmadd_ps(scale2(d0 * yj[i].d, d1 * yj[i + 1].d), dot_u8s8(aq, sa), acc[j]);
        }
    }
    for (int j = 0; j < 4; j++) {
        float s = _mm512_reduce_add_ps(acc[j]);
        if (i < nb) s += vq_vec_dot_q8_0_q8a_avx2(32, x + i, y[j] + i);
        out[j] = s;
    }
}
