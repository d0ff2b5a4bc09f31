/*
 * ggml_avx512vnni.c — AVX-512 VNNI kernels for the weight types with int8 activations (Q4_0,
 * Q4_1, Q5_0, Q8_0): four weight rows against one activation row (decode, ggml.h vec_dot_r4)
 * and against four or eight (prefill, vec_dot_r4x4 / r4x8), two weight rows per 512-bit
 * register.
 *
 * Each row keeps the exact float sequence of its single-row kernel (ggml's x86 order, see
 * ggml_avx512.c): per 32-element block, 8 int32 lanes of 4 products each (lanes 0-3 the first
 * 16 elements, 4-7 the last 16), converted to float and FMA'd into 8 float lanes with the
 * block's scale d_w * d_a; hsum of the 8 lanes at the end. Only the integer part changes
 * (VPDPBUSD instead of PMADDUBSW + PMADDWD; integer sums are exact, and PMADDUBSW cannot
 * saturate on these operands: |w| <= 128, |a| <= 127), and the lanes of rows 2r and 2r + 1
 * sit side by side in one register, so every result equals vec_dot bit for bit
 * (tests/unit/test_ggml_types.c).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "engine/ggml.h"
#include "cache/arch/x86/ggml_x86.h"

/* Decode kernels ask for the weight rows VQ_PF_ROWS rows ahead into L2 (vq_pf_rows4). */
#ifndef VQ_PF_ROWS
#define VQ_PF_ROWS 16
#endif

static inline const void *row_at(const void *w, size_t stride, int r) {
    return (const uint8_t *)w + (size_t)r * stride;
}

/* Rows 0..3 of a weight matrix whose rows are stride bytes apart. */
static inline void rows4(const uint8_t *x[4], const void *w, size_t stride) {
    for (int r = 0; r < 4; r++) x[r] = row_at(w, stride, r);
}

static inline void store_rows(__m512 acc01, __m512 acc23, const float add[4], float *out) {
    out[0] = hsum256(_mm512_castps512_ps256(acc01)) + add[0];
    out[1] = hsum256(_mm512_extractf32x8_ps(acc01, 1)) + add[1];
    out[2] = hsum256(_mm512_castps512_ps256(acc23)) + add[2];
    out[3] = hsum256(_mm512_extractf32x8_ps(acc23, 1)) + add[3];
}

/* 32-bit words at byte offset off of rows 0..3 as one 128-bit vector (built in registers: four
 * scalar stores and a vector load would stall on store forwarding). */
static inline __m128i gather4_u32(const uint8_t *const x[4], size_t off) {
    uint32_t v[4];
    for (int r = 0; r < 4; r++) memcpy(&v[r], x[r] + off, 4);
    return _mm_set_epi32((int)v[3], (int)v[2], (int)v[1], (int)v[0]);
}

/* The fp16 words at byte offset off of rows 0..3 as 4 floats. */
static inline __m128 half4(const uint8_t *const x[4], size_t off) {
    uint16_t h[4];
    for (int r = 0; r < 4; r++) memcpy(&h[r], x[r] + off, 2);
    return _mm_cvtph_ps(
        _mm_set_epi16(0, 0, 0, 0, (short)h[3], (short)h[2], (short)h[1], (short)h[0]));
}

/* 16 packed bytes of rows r, r + 1 -> [r low | r high | r+1 low | r+1 high] nibbles. */
static inline __m512i nibble_pair(const uint8_t *qa, const uint8_t *qb) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qa));
    v = _mm512_mask_broadcast_i32x4(v, 0xFF00, _mm_loadu_si128((const __m128i *)qb));
    const __m512i hi = _mm512_srli_epi16(v, 4);
    return _mm512_and_si512(_mm512_mask_blend_epi64(0xCC, v, hi), _mm512_set1_epi8(15));
}

/* ---- Q4_1 -------------------------------------------------------------------------------- */

/* The 32 unsigned weights of block i of rows r and r + 1 as [r low | r high | r+1 low |
 * r+1 high] nibbles (128 bits each), the layout the activation block broadcast twice matches. */
static inline __m512i q4_1_pair(const vq_block_q4_1 *a, const vq_block_q4_1 *b) {
    return nibble_pair(a->qs, b->qs);
}

