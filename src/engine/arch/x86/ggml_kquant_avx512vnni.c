/*
 * ggml_kquant_avx512vnni.c — AVX-512 VNNI kernels for the K-quants with Q8_K activations
 * (Q4_K, Q6_K): four weight rows against one activation row (decode, ggml.h vec_dot_r4) and
 * against four (prefill, vec_dot_r4x4, the weight blocks unpacked once for the four tokens).
 * Gemma 3's Q4_K_M files hold their attention output and FFN down matrices in these two types.
 *
 * Every result equals its scalar twin bit for bit (tests/unit/test_ggml_types.c): the integer
 * parts are exact whatever the order, and the float steps are those of the twin, lane by lane.
 *   - Q4_K follows the four-row kernel vq_vec_dot4_q4_K_q8_K_ref (ggml's repacked gemm): per
 *     64-element chunk p, acc = fma(isum_p, d_w d_a, acc) and accm = fma(imin_p, dmin_w d_a,
 *     accm); result acc - accm. The 16 (row, token) chains sit in the 16 float lanes.
 *     The decode kernel follows the one-row kernel vq_vec_dot_q4_K_q8_K_ref (ggml's repacked
 *     gemv): one fma per super-block on the super-block's integer totals.
 *   - Q6_K follows vq_vec_dot_q6_K_q8_K_ref (ggml's AVX2 single-row sequence): 8 int32 lanes
 *     per super-block, one fma per super-block into 8 float lanes, hsum256 at the end; two
 *     weight rows per 512-bit register as in ggml_avx512vnni.c.
 * The integer sums of the decode kernels use PMADDUBSW + VPDPWSSD (the scale folded into the
 * pair sums); PMADDUBSW cannot saturate: unsigned codes <= 63 times |a| <= 128, two at a time.
 * docs/ALGORITHMS.md §9.4 describes the lane layouts.
 */
#include <immintrin.h>
#include <string.h>

#include "engine/ggml.h"
#include "cache/arch/x86/ggml_x86.h"
#include "engine/arch/x86/kquant_x86.h"

static inline const uint8_t *row_at(const void *w, size_t stride, int r) {
    return (const uint8_t *)w + (size_t)r * stride;
}

static inline const vq_block_q8_K *act_at(const void *a, size_t stride, int t) {
    return (const vq_block_q8_K *)(const void *)row_at(a, stride, t);
}

/* Four 16-byte pieces (rows or tokens 0..3) as the 128-bit lanes of one register. */
static inline __m512i lanes4(const void *p0, const void *p1, const void *p2, const void *p3) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p2), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p3), 3);
}

/* ---- Q4_K ---------------------------------------------------------------------------------
 * Lane layout: 128-bit lane r holds weight row r; the activation register is rotated by j
 * 128-bit lanes (j = 0..3) so that lane r meets token (r + j) mod 4. After the four-way
 * reduction over the 32-bit words of a lane, word j of lane r is the pair (row r,
 * token (r + j) mod 4), and the 16 float chains run in those lanes. */

/* The 6-bit scales and mins of a Q4_K super-block as bytes sc[0..7], m[0..7] (ggml's
 * utmp unpacking; equal to get_scale_min_k4 for every sub-block). */
static inline __m128i q4_K_scales_mins(const uint8_t *q) {
    uint32_t u[4];
    memcpy(u, q, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    const uint32_t mins_lo = u[1] & k1;
    u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    u[2] = mins_lo;
    u[0] &= k1;
    return _mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]);
}

/* Sum over the four 32-bit words of each 128-bit lane of a[0..3]: word j of lane r of the
 * result is the sum of lane r of a[j]. */
