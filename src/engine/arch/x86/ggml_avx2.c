/*
 * ggml_avx2.c — AVX2/FMA/F16C dot-product kernels for ggml weight rows (see ggml.h).
 * Q4_0, Q4_1, Q5_0, Q8_0, Q4_K and Q6_K follow ggml's x86 float order and are bit-identical to
 * their scalar _ref twins (tests/unit/test_ggml_types.c); the others match up to summation order.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "engine/ggml.h"
#include "cache/arch/x86/ggml_x86.h"

/* 16 packed bytes -> 32 bytes: low nibbles (elements 0..15), then high nibbles (16..31). */
static inline __m256i unpack_nibbles(const uint8_t *qs) {
    __m128i t = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

/* 8 int32 sums of u8 x s8 products (4 products each). */
static inline __m256i dot_u8s8_i32(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
static inline __m256 dot_u8s8(__m256i u, __m256i s) {
    return _mm256_cvtepi32_ps(dot_u8s8_i32(u, s));
}
static inline __m256 dot_s8s8(__m256i x, __m256i y) {
    return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* 32 bits -> 32 bytes, 0xFF where the bit is set. */
static inline __m256i bytes_from_bits32(const uint8_t *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    __m256i v = _mm256_set1_epi32((int)x);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    v = _mm256_shuffle_epi8(v, shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

float vq_vec_dot_f32_f32_avx2(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

float vq_vec_dot_f16_f32_avx2(int64_t n, const void *w, const void *a) {
    const vq_half *x = w;
    const float *y = a;
    __m256 s0 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        s0 = _mm256_fmadd_ps(xf, _mm256_loadu_ps(y + i), s0);
    }
    float s = hsum256(s0);
    for (; i < n; i++) s += vq_ggml_h2f(x[i]) * y[i];
    return s;
}

float vq_vec_dot_bf16_f32_avx2(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w;
    const float *y = a;
    __m256 s0 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        __m256 xf = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        s0 = _mm256_fmadd_ps(xf, _mm256_loadu_ps(y + i), s0);
    }
    float s = hsum256(s0);
    for (; i < n; i++) s += vq_ggml_bf2f(x[i]) * y[i];
    return s;
}

/* Q4_0 / Q5_0: weights made signed (q - 8, q - 16) and multiplied as s8 x s8, as ggml does;
 * the activation's s field (an fp16-rounded d * sum, ggml's Q8_1 semantics) is not used. */
float vq_vec_dot_q4_0_q8a_avx2(int64_t n, const void *w, const void *a) {
    const vq_block_q4_0 *x = w;
    const vq_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = _mm256_sub_epi8(unpack_nibbles(x[i].qs), _mm256_set1_epi8(8));
        __m256i qa = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), dot_s8s8(q, qa), acc);
    }
    return hsum256(acc);
}

float vq_vec_dot_q4_1_q8a_avx2(int64_t n, const void *w, const void *a) {
    const vq_block_q4_1 *x = w;
    const vq_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = unpack_nibbles(x[i].qs);
        __m256i qa = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), dot_u8s8(q, qa), acc);
        summ = fmaf(_cvtsh_ss(x[i].m), y[i].s, summ); /* ggml's order (see ggml_avx512.c) */
    }
    return hsum256(acc) + summ;
}

/* The 32 signed weights (q - 16) of a Q5_0 block as bytes. */
static inline __m256i q5_0_signed(const vq_block_q5_0 *b) {
    const __m256i hb = _mm256_and_si256(bytes_from_bits32(b->qh), _mm256_set1_epi8(16));
    return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(b->qs), hb), _mm256_set1_epi8(16));
}

float vq_vec_dot_q5_0_q8a_avx2(int64_t n, const void *w, const void *a) {
    const vq_block_q5_0 *x = w;
    const vq_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = q5_0_signed(&x[i]);
        __m256i qa = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), dot_s8s8(q, qa), acc);
    }
    return hsum256(acc);
}

