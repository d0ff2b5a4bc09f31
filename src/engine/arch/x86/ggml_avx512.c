/*
 * ggml_avx512.c — AVX-512 (F/BW/DQ/VL) kernels for ggml weight rows and llama.cpp's numerics.
 * Types whose ggml x86 kernel accumulates one 32-element block per 256-bit step (Q4_0, Q4_1,
 * Q5_0, Q8_0) keep that order here (bit-identical to the _ref twins); the AVX2 kernels serve
 * the other quantized types.
 */
#include <immintrin.h>
#include <math.h>

#include "engine/ggml.h"
#include "cache/arch/x86/ggml_x86.h"

float vq_vec_dot_f32_f32_avx512(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* Q4_1 in ggml's operation order (ggml_vec_dot_q4_1_q8_1, x86): per block, 8 int32 lanes of
 * 4 products each, one FMA per block into 8 float lanes, the m * s terms chained by FMA in
 * block order, hsum of the lanes (high + low halves first), then + the m * s sum. The same
 * rounding sequence as llama.cpp matters here: the next layer re-quantizes activations to int8,
 * which turns last-bit differences into whole rounding steps (tests/golden/README.md). */
static inline float hsum8_ggml(__m256 v) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* One block (elements 32i..32i+31) of one activation row into acc / summs. */
static inline __m256 q4_1_block(const vq_block_q4_1 *x, const vq_block_q8a *y, __m256i q,
                                __m256 acc, float *summs) {
    const __m256i p = _mm256_madd_epi16(
        _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y->qs)), _mm256_set1_epi16(1));
    *summs = fmaf(_cvtsh_ss(x->m), y->s, *summs);
    return _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x->d) * y->d), _mm256_cvtepi32_ps(p), acc);
}

static inline __m256i unpack_nibbles1(const uint8_t *qs) {
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}

float vq_vec_dot_q4_1_q8a_avx512(int64_t n, const void *w, const void *a) {
    const vq_block_q4_1 *x = w;
    const vq_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / 32; i++)
        acc = q4_1_block(x + i, y + i, unpack_nibbles1(x[i].qs), acc, &summs);
    return hsum8_ggml(acc) + summs;
}

/* ---- one weight row against 4 activation rows. Per row, the operation sequence is exactly
 * that of the single-row kernel above, so batched prefill and one-token decode give
 * bit-identical results. ---- */

static inline const vq_block_q8a *arow(const void *a, size_t stride, int j) {
    return (const vq_block_q8a *)(const void *)((const uint8_t *)a + (size_t)j * stride);
}

void vq_vec_dot4_q4_1_q8a_avx512(int64_t n, const void *w, const void *a, size_t a_stride,
                                 float *out) {
    const vq_block_q4_1 *x = w;
    const vq_block_q8a *y[4] = {arow(a, a_stride, 0), arow(a, a_stride, 1), arow(a, a_stride, 2),
                                arow(a, a_stride, 3)};
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    float summs[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i q = unpack_nibbles1(x[i].qs);
        for (int j = 0; j < 4; j++) acc[j] = q4_1_block(x + i, y[j] + i, q, acc[j], &summs[j]);
    }
    for (int j = 0; j < 4; j++) out[j] = hsum8_ggml(acc[j]) + summs[j];
}


/* ---- SwiGLU (ggml.h) with ggml_v_expf512 (cache/arch/x86/ggml_x86.h) ---- */

void vq_ggml_swiglu_avx512(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 15 < n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 e = ggml_v_expf512(_mm512_sub_ps(_mm512_setzero_ps(), x));
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

/* ggml's quantize_row_q8_1 per 32-element block (see vq_quantize_row_q8a_ref): every element
 * is rounded independently and max / integer sums are exact, so this equals the reference. */
void vq_quantize_row_q8a_avx512(const float *x, void *y, int64_t n) {
    vq_block_q8a *b = y;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(
            _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
        const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        const __m512 m = _mm512_set1_ps(id);
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, m)),
                      q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, m));
        _mm_storeu_si128((__m128i *)b[i].qs, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(b[i].qs + 16), _mm512_cvtsepi32_epi8(q1));
        const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        b[i].d = vq_ggml_h2f(vq_ggml_f2h(d));
        b[i].s = vq_ggml_h2f(vq_ggml_f2h(d * (float)sum));
    }
}

/* ggml's quantize_row_q8_K_ref per 256-element block (see vq_quantize_row_q8_K_ref): max is
 * the first element of largest magnitude, every element is rounded independently (nearest,
 * ties to even: the 1.5 * 2^23 trick of the reference for |q| <= 127) and the 16-element sums
 * are exact, so this equals the reference byte for byte. */
void vq_quantize_row_q8_K_avx512(const float *x, void *y, int64_t n) {
    vq_block_q8_K *b = y;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / VQ_QK_K; i++, x += VQ_QK_K) {
        __m512 mx = _mm512_setzero_ps();
        for (int g = 0; g < 16; g++)
            mx = _mm512_max_ps(mx, _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * g)));
        const float amax = _mm512_reduce_max_ps(mx);
        memset(&b[i], 0, sizeof b[i]);
        if (!(amax > 0)) continue; /* all zero (the reference skips NaN too) */
        float max = 0;
        for (int g = 0; g < 16; g++) {
            const __mmask16 hit = _mm512_cmp_ps_mask(
                _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 16 * g)), _mm512_set1_ps(amax),
                _CMP_EQ_OQ);
            if (hit) {
                max = x[16 * g + __builtin_ctz(hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 s = _mm512_set1_ps(iscale);
        for (int g = 0; g < 16; g++) {
            const __m512i q = _mm512_min_epi32(
                _mm512_cvtps_epi32(_mm512_mul_ps(s, _mm512_loadu_ps(x + 16 * g))),
                _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(b[i].qs + 16 * g), _mm512_cvtsepi32_epi8(q));
            b[i].bsums[g] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        b[i].d = 1 / iscale;
    }
}

/* ggml_vec_geglu_f32 (see vq_ggml_geglu_ref): the fp16 index by VCVTPS2PH (round to nearest
 * even, as vq_ggml_f2h), 16 table entries per gather (32-bit reads at 2-byte steps: the table
 * has one entry of padding), VCVTPH2PS back (exact); the cut-offs at +-10 as masks. */
void vq_ggml_geglu_avx512(const uint16_t *table, float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 15 < n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i), uv = _mm512_loadu_ps(u + i);
        const __m512i h = _mm512_cvtepu16_epi32(
            _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m512i e = _mm512_i32gather_epi32(h, (const void *)table, 2);
        __m512 r = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(e)), uv);
        r = _mm512_mask_mul_ps(r, _mm512_cmp_ps_mask(x, _mm512_set1_ps(10.0f), _CMP_GE_OQ), x, uv);
        r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-10.0f), _CMP_LE_OQ),
                               _mm512_setzero_ps());
        _mm512_storeu_ps(g + i, r);
    }
    if (i < n) vq_ggml_geglu_ref(table, g + i, u + i, n - i);
}