static inline __m512i reduce4x4(const __m512i a[4]) {
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[0], a[1]),
                                         _mm512_unpackhi_epi32(a[0], a[1]));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2], a[3]),
                                         _mm512_unpackhi_epi32(a[2], a[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

/* Rotation j of the 128-bit lanes: lane r of the result is lane (r + j) mod 4 of v. */
#define ROT(v, j) \
    ((j) == 0 ? (v) \
              : _mm512_shuffle_i32x4( \
                    (v), (v), \
                    ((j) | (((j) + 1) & 3) << 2 | (((j) + 2) & 3) << 4 | (((j) + 3) & 3) << 6)))

void vq_vec_dotr4x4_q4_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                         size_t a_stride, float *out, size_t ld_out) {
    const vq_block_q4_K *x[4];
    const vq_block_q8_K *y[4];
    for (int r = 0; r < 4; r++) x[r] = (const vq_block_q4_K *)(const void *)row_at(w, w_stride, r);
    for (int t = 0; t < 4; t++) y[t] = act_at(a, a_stride, t);
    /* word j of lane r -> row r (weight scales), token (r + j) mod 4 (activation values) */
    const __m512i rowsel = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i toksel = _mm512_set_epi32(2, 1, 0, 3, 1, 0, 3, 2, 0, 3, 2, 1, 3, 2, 1, 0);
    /* out lanes: lane (t, r) <- word (t - r) mod 4 of lane r */
    const __m512i unrot = _mm512_set_epi32(12, 9, 6, 3, 15, 8, 5, 2, 14, 11, 4, 1, 13, 10, 7, 0);
    const __m512i m15 = _mm512_set1_epi8(15);
    /* int16 mins m[0..7] of each row from bytes 8..15 of its lane */
    const __m512i mins16 = _mm512_broadcast_i32x4(
        _mm_set_epi8(-128, 15, -128, 14, -128, 13, -128, 12, -128, 11, -128, 10, -128, 9, -128, 8));
    __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        __m512i scm = _mm512_castsi128_si512(q4_K_scales_mins(x[0][i].scales));
        scm = _mm512_inserti32x4(scm, q4_K_scales_mins(x[1][i].scales), 1);
        scm = _mm512_inserti32x4(scm, q4_K_scales_mins(x[2][i].scales), 2);
        scm = _mm512_inserti32x4(scm, q4_K_scales_mins(x[3][i].scales), 3);
        const __m512i mins = _mm512_shuffle_epi8(scm, mins16);
        /* block sums per 32-element sub-block of each token: int16 pairs (BS[2p], BS[2p+1]) */
        __m128i bs[4];
        float yd[4];
        for (int t = 0; t < 4; t++) {
            bs[t] = q8_K_pair_sums(&y[t][i]);
            yd[t] = y[t][i].d;
        }
        __m512i bsv = _mm512_castsi128_si512(bs[0]);
        bsv = _mm512_inserti32x4(bsv, bs[1], 1);
        bsv = _mm512_inserti32x4(bsv, bs[2], 2);
        bsv = _mm512_inserti32x4(bsv, bs[3], 3);
        uint16_t dh[8];
        for (int r = 0; r < 4; r++) {
            memcpy(&dh[r], &x[r][i].d, 2);
            memcpy(&dh[4 + r], &x[r][i].dmin, 2);
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
        const __m512 ya = _mm512_permutexvar_ps(toksel, _mm512_castps128_ps512(_mm_loadu_ps(yd)));
        const __m512 d = _mm512_mul_ps(_mm512_permutexvar_ps(rowsel, _mm512_castps256_ps512(dw)),
                                       ya);
        const __m512i rowsel_m = _mm512_add_epi32(rowsel, _mm512_set1_epi32(4));
        const __m512 dm = _mm512_mul_ps(_mm512_permutexvar_ps(rowsel_m, _mm512_castps256_ps512(dw)),
                                        ya);
        for (int p = 0; p < 4; p++) {
            __m512i isum = _mm512_setzero_si512();
            for (int nib = 0; nib < 2; nib++) {
                const int s = 2 * p + nib;
                __m512i part[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(),
                                   _mm512_setzero_si512(), _mm512_setzero_si512()};
                for (int h = 0; h < 2; h++) {
                    const size_t wo = 32 * (size_t)p + 16 * (size_t)h;
                    __m512i q = lanes4(x[0][i].qs + wo, x[1][i].qs + wo, x[2][i].qs + wo,
                                       x[3][i].qs + wo);
                    q = _mm512_and_si512(nib ? _mm512_srli_epi16(q, 4) : q, m15);
                    const size_t ao = 32 * (size_t)s + 16 * (size_t)h;
                    const __m512i v = lanes4(y[0][i].qs + ao, y[1][i].qs + ao, y[2][i].qs + ao,
                                             y[3][i].qs + ao);
                    part[0] = _mm512_dpbusd_epi32(part[0], q, v);
                    part[1] = _mm512_dpbusd_epi32(part[1], q, ROT(v, 1));
                    part[2] = _mm512_dpbusd_epi32(part[2], q, ROT(v, 2));
                    part[3] = _mm512_dpbusd_epi32(part[3], q, ROT(v, 3));
                }
                /* scale of sub-block s of row r, zero-extended into every word of lane r */
                const __m512i sc = _mm512_shuffle_epi8(
                    scm, _mm512_set1_epi32((int)(0x80808000u | (uint32_t)s)));
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(reduce4x4(part), sc));
            }
            /* (m[2p], m[2p+1]) of row r times (BS[2p], BS[2p+1]) of token (r + j) mod 4 */
            const __m512i pv = _mm512_set1_epi32(p);
            const __m512i imin = _mm512_madd_epi16(
                _mm512_permutexvar_epi32(_mm512_add_epi32(_mm512_slli_epi32(rowsel, 2), pv), mins),
                _mm512_permutexvar_epi32(_mm512_add_epi32(_mm512_slli_epi32(toksel, 2), pv), bsv));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc);
            accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), dm, accm);
        }
    }
    const __m512 o = _mm512_permutexvar_ps(unrot, _mm512_sub_ps(acc, accm));
    _mm_storeu_ps(out, _mm512_castps512_ps128(o));
    _mm_storeu_ps(out + ld_out, _mm512_extractf32x4_ps(o, 1));
    _mm_storeu_ps(out + 2 * ld_out, _mm512_extractf32x4_ps(o, 2));
    _mm_storeu_ps(out + 3 * ld_out, _mm512_extractf32x4_ps(o, 3));
}