float vq_vec_dot_q5_1_q8a_avx2(int64_t n, const void *w, const void *a) {
    const vq_block_q5_1 *x = w;
    const vq_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summ = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i hb = _mm256_and_si256(bytes_from_bits32(x[i].qh), _mm256_set1_epi8(16));
        __m256i q = _mm256_or_si256(unpack_nibbles(x[i].qs), hb);
        __m256i qa = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), dot_u8s8(q, qa), acc);
        summ = fmaf(_cvtsh_ss(x[i].m), y[i].s, summ); /* ggml's order (see ggml_avx512.c) */
    }
    return hsum256(acc) + summ;
}

float vq_vec_dot_q8_0_q8a_avx2(int64_t n, const void *w, const void *a) {
    const vq_block_q8_0 *x = w;
    const vq_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256i qa = _mm256_loadu_si256((const __m256i *)y[i].qs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(x[i].d) * y[i].d), dot_s8s8(q, qa), acc);
    }
    return hsum256(acc);
}

static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Integer parts of one Q4_K x Q8_K super-block per 64-element chunk p (sub-blocks 2p, 2p+1):
 * isum[p] = sum of scale x (q . a), imin[p] = sum of min x block sum (exact). */
static inline void q4_K_chunk_ints(const vq_block_q4_K *x, const vq_block_q8_K *y, int isum[4],
                                   int imin[4]) {
    const uint8_t *q = x->scales;
    int sc[8], m[8];
    for (int k = 0; k < 4; k++) {
        sc[k] = q[k] & 63;
        m[k] = q[k + 4] & 63;
        sc[k + 4] = (q[k + 8] & 15) | ((q[k] >> 6) << 4);
        m[k + 4] = (q[k + 8] >> 4) | ((q[k + 4] >> 6) << 4);
    }
    for (int p = 0; p < 4; p++) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * p));
        const __m256i lo = _mm256_and_si256(raw, _mm256_set1_epi8(15));
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(15));
        const __m256i a0 = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * p));
        const __m256i a1 = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * p + 32));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0),
                                             _mm256_set1_epi16((short)sc[2 * p]));
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1),
                                             _mm256_set1_epi16((short)sc[2 * p + 1]));
        isum[p] = hsum_i32(_mm256_add_epi32(p0, p1));
        imin[p] = m[2 * p] * (y->bsums[4 * p] + y->bsums[4 * p + 1]) +
                  m[2 * p + 1] * (y->bsums[4 * p + 2] + y->bsums[4 * p + 3]);
    }
}

/* The float steps of ggml's repacked Q4_K kernels (see the _ref twins): one fma per
 * super-block (gemv) here, one per 64-element chunk in the four-row kernel (gemm). */
float vq_vec_dot_q4_K_q8_K_avx2(int64_t n, const void *w, const void *a) {
    return vq_q4_K_gemv_chain(q4_K_chunk_ints, n, w, a);
}

void vq_vec_dot4_q4_K_q8_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                float *out) {
    vq_q4_K_gemm_chain(q4_K_chunk_ints, n, w, a, a_stride, out);
}

/* ggml_vec_dot_q6_K_q8_K's AVX2 sequence: unsigned 6-bit codes x activations per 32-element
 * group, times the group's two scales, 8 int32 lanes per super-block minus 32 x scale x block
 * sums, one fma per super-block into 8 float lanes, hsum at the end (see the _ref twin). */
