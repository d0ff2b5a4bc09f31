/*
 * ggml_avx512vnni.c — AVX-512 VNNI kernels for the weight types with int8 activations (Q4_0,
 * Q4_1, Q5_0, Q8_0): four weight rows against one activation row (decode, ggml.h vec_dot_r4)
 * and against four or eight (prefill, vec_dot_r4x4 / r4x8), two weight rows per 512-bit
 * register; and (Q4_0, Q4_1, Q8_0) 16 weight rows against any number of activation rows
 * (vec_dot_r16: batched decode and prefill), one weight row per 32-bit lane (below).
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

/* ---- 16 weight rows x n activation rows (batched decode and prefill) ----------------------
 * The weights of a tile of 16 rows are repacked once per chunk of R16_CHUNK blocks into a
 * transposed layout: per block i and lane k (elements 4k..4k+3 of the 32), one 512-bit word
 * whose dword r holds row r's four unsigned weight bytes of lane k, plus the 16 rows' scales d
 * (and Q4_1's mins m) as floats. Each activation row then costs, per block, one VPDPBUSD per
 * lane with the activation's 4 bytes broadcast ({1to16}), its conversion and one FMA: the 16
 * dwords are lane k's integer sums of the 16 rows, and one multiply gives the 16 scales
 * d_w x d_a. No per-row shuffles and no per-row scale broadcasts, unlike the two-rows-per-
 * register kernels above, whose per-token cost this halves about.
 *
 * Per row every float operation is vec_dot's: the same 8 lanes of 4 integer products, the
 * same fma(d_w * d_a, lane, acc) chain over blocks, the same hsum order (hsum8_ref, then + the
 * fmaf(m, s, .) chain of Q4_1), so each result equals vec_dot bit for bit whatever the number
 * of tokens. Signed weights (Q4_0: q - 8; Q8_0: q) are stored with an offset o (8; 128, the
 * sign bit flipped) that makes them unsigned, and each lane's integer sum starts at -o x (the
 * sum of the activation's 4 bytes): exact integers (|sum| < 2^17). */

#define R16_CHUNK 32 /* blocks per repack: 1024 columns, 20 KB of repacked weights */

struct r16_block {
    __m512i w[8]; /* w[k] dword r: row r's unsigned weights 4k..4k+3 */
    __m512 d, m;  /* per row: scale, min (Q4_1) */
};

struct r16_acc {
    __m512 a[8]; /* lane k of the 16 rows' fma chains */
    __m512 m;    /* Q4_1: the fmaf(m, s, .) chains */
};

/* The 4 dwords at byte offset off of the blocks of 16 rows, transposed: q[k] dword r = dword k
 * of row r. */
static inline void t16x4(const uint8_t *const x[16], size_t off, __m512i q[4]) {
    __m512i z[4]; /* z[j] dword 4 rr + k: row 4 j + rr, dword k */
    for (int j = 0; j < 4; j++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(x[4 * j] + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(x[4 * j + 1] + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(x[4 * j + 2] + off)), 2);
        z[j] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(x[4 * j + 3] + off)), 3);
    }
    /* [dword 0 | dword 1] and [dword 2 | dword 3] of 8 rows, then the halves of rows 0-7 and
     * 8-15 side by side */
    const __m512i i01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i i23 = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27,
                                          31);
    const __m512i a = _mm512_permutex2var_epi32(z[0], i01, z[1]);
    const __m512i b = _mm512_permutex2var_epi32(z[0], i23, z[1]);
    const __m512i c = _mm512_permutex2var_epi32(z[2], i01, z[3]);
    const __m512i d = _mm512_permutex2var_epi32(z[2], i23, z[3]);
    q[0] = _mm512_shuffle_i64x2(a, c, 0x44);
    q[1] = _mm512_shuffle_i64x2(a, c, 0xEE);
    q[2] = _mm512_shuffle_i64x2(b, d, 0x44);
    q[3] = _mm512_shuffle_i64x2(b, d, 0xEE);
}