/* ---- Q6_K ---------------------------------------------------------------------------------
 * Rows 2q and 2q + 1 in the two 256-bit halves; per (half, token) the 8 int32 lanes of ggml's
 * AVX2 kernel. */

/* 32 bytes of row a and of row b (byte offset off in their blocks) as one register. */
static inline __m512i halves(const uint8_t *a, const uint8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

void vq_vec_dotr4x4_q6_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                         size_t a_stride, float *out, size_t ld_out) {
    const vq_block_q6_K *x[4];
    const vq_block_q8_K *y[4];
    for (int r = 0; r < 4; r++) x[r] = (const vq_block_q6_K *)(const void *)row_at(w, w_stride, r);
    for (int t = 0; t < 4; t++) y[t] = act_at(a, a_stride, t);
    const __m512i m3 = _mm512_set1_epi8(3), m15 = _mm512_set1_epi8(15);
    /* int16 word index of scale k of row a (lane 0, words 0..15) and row b (16..31) */
    const __m512i scsel = _mm512_set_epi16(17, 17, 17, 17, 17, 17, 17, 17, 16, 16, 16, 16, 16, 16,
                                           16, 16, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[2][4];
    for (int q = 0; q < 2; q++)
        for (int t = 0; t < 4; t++) acc[q][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        for (int q = 0; q < 2; q++) {
            const vq_block_q6_K *xa = &x[2 * q][i], *xb = &x[2 * q + 1][i];
            const __m512i scw = _mm512_inserti64x4(
                _mm512_castsi256_si512(
                    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)xa->scales))),
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)xb->scales)), 1);
            __m512i sumi[4];
            for (int t = 0; t < 4; t++) {
                const __m512i b = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)y[t][i].bsums));
                sumi[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                           _mm512_slli_epi32(_mm512_madd_epi16(b, scw), 5));
            }
            for (int h = 0; h < 2; h++) {
                const __m512i ql0 = halves(xa->ql + 64 * h, xb->ql + 64 * h);
                const __m512i ql1 = halves(xa->ql + 64 * h + 32, xb->ql + 64 * h + 32);
                const __m512i qh = halves(xa->qh + 32 * h, xb->qh + 32 * h);
                for (int g = 0; g < 4; g++) {
                    const __m512i ql = (g & 1) ? ql1 : ql0;
                    const __m512i low4 = _mm512_and_si512(g < 2 ? ql : _mm512_srli_epi16(ql, 4),
                                                          m15);
                    const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi16(qh, 2 * g), m3);
                    const __m512i qv = _mm512_or_si512(low4, _mm512_slli_epi16(hi2, 4));
                    const int e0 = 128 * h + 32 * g;
                    const __m512i sc = _mm512_permutexvar_epi16(
                        _mm512_add_epi16(scsel, _mm512_set1_epi16((short)(e0 / 16))), scw);
                    for (int t = 0; t < 4; t++) {
                        const __m512i av = _mm512_broadcast_i64x4(
                            _mm256_loadu_si256((const __m256i *)(y[t][i].qs + e0)));
                        sumi[t] = _mm512_add_epi32(
                            sumi[t], _mm512_madd_epi16(sc, _mm512_maddubs_epi16(qv, av)));
                    }
                }
            }
            const __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(xa->d)),
                                                 _mm256_set1_ps(_cvtsh_ss(xb->d)), 1);
            for (int t = 0; t < 4; t++)
                acc[q][t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(y[t][i].d), dw),
                                            _mm512_cvtepi32_ps(sumi[t]), acc[q][t]);
        }
    }
    for (int t = 0; t < 4; t++)
        for (int q = 0; q < 2; q++) {
            out[(size_t)t * ld_out + 2 * q] = hsum256(_mm512_castps512_ps256(acc[q][t]));
            out[(size_t)t * ld_out + 2 * q + 1] = hsum256(_mm512_extractf32x8_ps(acc[q][t], 1));
        }
}

/* ---- decode: four weight rows x one activation row ------------------------------------- */

/* Weight rows ahead that the decode kernels ask for into L2 (vq_pf_rows4). */
#ifndef VQ_PF_KROWS
#define VQ_PF_KROWS 8
#endif