float vq_vec_dot_q6_K_q8_K_avx2(int64_t n, const void *w, const void *a) {
    const vq_block_q6_K *x = w;
    const vq_block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m256i corr = _mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc8));
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, 5));
        for (int h = 0; h < 2; h++) {
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            for (int g = 0; g < 4; g++) {
                const __m256i ql = (g & 1) ? ql1 : ql0;
                const __m256i low4 = _mm256_and_si256(g < 2 ? ql : _mm256_srli_epi16(ql, 4), m15);
                const __m256i hi2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m3);
                const __m256i q = _mm256_or_si256(low4, _mm256_slli_epi16(hi2, 4));
                const int e0 = 128 * h + 32 * g;
                const __m256i qa = _mm256_loadu_si256((const __m256i *)(y[i].qs + e0));
                const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(x[i].scales[e0 / 16 + 1]),
                                                     _mm_set1_epi16(x[i].scales[e0 / 16]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scv, _mm256_maddubs_epi16(q, qa)));
            }
        }
        const __m256 d = _mm256_set1_ps(y[i].d * _cvtsh_ss(x[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum256(acc);
}

/* ---- one weight row against 4 activation rows (prefill): the weight block is unpacked
 * once and reused for every row ---- */

static inline const vq_block_q8a *arow(const void *a, size_t stride, int j) {
    return (const vq_block_q8a *)(const void *)((const uint8_t *)a + (size_t)j * stride);
}

void vq_vec_dot4_q4_1_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out) {
    const vq_block_q4_1 *x = w;
    const vq_block_q8a *y0 = arow(a, a_stride, 0), *y1 = arow(a, a_stride, 1);
    const vq_block_q8a *y2 = arow(a, a_stride, 2), *y3 = arow(a, a_stride, 3);
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps(), c2 = _mm256_setzero_ps(),
           c3 = _mm256_setzero_ps();
    float m0 = 0, m1 = 0, m2 = 0, m3 = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i q = unpack_nibbles(x[i].qs);
        const float d = _cvtsh_ss(x[i].d), m = _cvtsh_ss(x[i].m);
        c0 = _mm256_fmadd_ps(_mm256_set1_ps(d * y0[i].d),
                             dot_u8s8(q, _mm256_loadu_si256((const __m256i *)y0[i].qs)), c0);
        c1 = _mm256_fmadd_ps(_mm256_set1_ps(d * y1[i].d),
                             dot_u8s8(q, _mm256_loadu_si256((const __m256i *)y1[i].qs)), c1);
        c2 = _mm256_fmadd_ps(_mm256_set1_ps(d * y2[i].d),
                             dot_u8s8(q, _mm256_loadu_si256((const __m256i *)y2[i].qs)), c2);
        c3 = _mm256_fmadd_ps(_mm256_set1_ps(d * y3[i].d),
                             dot_u8s8(q, _mm256_loadu_si256((const __m256i *)y3[i].qs)), c3);
        m0 = fmaf(m, y0[i].s, m0);
        m1 = fmaf(m, y1[i].s, m1);
        m2 = fmaf(m, y2[i].s, m2);
        m3 = fmaf(m, y3[i].s, m3);
    }
    out[0] = hsum256(c0) + m0;
    out[1] = hsum256(c1) + m1;
    out[2] = hsum256(c2) + m2;
    out[3] = hsum256(c3) + m3;
}

/* One block of signed weights q (scale d) against block i of four activation rows:
 * c[j] += d * d_a * (q . a_j), the products as |q| x (a_j with q's sign). */
static inline void dot4_s8_block(__m256i q, float d, const vq_block_q8a *const y[4], int64_t i,
                                 __m256 c[4]) {
    const __m256i aq = _mm256_sign_epi8(q, q);
    for (int j = 0; j < 4; j++)
        c[j] = _mm256_fmadd_ps(
            _mm256_set1_ps(d * y[j][i].d),
            dot_u8s8(aq, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[j][i].qs), q)),
            c[j]);
}

void vq_vec_dot4_q8_0_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out) {
    const vq_block_q8_0 *x = w;
    const vq_block_q8a *const y[4] = {arow(a, a_stride, 0), arow(a, a_stride, 1),
                                      arow(a, a_stride, 2), arow(a, a_stride, 3)};
    __m256 c[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / 32; i++)
        dot4_s8_block(_mm256_loadu_si256((const __m256i *)x[i].qs), _cvtsh_ss(x[i].d), y, i, c);
    for (int j = 0; j < 4; j++) out[j] = hsum256(c[j]);
}

void vq_vec_dot4_q4_0_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out) {
    const vq_block_q4_0 *x = w;
    const vq_block_q8a *const y[4] = {arow(a, a_stride, 0), arow(a, a_stride, 1),
                                      arow(a, a_stride, 2), arow(a, a_stride, 3)};
    __m256 c[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / 32; i++)
        dot4_s8_block(_mm256_sub_epi8(unpack_nibbles(x[i].qs), _mm256_set1_epi8(8)),
                      _cvtsh_ss(x[i].d), y, i, c);
    for (int j = 0; j < 4; j++) out[j] = hsum256(c[j]);
}