/* The 32-bit words at byte offset off of the blocks of 16 rows (dword r: row r's). */
static inline __m512i g16_u32(const uint8_t *const x[16], size_t off) {
    __m512i v = _mm512_castsi128_si512(gather4_u32(x, off));
    v = _mm512_inserti32x4(v, gather4_u32(x + 4, off), 1);
    v = _mm512_inserti32x4(v, gather4_u32(x + 8, off), 2);
    return _mm512_inserti32x4(v, gather4_u32(x + 12, off), 3);
}

/* Packed nibbles (16 bytes per row: low nibbles elements 0..15, high 16..31) -> w[0..7]. */
static inline void r16_nibbles(const __m512i q[4], __m512i w[8]) {
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int k = 0; k < 4; k++) {
        w[k] = _mm512_and_si512(q[k], m4);
        w[k + 4] = _mm512_and_si512(_mm512_srli_epi32(q[k], 4), m4);
    }
}

/* Types of the 16-row kernels: the block layout and the weights' offset. */
enum r16_type { R16_Q4_1, R16_Q4_0, R16_Q8_0 };

static inline __attribute__((always_inline)) size_t r16_bsize(enum r16_type ty) {
    return ty == R16_Q4_1 ? sizeof(vq_block_q4_1)
         : ty == R16_Q4_0 ? sizeof(vq_block_q4_0)
                          : sizeof(vq_block_q8_0);
}

/* Repacks blocks i0 .. i0 + nb - 1 of 16 rows (row r at x[r] = x[0] + r * stride). The next
 * tile's rows (16 .. 31, contiguous as these) are asked into L2 as the repack goes: the bytes
 * at 16 x this block's offset into them, so that their 16 rows are swept once while this
 * tile's are read (the four-row kernels' vq_pf_rows4, for 16 rows). */
static inline __attribute__((always_inline)) void r16_repack(const uint8_t *const x[16],
                                                             size_t stride, int64_t i0, int nb,
                                                             struct r16_block *b,
                                                             enum r16_type ty) {
    const size_t bs = r16_bsize(ty);
    for (int i = 0; i < nb; i++) {
        const size_t off = (size_t)(i0 + i) * bs;
        const uint8_t *pf = x[0] + 16 * stride + 16 * off;
        for (size_t k = 0; k < 16 * bs; k += 64) vq_prefetch_l2(pf + k);
        __m512i q[4];
        /* the fp16 scale (Q4_1: and min) at the block's start */
        const __m512i dm = g16_u32(x, off);
        b[i].d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
        if (ty == R16_Q4_1) {
            b[i].m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
            t16x4(x, off + 4, q);
            r16_nibbles(q, b[i].w);
        } else if (ty == R16_Q4_0) {
            t16x4(x, off + 2, q);
            r16_nibbles(q, b[i].w);
        } else {
            const __m512i s = _mm512_set1_epi8((char)0x80);
            t16x4(x, off + 2, q);
            for (int k = 0; k < 4; k++) b[i].w[k] = _mm512_xor_si512(q[k], s);
            t16x4(x, off + 18, q);
            for (int k = 0; k < 4; k++) b[i].w[k + 4] = _mm512_xor_si512(q[k], s);
        }
    }
}

/* The fma chains of activation row y (pointing at block i0) over the nb repacked blocks, from
 * acc (or zero when first), into acc. One row at a time: its 9 accumulators, the repacked word
 * and the temporaries stay in registers (two rows at a time spill). */