/* Zero-extended word selector for PSHUFB: byte lo into the words of the low 256 bits, byte hi
 * into those of the high 256 bits (a register whose 128-bit lanes hold the same 16 bytes). */
static inline __m512i word_sel(int lo, int hi) {
    return _mm512_inserti64x4(_mm512_set1_epi16((short)(0x8000 | lo)),
                              _mm256_set1_epi16((short)(0x8000 | hi)), 1);
}

/* Q4_K: row r's codes in 64-byte pieces (chunks 2c and 2c + 1); the low nibbles of piece c are
 * sub-blocks 4c and 4c + 2, the high nibbles 4c + 1 and 4c + 3, against activation registers
 * rearranged once per super-block for the four rows. The exact totals isum_r = sum of
 * scale x (q . a) and imin_r = sum of min x block-pair sum go through one fma each per
 * super-block, interleaved (isum_0, imin_0, isum_1, ...) against (d_0 d_a, dmin_0 d_a, ...). */
void vq_vec_dotr4_q4_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       float *out) {
    const vq_block_q4_K *x[4];
    for (int r = 0; r < 4; r++) x[r] = (const vq_block_q4_K *)(const void *)row_at(w, w_stride, r);
    const vq_block_q8_K *y = a;
    const __m512i m15 = _mm512_set1_epi8(15);
    const __m512i sel[4] = {word_sel(0, 2), word_sel(1, 3), word_sel(4, 6), word_sel(5, 7)};
    const __m512i mins16 = _mm512_broadcast_i32x4(
        _mm_set_epi8(-128, 15, -128, 14, -128, 13, -128, 12, -128, 11, -128, 10, -128, 9, -128, 8));
    const __m512i lane0 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        vq_pf_rows4(w, w_stride, VQ_PF_KROWS, (size_t)i * sizeof(vq_block_q4_K),
                    sizeof(vq_block_q4_K));
        /* activations of sub-blocks (0, 2), (1, 3), (4, 6), (5, 7) */
        __m512i av[4];
        for (int c = 0; c < 2; c++) {
            const __m512i y0 = _mm512_loadu_si512(y[i].qs + 128 * c);
            const __m512i y1 = _mm512_loadu_si512(y[i].qs + 128 * c + 64);
            av[2 * c] = _mm512_shuffle_i64x2(y0, y1, 0x44);
            av[2 * c + 1] = _mm512_shuffle_i64x2(y0, y1, 0xEE);
        }
        __m512i scm = _mm512_castsi128_si512(q4_K_scales_mins(x[0][i].scales));
        scm = _mm512_inserti32x4(scm, q4_K_scales_mins(x[1][i].scales), 1);
        scm = _mm512_inserti32x4(scm, q4_K_scales_mins(x[2][i].scales), 2);
        scm = _mm512_inserti32x4(scm, q4_K_scales_mins(x[3][i].scales), 3);
        /* row r's scales and mins in every 128-bit lane */
        const __m512i scr[4] = {
            _mm512_shuffle_i32x4(scm, scm, 0x00), _mm512_shuffle_i32x4(scm, scm, 0x55),
            _mm512_shuffle_i32x4(scm, scm, 0xAA), _mm512_shuffle_i32x4(scm, scm, 0xFF)};
        __m512i isum[4];
        for (int r = 0; r < 4; r++) {
            const __m512i sc = scr[r];
            __m512i s = _mm512_setzero_si512();
            for (int c = 0; c < 2; c++) {
                const __m512i raw = _mm512_loadu_si512(x[r][i].qs + 64 * c);
                const __m512i lo = _mm512_and_si512(raw, m15);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m15);
                s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(lo, av[2 * c]),
                                        _mm512_shuffle_epi8(sc, sel[2 * c]));
                s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(hi, av[2 * c + 1]),
                                        _mm512_shuffle_epi8(sc, sel[2 * c + 1]));
            }
            isum[r] = s;
        }
        /* word r of lane 0: isum_r */
        __m512i t = reduce4x4(isum);
        t = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, 0x4E));
        t = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, 0xB1));
        /* block-pair sums BS[sb] = bsums[2 sb] + bsums[2 sb + 1] against the mins of row r
         * (lane r), summed within the lane, word 0 of lane r to word r of lane 0 */
        __m512i m = _mm512_madd_epi16(_mm512_shuffle_epi8(scm, mins16),
                                      _mm512_broadcast_i32x4(q8_K_pair_sums(&y[i])));
        m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, _MM_PERM_BADC));
        m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, _MM_PERM_CDAB));
        m = _mm512_permutexvar_epi32(lane0, m);
        const __m128i is = _mm512_castsi512_si128(t), im = _mm512_castsi512_si128(m);
        const __m256i ints = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_unpacklo_epi32(is, im)), _mm_unpackhi_epi32(is, im), 1);
        uint32_t dd[4];
        for (int r = 0; r < 4; r++) memcpy(&dd[r], &x[r][i].d, 4); /* d, dmin */
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dd));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints), _mm256_mul_ps(dw, _mm256_set1_ps(y[i].d)),
                              acc);
    }
    float f[8];
    _mm256_storeu_ps(f, acc);
    for (int r = 0; r < 4; r++) out[r] = f[2 * r] - f[2 * r + 1];
}