void vq_vec_dotr4_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                      float *out) {
    const uint8_t *x[4];
    rows4(x, w, w_stride);
    const vq_block_q8a *y = a;
    const __m512i lo8 = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hi8 = _mm512_set_epi32(6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 4, 4, 4, 4);
    __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps();
    __m256 summ = _mm256_setzero_ps(); /* odd lanes: the m * s chains of rows 0..3 */
    for (int64_t i = 0; i < n / 32; i++) {
        const size_t off = (size_t)i * sizeof(vq_block_q4_1);
        vq_pf_rows4(w, w_stride, VQ_PF_ROWS, off, sizeof(vq_block_q4_1));
        const vq_block_q4_1 *b[4];
        for (int r = 0; r < 4; r++) b[r] = (const vq_block_q4_1 *)(const void *)(x[r] + off);
        const __m512i act = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m512i p01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q4_1_pair(b[0], b[1]), act);
        const __m512i p23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q4_1_pair(b[2], b[3]), act);
        /* (d, m) of rows 0..3 as floats: lanes 2r = d_r, 2r + 1 = m_r */
        const __m256 dm = _mm256_cvtph_ps(gather4_u32(x, off));
        const __m256 sc = _mm256_mul_ps(dm, _mm256_set1_ps(y[i].d)); /* even lanes d_r * d_a */
        summ = _mm256_fmadd_ps(dm, _mm256_set1_ps(y[i].s), summ);    /* odd: fmaf(m_r, s, .) */
        const __m512 sc512 = _mm512_castps256_ps512(sc);
        acc01 = _mm512_fmadd_ps(_mm512_permutexvar_ps(lo8, sc512), _mm512_cvtepi32_ps(p01), acc01);
        acc23 = _mm512_fmadd_ps(_mm512_permutexvar_ps(hi8, sc512), _mm512_cvtepi32_ps(p23), acc23);
    }
    float s8[8];
    _mm256_storeu_ps(s8, summ);
    const float add[4] = {s8[1], s8[3], s8[5], s8[7]};
    store_rows(acc01, acc23, add, out);
}

/* ---- signed weights: Q4_0, Q5_0, Q8_0 ------------------------------------------------------ */

/* Block i of rows r, r + 1 (signed weights) as |w| and the sign mask: the integer dots with an
 * activation block broadcast twice are |w| x (a with w's sign), as ggml's AVX2 kernel forms
 * them. */
struct q8_pair {
    __m512i aq;
    __mmask64 neg;
};

static inline struct q8_pair s8_pair(__m512i q) {
    const struct q8_pair p = {_mm512_abs_epi8(q), _mm512_movepi8_mask(q)};
    return p;
}

/* Signed weights of block i of rows r, r + 1, 32 bytes per row, for each type. */
static inline __m512i q8_0_pair_w(const void *a, const void *b) {
    const vq_block_q8_0 *x = a, *y = b;
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)x->qs)),
                              _mm256_loadu_si256((const __m256i *)y->qs), 1);
}

static inline __m512i q4_0_pair_w(const void *a, const void *b) {
    const vq_block_q4_0 *x = a, *y = b;
    return _mm512_sub_epi8(nibble_pair(x->qs, y->qs), _mm512_set1_epi8(8));
}

/* Q5_0: bit j of qh is the fifth bit of element j, and elements 0..31 of the two rows are
 * bytes 0..63 of the nibble pair, so the two qh words form the byte mask directly. */
static inline __m512i q5_0_pair_w(const void *a, const void *b) {
    const vq_block_q5_0 *x = a, *y = b;
    uint32_t ha, hb;
    memcpy(&ha, x->qh, 4);
    memcpy(&hb, y->qh, 4);
    const __mmask64 h = _cvtu64_mask64((uint64_t)ha | (uint64_t)hb << 32);
    const __m512i q = nibble_pair(x->qs, y->qs);
    return _mm512_sub_epi8(_mm512_mask_add_epi8(q, h, q, _mm512_set1_epi8(16)),
                           _mm512_set1_epi8(16));
}

static inline __m512i q8_0_pair_dot(struct q8_pair p, __m512i act) {
    const __m512i sa = _mm512_mask_sub_epi8(act, p.neg, _mm512_setzero_si512(), act);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), p.aq, sa);
}

typedef __m512i (*pair_loader)(const void *a, const void *b);

/* Types whose block is a fp16 scale d followed by 32 signed weights (Q4_0, Q5_0, Q8_0; `load`
 * forms the weights of two rows, `bsize` is the block's size): ggml's order as Q8_0's. */