static inline __attribute__((always_inline)) void r16_chains(const struct r16_block *b, int nb,
                                                             const vq_block_q8a *y,
                                                             struct r16_acc *acc, int first,
                                                             enum r16_type ty) {
    __m512 a[8], m;
    for (int k = 0; k < 8; k++) a[k] = first ? _mm512_setzero_ps() : acc->a[k];
    m = first ? _mm512_setzero_ps() : acc->m;
    const int off = ty == R16_Q4_0 ? 8 : ty == R16_Q8_0 ? 128 : 0;
    /* signed weights: -off x the sum of each lane's 4 activation bytes, the integer sums'
     * start, in memory for the broadcast loads (from registers they would cost shuffles) */
    int32_t corr[off ? R16_CHUNK : 1][8] __attribute__((aligned(32)));
    if (off)
        for (int i = 0; i < nb; i++) {
            const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                  _mm256_set1_epi8((char)off),
                                                  _mm256_loadu_si256((const __m256i *)y[i].qs));
            _mm256_store_si256((__m256i *)corr[i], _mm256_sub_epi32(_mm256_setzero_si256(), s));
        }
    for (int i = 0; i < nb; i++) {
        const __m512 p = _mm512_mul_ps(b[i].d, _mm512_set1_ps(y[i].d));
        if (ty == R16_Q4_1) m = _mm512_fmadd_ps(b[i].m, _mm512_set1_ps(y[i].s), m);
        for (int k = 0; k < 8; k++) {
            int32_t av;
            memcpy(&av, y[i].qs + 4 * k, 4);
            const __m512i init = off ? _mm512_set1_epi32(corr[off ? i : 0][k])
                                     : _mm512_setzero_si512();
            const __m512i s = _mm512_dpbusd_epi32(init, b[i].w[k], _mm512_set1_epi32(av));
            a[k] = _mm512_fmadd_ps(p, _mm512_cvtepi32_ps(s), a[k]);
        }
    }
    for (int k = 0; k < 8; k++) acc->a[k] = a[k];
    acc->m = m;
}

/* hsum8_ref of each row's lanes (+ the m * s chain), the 16 rows to out. */
static inline __attribute__((always_inline)) void r16_store(const struct r16_acc *acc, float *out,
                                                            enum r16_type ty) {
    const __m512 *a = acc->a;
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[4], a[0]), _mm512_add_ps(a[6], a[2])),
                             _mm512_add_ps(_mm512_add_ps(a[5], a[1]), _mm512_add_ps(a[7], a[3])));
    if (ty == R16_Q4_1) s = _mm512_add_ps(s, acc->m);
    _mm512_storeu_ps(out, s);
}

static inline __attribute__((always_inline)) void dot_r16(int64_t n, const void *w, size_t w_stride,
                                                          const void *a, size_t a_stride, int n_tok,
                                                          float *const *out, enum r16_type ty) {
    const uint8_t *x[16];
    for (int r = 0; r < 16; r++) x[r] = row_at(w, w_stride, r);
    struct r16_block b[R16_CHUNK];
    struct r16_acc acc[VQ_R16_MAX_TOK];
    const int64_t nb = n / 32;
    for (int64_t i0 = 0; i0 < nb; i0 += R16_CHUNK) {
        const int nc = nb - i0 < R16_CHUNK ? (int)(nb - i0) : R16_CHUNK;
        const int first = i0 == 0, last = i0 + nc == nb;
        r16_repack(x, w_stride, i0, nc, b, ty);
        for (int t = 0; t < n_tok; t++) {
            r16_chains(b, nc, act_row(a, a_stride, t) + i0, &acc[t], first, ty);
            if (last) r16_store(&acc[t], out[t], ty);
        }
    }
}

void vq_vec_dotr16_q4_1_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       size_t a_stride, int n_tok, float *const *out) {
    dot_r16(n, w, w_stride, a, a_stride, n_tok, out, R16_Q4_1);
}

void vq_vec_dotr16_q4_0_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       size_t a_stride, int n_tok, float *const *out) {
    dot_r16(n, w, w_stride, a, a_stride, n_tok, out, R16_Q4_0);
}

void vq_vec_dotr16_q8_0_q8a_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       size_t a_stride, int n_tok, float *const *out) {
    dot_r16(n, w, w_stride, a, a_stride, n_tok, out, R16_Q8_0);
}