/* Q6_K: row r's 64-element chunk m (m = 0..3: ql bytes 64 (m / 2).., low nibbles for even m,
 * high for odd; qh bytes 32 (m / 2).., bits 4 (m & 1) + 0..3) in one register, whose 128-bit
 * lane j has scale 4m + j; the 16 int32 lanes fold to ggml's 8 (lane k + lane k + 8) per
 * super-block, rows 2q and 2q + 1 side by side for the float steps. */
void vq_vec_dotr4_q6_K_q8_K_avx512vnni(int64_t n, const void *w, size_t w_stride, const void *a,
                                       float *out) {
    const vq_block_q6_K *x[4];
    for (int r = 0; r < 4; r++) x[r] = (const vq_block_q6_K *)(const void *)row_at(w, w_stride, r);
    const vq_block_q8_K *y = a;
    const __m512i m3 = _mm512_set1_epi8(3), m15 = _mm512_set1_epi8(15);
    /* word index 4m + j in 128-bit lane j: the scales of chunk m (lane0 + 4m) */
    const __m512i lane0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
                                           1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}; /* rows 0, 1 | rows 2, 3 */
    for (int64_t i = 0; i < n / VQ_QK_K; i++) {
        vq_pf_rows4(w, w_stride, VQ_PF_KROWS, (size_t)i * sizeof(vq_block_q6_K),
                    sizeof(vq_block_q6_K));
        __m512i av[4];
        for (int m = 0; m < 4; m++) av[m] = _mm512_loadu_si512(y[i].qs + 64 * m);
        const __m512i bsums = _mm512_broadcast_i64x4(
            _mm256_loadu_si256((const __m256i *)y[i].bsums));
        __m512i sumi[4];
        __m256i scw[4];
        for (int r = 0; r < 4; r++) {
            const vq_block_q6_K *b = &x[r][i];
            scw[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
            const __m512i sc = _mm512_castsi256_si512(scw[r]);
            __m512i s = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++) {
                const __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
                const __m512i qh0 = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
                /* low 256 bits: groups 0 / 2 (qh bits 0-1 / 4-5), high: 1 / 3 (2-3 / 6-7) */
                const __m512i qh = _mm512_mask_blend_epi64(0xF0, qh0, _mm512_srli_epi16(qh0, 2));
                for (int odd = 0; odd < 2; odd++) {
                    const int m = 2 * h + odd;
                    const __m512i low4 = _mm512_and_si512(odd ? _mm512_srli_epi16(ql, 4) : ql, m15);
                    const __m512i hi2 = _mm512_and_si512(odd ? _mm512_srli_epi16(qh, 4) : qh, m3);
                    const __m512i q = _mm512_or_si512(low4, _mm512_slli_epi16(hi2, 4));
                    s = _mm512_dpwssd_epi32(
                        s, _mm512_maddubs_epi16(q, av[m]),
                        _mm512_permutexvar_epi16(
                            _mm512_add_epi16(lane0, _mm512_set1_epi16((short)(4 * m))), sc));
                }
            }
            sumi[r] = s;
        }
        float dh[4];
        for (int r = 0; r < 4; r++) dh[r] = y[i].d * _cvtsh_ss(x[r][i].d);
        for (int q = 0; q < 2; q++) {
            const __m512i s0 = sumi[2 * q], s1 = sumi[2 * q + 1];
            const __m512i fold = _mm512_add_epi32(_mm512_shuffle_i64x2(s0, s1, 0x44),
                                                  _mm512_shuffle_i64x2(s0, s1, 0xEE));
            const __m512i scq = _mm512_inserti64x4(_mm512_castsi256_si512(scw[2 * q]),
                                                   scw[2 * q + 1], 1);
            const __m512i lanes = _mm512_sub_epi32(
                fold, _mm512_slli_epi32(_mm512_madd_epi16(bsums, scq), 5));
            const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(dh[2 * q]),
                                                _mm256_set1_ps(dh[2 * q + 1]), 1);
            acc[q] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[q]);
        }
    }
    for (int q = 0; q < 2; q++) {
        out[2 * q] = hsum256(_mm512_castps512_ps256(acc[q]));
        out[2 * q + 1] = hsum256(_mm512_extractf32x8_ps(acc[q], 1));
    }
}