void vq_vec_dot4_q5_0_q8a_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                               float *out) {
    const vq_block_q5_0 *x = w;
    const vq_block_q8a *const y[4] = {arow(a, a_stride, 0), arow(a, a_stride, 1),
                                      arow(a, a_stride, 2), arow(a, a_stride, 3)};
    __m256 c[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / 32; i++)
        dot4_s8_block(q5_0_signed(&x[i]), _cvtsh_ss(x[i].d), y, i, c);
    for (int j = 0; j < 4; j++) out[j] = hsum256(c[j]);
}

/* ---- SwiGLU (ggml.h): ggml_v_expf on two 8-lane halves (cache/arch/x86/ggml_x86.h) ---- */

void vq_ggml_swiglu_avx2(float *g, const float *u, int64_t n) {
    const int64_t nv = n / 16 * 16;
    int64_t i = 0;
    for (; i < nv; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = ggml_v_expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

/* ggml's quantize_row_q8_1 (x86) per 32-element block; equals vq_quantize_row_q8a_ref. */
void vq_quantize_row_q8a_avx2(const float *x, void *y, int64_t n) {
    vq_block_q8a *b = y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[j]));
        }
        const float amax = hmax256(mx);
        const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
        const __m256 m = _mm256_set1_ps(id);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], m));
        const __m256i s32 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]),
                                             _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_extracti128_si256(s32, 1), _mm256_castsi256_si128(s32));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        const int sum = _mm_cvtsi128_si32(s4);
        /* int32 -> int8 in element order: packs work per 128-bit lane, then a permute fixes it */
        const __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
        const __m256i p = _mm256_packs_epi16(p01, p23);
        _mm256_storeu_si256((__m256i *)b[i].qs, _mm256_permutevar8x32_epi32(
                                                    p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        b[i].d = vq_ggml_h2f(vq_ggml_f2h(d));
        b[i].s = vq_ggml_h2f(vq_ggml_f2h(d * (float)sum));
    }
}

/* vq_quantize_row_q8_K_ref on 8-lane vectors (the AVX-512 twin's steps): the block's largest
 * magnitude, the first element that has it (its sign sets the codes' sign), the codes by
 * VCVTPS2DQ (round to nearest even, as nearest_int) clamped at 127, 16-element sums. The same
 * bytes as the reference (tests/unit/test_ggml_types.c). */
void vq_quantize_row_q8_K_avx2(const float *x, void *y, int64_t n) {
    vq_block_q8_K *b = y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i c127 = _mm256_set1_epi32(127);
    for (int64_t i = 0; i < n / VQ_QK_K; i++, x += VQ_QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int g = 0; g < 32; g++)
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * g)));
        const float amax = hmax256(mx);
        memset(&b[i], 0, sizeof b[i]);
        if (!(amax > 0)) continue; /* all zero (the reference skips NaN too) */
        float max = 0;
        for (int g = 0; g < 32; g++) {
            const int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * g)),
                              _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hit) {
                max = x[8 * g + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 s = _mm256_set1_ps(iscale);
        for (int g = 0; g < 16; g++) {
            const __m256i q0 = _mm256_min_epi32(
                _mm256_cvtps_epi32(_mm256_mul_ps(s, _mm256_loadu_ps(x + 16 * g))), c127);
            const __m256i q1 = _mm256_min_epi32(
                _mm256_cvtps_epi32(_mm256_mul_ps(s, _mm256_loadu_ps(x + 16 * g + 8))), c127);
            /* int32 -> int8 in element order: packs per 128-bit lane, then a permute */
            const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
            _mm_storeu_si128(
                (__m128i *)(b[i].qs + 16 * g),
                _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
            const __m256i s8 = _mm256_add_epi32(q0, q1);
            __m128i s4 = _mm_add_epi32(_mm256_extracti128_si256(s8, 1), _mm256_castsi256_si128(s8));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
            b[i].bsums[g] = (int16_t)_mm_cvtsi128_si32(s4);
        }
        b[i].d = 1 / iscale;
    }
}