static inline __attribute__((always_inline)) void dot_r4_s8(int64_t n, const void *w,
                                                            size_t w_stride, const void *a,
                                                            float *out, size_t bsize,
                                                            pair_loader load) {
    const uint8_t *x[4];
    rows4(x, w, w_stride);
    const vq_block_q8a *y = a;
    const __m512i lo8 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hi8 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const size_t off = (size_t)i * bsize;
        vq_pf_rows4(w, w_stride, VQ_PF_ROWS, off, bsize);
        const __m512i act = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[i].qs));
        const __m512i p01 = q8_0_pair_dot(s8_pair(load(x[0] + off, x[1] + off)), act);
        const __m512i p23 = q8_0_pair_dot(s8_pair(load(x[2] + off, x[3] + off)), act);
        const __m512 sc = _mm512_castps128_ps512(_mm_mul_ps(half4(x, off), _mm_set1_ps(y[i].d)));
        acc01 = _mm512_fmadd_ps(_mm512_permutexvar_ps(lo8, sc), _mm512_cvtepi32_ps(p01), acc01);
        acc23 = _mm512_fmadd_ps(_mm512_permutexvar_ps(hi8, sc), _mm512_cvtepi32_ps(p23), acc23);
    }
    const float add[4] = {0, 0, 0, 0};
    store_rows(acc01, acc23, add, out);
}

/* ---- 4 weight rows x 4 or 8 activation rows (prefill) -------------------------------------
 * out[t * ld_out + r] = vec_dot(row r, activation row t), bit for bit: per (row, token) the
 * same 8-lane FMA chain and m * s chain as the single-row kernels. nt (4 or 8) is a
 * compile-time constant of each instance; the weight blocks are unpacked once for the nt
 * tokens. */

#define NT_MAX 8

static inline const vq_block_q8a *act_row(const void *a, size_t stride, int t) {
    return (const vq_block_q8a *)(const void *)((const uint8_t *)a + (size_t)t * stride);
}

static inline __attribute__((always_inline)) void store_rows_nt(const __m512 acc[2][NT_MAX],
                                                                const __m256 summ[NT_MAX],
                                                                int has_m, int nt, float *out,
                                                                size_t ld_out) {
    for (int t = 0; t < nt; t++) {
        float add[4] = {0, 0, 0, 0};
        if (has_m) {
            float s8[8];
            _mm256_storeu_ps(s8, summ[t]);
            for (int r = 0; r < 4; r++) add[r] = s8[2 * r + 1];
        }
        store_rows(acc[0][t], acc[1][t], add, out + (size_t)t * ld_out);
    }
}

static inline __attribute__((always_inline)) void dot_r4xn_q4_1(int64_t n, const void *w,
                                                                size_t w_stride, const void *a,
                                                                size_t a_stride, float *out,
                                                                size_t ld_out, int nt) {
    const uint8_t *x[4];
    rows4(x, w, w_stride);
    const vq_block_q8a *y[NT_MAX];
    for (int t = 0; t < nt; t++) y[t] = act_row(a, a_stride, t);
    const __m512i lo8 = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hi8 = _mm512_set_epi32(6, 6, 6, 6, 6, 6, 6, 6, 4, 4, 4, 4, 4, 4, 4, 4);
    __m512 acc[2][NT_MAX];
    __m256 summ[NT_MAX];
    for (int t = 0; t < nt; t++) {
        acc[0][t] = acc[1][t] = _mm512_setzero_ps();
        summ[t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / 32; i++) {
        const size_t off = (size_t)i * sizeof(vq_block_q4_1);
        const vq_block_q4_1 *b[4];
        for (int r = 0; r < 4; r++) b[r] = (const vq_block_q4_1 *)(const void *)(x[r] + off);
        const __m512i w01 = q4_1_pair(b[0], b[1]), w23 = q4_1_pair(b[2], b[3]);
        const __m256 dm = _mm256_cvtph_ps(gather4_u32(x, off));
        const __m512 d01 = _mm512_permutexvar_ps(lo8, _mm512_castps256_ps512(dm));
        const __m512 d23 = _mm512_permutexvar_ps(hi8, _mm512_castps256_ps512(dm));
        for (int t = 0; t < nt; t++) {
            const vq_block_q8a *yb = &y[t][i];
            const __m512i act = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)yb->qs));
            const __m512 da = _mm512_set1_ps(yb->d);
            summ[t] = _mm256_fmadd_ps(dm, _mm256_set1_ps(yb->s), summ[t]);
            const __m512i p01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w01, act);
            const __m512i p23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w23, act);
            acc[0][t] = _mm512_fmadd_ps(_mm512_mul_ps(d01, da), _mm512_cvtepi32_ps(p01), acc[0][t]);
            acc[1][t] = _mm512_fmadd_ps(_mm512_mul_ps(d23, da), _mm512_cvtepi32_ps(p23), acc[1][t]);
        }
    }
    store_rows_nt((const __m512(*)[NT_MAX])acc, summ, 1, nt, out, ld_out);
}