/* ---- Q4_K repacked in 16-row groups (ggml.h, "repacked weights") --------------------------
 * The 16 rows sit in the 16 int32 / float lanes: one 64-byte load holds 4 code bytes of every
 * row, VPDPBUSD against the 4 matching activation bytes broadcast gives each row's partial dot
 * in its lane, so no lane shuffles or reductions are needed. Per 32-element sub-block the dot
 * is multiplied by the row's 6-bit scale (VPMULLD), per 64-element chunk p the two sub-blocks'
 * products give isum_p and the mins x block-pair sums imin_p (VPMADDWD); then the float chains
 * of vq_vec_dot4_q4_K_q8_K_ref (gemm: one fma per chunk) or vq_vec_dot_q4_K_q8_K_ref (gemv:
 * one per super-block on the totals), per (row, token) lane: the same integers, the same
 * floats, the same order. T tokens share each decoded weight vector. */
static inline __attribute__((always_inline)) void x16_q4_K(int64_t n, const uint8_t *w,
                                                           const uint8_t *a, size_t a_stride,
                                                           const int T, const int gemm, float *out,
                                                           size_t ld_out) {
    const size_t pf = vq_cpu_stream_prefetch(); /* kquant_x86.h, pf_x16 */
    const __m512i m15 = _mm512_set1_epi8(15);
    const __m512i k1 = _mm512_set1_epi32(0x3f3f3f3f), k2 = _mm512_set1_epi32(0x0f0f0f0f),
                  k3 = _mm512_set1_epi32(0x03030303);
    /* PSHUFB selectors (indices within a 128-bit lane, so each word adds its offset 4 j):
     * byte b of each 32-bit word zero-extended, and the int16 pairs (byte 0, byte 1),
     * (byte 2, byte 3) of each word */
    const __m512i off = _mm512_set_epi32(12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0, 12, 8, 4, 0);
    const __m512i off2 = _mm512_or_si512(off, _mm512_slli_epi32(off, 16));
    __m512i bsel[4];
    for (int b = 0; b < 4; b++)
        bsel[b] = _mm512_add_epi32(off, _mm512_set1_epi32((int)(0x80808000u | (unsigned)b)));
    const __m512i psel[2] = {_mm512_add_epi32(off2, _mm512_set1_epi32((int)0x80018000u)),
                             _mm512_add_epi32(off2, _mm512_set1_epi32((int)0x80038002u))};
    __m512 acc[8], accm[8];
    for (int t = 0; t < T; t++) acc[t] = accm[t] = _mm512_setzero_ps();
    const int64_t nb = n / VQ_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *g = w + (size_t)i * (VQ_X16_ROWS * sizeof(vq_block_q4_K));
        for (int l = 0; l < 4; l++) /* d, dmin, scales */
            pf_x16(pf, g + 64 * l);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + 32)));
        /* ggml's utmp unpacking, one row per lane: sc0..3, sc4..7, m0..3, m4..7 */
        const __m512i u0 = _mm512_loadu_si512(g + 64), u1 = _mm512_loadu_si512(g + 128),
                      u2 = _mm512_loadu_si512(g + 192);
        const __m512i sc03 = _mm512_and_si512(u0, k1);
        const __m512i sc47 = _mm512_or_si512(
            _mm512_and_si512(u2, k2),
            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), k3), 4));
        const __m512i m03 = _mm512_and_si512(u1, k1);
        const __m512i m47 = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi32(u2, 4), k2),
            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), k3), 4));
        const vq_block_q8_K *y[8];
        int32_t bsp[8][4]; /* token t: (BS[2p], BS[2p+1]) as int16 pairs */
        for (int t = 0; t < T; t++) {
            y[t] = (const vq_block_q8_K *)(const void *)(a + (size_t)t * a_stride +
                                                         (size_t)i * sizeof(vq_block_q8_K));
            _mm_storeu_si128((__m128i *)bsp[t], q8_K_pair_sums(y[t]));
        }
        __m512i itot[8], mtot[8];
        for (int t = 0; t < T; t++) itot[t] = mtot[t] = _mm512_setzero_si512();
        const uint8_t *q = g + 256;
        for (int p = 0; p < 4; p++) {
            __m512i lo[8], hi[8];
            for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm512_setzero_si512();
            for (int l = 0; l < 8; l++) pf_x16(pf, q + 512 * p + 64 * l);
            for (int k = 0; k < 8; k++) {
                const __m512i raw = _mm512_loadu_si512(q + 64 * (8 * p + k));
                const __m512i wl = _mm512_and_si512(raw, m15);
                const __m512i wh = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m15);
                for (int t = 0; t < T; t++) {
                    int32_t al, ah;
                    memcpy(&al, y[t]->qs + 64 * p + 4 * k, 4);
                    memcpy(&ah, y[t]->qs + 64 * p + 32 + 4 * k, 4);
                    lo[t] = _mm512_dpbusd_epi32(lo[t], wl, _mm512_set1_epi32(al));
                    hi[t] = _mm512_dpbusd_epi32(hi[t], wh, _mm512_set1_epi32(ah));
                }
            }
            const __m512i scs = p < 2 ? sc03 : sc47, ms = p < 2 ? m03 : m47;
            const __m512i sl = _mm512_shuffle_epi8(scs, bsel[2 * (p & 1)]);
            const __m512i sh = _mm512_shuffle_epi8(scs, bsel[2 * (p & 1) + 1]);
            const __m512i mp = _mm512_shuffle_epi8(ms, psel[p & 1]);
            for (int t = 0; t < T; t++) {
                const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(lo[t], sl),
                                                      _mm512_mullo_epi32(hi[t], sh));
                const __m512i imin = _mm512_madd_epi16(mp, _mm512_set1_epi32(bsp[t][p]));
                if (gemm) {
                    const __m512 ya = _mm512_set1_ps(y[t]->d);
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, ya),
                                             acc[t]);
                    accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dmin, ya),
                                              accm[t]);
                } else {
                    itot[t] = _mm512_add_epi32(itot[t], isum);
                    mtot[t] = _mm512_add_epi32(mtot[t], imin);
                }
            }
        }
        if (!gemm)
            for (int t = 0; t < T; t++) {
                const __m512 ya = _mm512_set1_ps(y[t]->d);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(itot[t]), _mm512_mul_ps(d, ya), acc[t]);
                accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mtot[t]), _mm512_mul_ps(dmin, ya),
                                          accm[t]);
            }
    }
    for (int t = 0; t < T; t++)
        _mm512_storeu_ps(out + (size_t)t * ld_out, _mm512_sub_ps(acc[t], accm[t]));
}

void vq_vec_dot_x16_q4_K_q8_K_avx512vnni(int64_t n, const void *w, const void *a, size_t a_stride,
                                         int n_tok, int gemm, float *out, size_t ld_out) {
    const uint8_t *wb = w, *ab = a;
    if (gemm) {
        if (n_tok == 8) x16_q4_K(n, wb, ab, a_stride, 8, 1, out, ld_out);
        else x16_q4_K(n, wb, ab, a_stride, 4, 1, out, ld_out);
        return;
    }
    for (int t = 0; t < n_tok; t += 4) {
        const uint8_t *at = ab + (size_t)t * a_stride;
        float *o = out + (size_t)t * ld_out;
        switch (n_tok - t < 4 ? n_tok - t : 4) {
        case 1: x16_q4_K(n, wb, at, a_stride, 1, 0, o, ld_out); break;
        case 2: x16_q4_K(n, wb, at, a_stride, 2, 0, o, ld_out); break;
        case 3: x16_q4_K(n, wb, at, a_stride, 3, 0, o, ld_out); break;
        default: x16_q4_K(n, wb, at, a_stride, 4, 0, o, ld_out); break;
        }
    }
}

/* ---- Q6_K repacked in 16-row groups --------------------------------------------------------
 * Rows in the 16 lanes as for Q4_K. ggml's AVX2 order keeps 8 int32 lanes k per super-block,
 * lane k holding elements e with (e mod 32) / 4 == k: here lane k of a row is one vector
 * (word k of the layout's 64-byte pieces), summed over the 8 groups of 32 elements with
 * PMADDUBSW (6-bit codes x int8, pair sums <= 2 x 63 x 128: no saturation) and VPDPWSSD by
 * the row's scale of that group's half (both int16 halves of the word); it starts at
 * -32 x (sc[2k] x bsums[2k] + sc[2k+1] x bsums[2k+1]) as in ggml, then one fma per
 * super-block into float lane k and hsum8's order at the end. */