void vq_vec_dotr4x4_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                        size_t a_stride, float *out, size_t ld_out) {
    dot_r4xn_q4_1(n, w, w_stride, a, a_stride, out, ld_out, 4);
}

void vq_vec_dotr4x8_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                        size_t a_stride, float *out, size_t ld_out) {
    dot_r4xn_q4_1(n, w, w_stride, a, a_stride, out, ld_out, 8);
}

static inline __attribute__((always_inline)) void dot_r4xn_s8(int64_t n, const void *w,
                                                              size_t w_stride, const void *a,
                                                              size_t a_stride, float *out,
                                                              size_t ld_out, size_t bsize,
                                                              pair_loader load, int nt) {
    const uint8_t *x[4];
    rows4(x, w, w_stride);
    const vq_block_q8a *y[NT_MAX];
    for (int t = 0; t < nt; t++) y[t] = act_row(a, a_stride, t);
    const __m512i lo8 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hi8 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    __m512 acc[2][NT_MAX];
    __m256 summ[NT_MAX];
    for (int t = 0; t < nt; t++) {
        acc[0][t] = acc[1][t] = _mm512_setzero_ps();
        summ[t] = _mm256_setzero_ps(); /* no m * s chain for these types */
    }
    for (int64_t i = 0; i < n / 32; i++) {
        const size_t off = (size_t)i * bsize;
        const __m128 d = half4(x, off);
        const __m512 d01 = _mm512_permutexvar_ps(lo8, _mm512_castps128_ps512(d));
        const __m512 d23 = _mm512_permutexvar_ps(hi8, _mm512_castps128_ps512(d));
        const struct q8_pair w01 = s8_pair(load(x[0] + off, x[1] + off)),
                             w23 = s8_pair(load(x[2] + off, x[3] + off));
        for (int t = 0; t < nt; t++) {
            const vq_block_q8a *yb = &y[t][i];
            const __m512i act = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)yb->qs));
            const __m512 da = _mm512_set1_ps(yb->d);
            const __m512i p01 = q8_0_pair_dot(w01, act);
            const __m512i p23 = q8_0_pair_dot(w23, act);
            acc[0][t] = _mm512_fmadd_ps(_mm512_mul_ps(d01, da), _mm512_cvtepi32_ps(p01), acc[0][t]);
            acc[1][t] = _mm512_fmadd_ps(_mm512_mul_ps(d23, da), _mm512_cvtepi32_ps(p23), acc[1][t]);
        }
    }
    store_rows_nt((const __m512(*)[NT_MAX])acc, summ, 0, nt, out, ld_out);
}

#define S8_KERNELS(T) \
    void vq_vec_dotr4_##T##_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, \
                                           const void *a, float *out) { \
        dot_r4_s8(n, w, w_stride, a, out, sizeof(vq_block_##T), T##_pair_w); \
    } \
    void vq_vec_dotr4x4_##T##_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, \
                                             const void *a, size_t a_stride, float *out, \
                                             size_t ld_out) { \
        dot_r4xn_s8(n, w, w_stride, a, a_stride, out, ld_out, sizeof(vq_block_##T), T##_pair_w, \
                    4); \
    } \
    void vq_vec_dotr4x8_##T##_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, \
                                             const void *a, size_t a_stride, float *out, \
                                             size_t ld_out) { \
        dot_r4xn_s8(n, w, w_stride, a, a_stride, out, ld_out, sizeof(vq_block_##T), T##_pair_w, \
                    8); \
    }
S8_KERNELS(q4_0)
S8_KERNELS(q5_0)
S8_KERNELS(q8_0)