static inline __attribute__((always_inline)) void x16_q6_K(int64_t n, const uint8_t *w,
                                                           const uint8_t *a, size_t a_stride,
                                                           const int T, float *out, size_t ld_out) {
    const size_t pf = vq_cpu_stream_prefetch(); /* kquant_x86.h, pf_x16 */
    const __m512i m15 = _mm512_set1_epi8(15), m48 = _mm512_set1_epi8(48);
    /* PSHUFB selector of a 16-byte row of scales broadcast to the four 128-bit lanes: dword w
     * of lane L gets row 4 L + w's byte into the high byte of both its int16 halves, which an
     * arithmetic shift by 8 then sign-extends */
    int32_t dv[16];
    for (int r = 0; r < 16; r++) dv[r] = (int32_t)(0x00800080u | (unsigned)r * 0x01000100u);
    const __m512i dup = _mm512_loadu_si512(dv);
    __m512 acc[8][8]; /* [token][lane k] */
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 8; k++) acc[t][k] = _mm512_setzero_ps();
    const int64_t nb = n / VQ_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *g = w + (size_t)i * (VQ_X16_ROWS * sizeof(vq_block_q6_K));
        for (int l = 0; l < 5; l++) /* d and scales */
            pf_x16(pf, g + 64 * l);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g));
        /* sd[j]: scale j of each row in both int16 halves of its word */
        __m512i sd[16];
        for (int j = 0; j < 16; j++)
            sd[j] = _mm512_srai_epi16(
                _mm512_shuffle_epi8(
                    _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(g + 32 + 16 * j))),
                    dup),
                8);
        const vq_block_q8_K *y[8];
        __m512 dd[8];
        for (int t = 0; t < T; t++) {
            y[t] = (const vq_block_q8_K *)(const void *)(a + (size_t)t * a_stride +
                                                         (size_t)i * sizeof(vq_block_q8_K));
            dd[t] = _mm512_mul_ps(_mm512_set1_ps(y[t]->d), dw);
        }
        for (int k = 0; k < 8; k++) {
            const uint8_t *wk = g + 288 + 384 * k; /* ql (h 0), ql (h 0, +32), qh (h 0), h 1 */
            for (int l = 0; l < 6; l++) pf_x16(pf, wk + 64 * l);
            /* (sc[2k], sc[2k+1]) of each row against the pair (bsums[2k], bsums[2k+1]) */
            const __m512i sp = _mm512_mask_blend_epi16(0xAAAAAAAAu, sd[2 * k], sd[2 * k + 1]);
            __m512i s[8];
            for (int t = 0; t < T; t++) {
                int32_t bp;
                memcpy(&bp, y[t]->bsums + 2 * k, 4);
                s[t] = _mm512_sub_epi32(
                    _mm512_setzero_si512(),
                    _mm512_slli_epi32(_mm512_madd_epi16(sp, _mm512_set1_epi32(bp)), 5));
            }
            for (int h = 0; h < 2; h++) {
                const __m512i qhv = _mm512_loadu_si512(wk + 64 * (3 * h + 2));
                for (int hs = 0; hs < 2; hs++) {
                    const __m512i qlv = _mm512_loadu_si512(wk + 64 * (3 * h + hs));
                    for (int up = 0; up < 2; up++) {
                        const int gg = hs + 2 * up; /* group within the 128-element half */
                        const int gp = 4 * h + gg;  /* group of 32 in the super-block */
                        /* the code: bits 0-3 from ql (its low or high nibble), bits 4-5
                         * the 2 bits of qh at 2 gg, moved there (one bitwise select) */
                        const __m512i low = up ? _mm512_srli_epi16(qlv, 4) : qlv;
                        const __m512i hib = gg == 0 ? _mm512_slli_epi16(qhv, 4)
                                          : gg == 1 ? _mm512_slli_epi16(qhv, 2)
                                          : gg == 2 ? qhv
                                                    : _mm512_srli_epi16(qhv, 2);
                        const __m512i q = _mm512_ternarylogic_epi32(
                            m15, low, _mm512_and_si512(hib, m48), 0xCA);
                        const __m512i sc = sd[2 * gp + (k >= 4)];
                        for (int t = 0; t < T; t++) {
                            int32_t av;
                            memcpy(&av, y[t]->qs + 32 * gp + 4 * k, 4);
                            s[t] = _mm512_dpwssd_epi32(
                                s[t], _mm512_maddubs_epi16(q, _mm512_set1_epi32(av)), sc);
                        }
                    }
                }
            }
            for (int t = 0; t < T; t++)
                acc[t][k] = _mm512_fmadd_ps(dd[t], _mm512_cvtepi32_ps(s[t]), acc[t][k]);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m512 *c = acc[t];
        const __m512 r = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(c[4], c[0]), _mm512_add_ps(c[6], c[2])),
            _mm512_add_ps(_mm512_add_ps(c[5], c[1]), _mm512_add_ps(c[7], c[3])));
        _mm512_storeu_ps(out + (size_t)t * ld_out, r);
    }
}

void vq_vec_dot_x16_q6_K_q8_K_avx512vnni(int64_t n, const void *w, const void *a, size_t a_stride,
                                         int n_tok, int gemm, float *out, size_t ld_out) {
    (void)gemm; /* one order */
    const uint8_t *wb = w, *ab = a;
    for (int t = 0; t < n_tok; t += 4) {
        const uint8_t *at = ab + (size_t)t * a_stride;
        float *o = out + (size_t)t * ld_out;
        switch (n_tok - t < 4 ? n_tok - t : 4) {
        case 1: x16_q6_K(n, wb, at, a_stride, 1, o, ld_out); break;
        case 2: x16_q6_K(n, wb, at, a_stride, 2, o, ld_out); break;
        case 3: x16_q6_K(n, wb, at, a_stride, 3, o, ld_out); break;
        default: x16_q6_K(n, wb, at, a_stride, 4, o, ld_out); break;
        }
    }
}
