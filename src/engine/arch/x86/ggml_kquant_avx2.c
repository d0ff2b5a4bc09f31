/*
 * ggml_kquant_avx2.c — AVX2 kernels for Q4_K / Q6_K weights repacked in 16-row groups
 * (ggml.h, "repacked weights"; docs/ALGORITHMS.md §9.19), for CPUs without AVX-512 VNNI (AMD
 * Zen 2 / 3, Intel client cores, Zen 4 where a hypervisor hides AVX-512).
 *
 * The layout is the one the VNNI kernels read: a 64-byte vector of codes holds 4 code bytes of
 * each of the 16 rows. Here it is two 256-bit halves, rows 0..7 and rows 8..15, each row's
 * 4 bytes in its own 32-bit lane; PMADDUBSW against the 4 matching activation bytes broadcast
 * leaves the row's two pair sums in the two int16 halves of its lane, and PMADDWD by the
 * row's scale (in both int16 halves) turns them into the row's scaled int32 sum. Nothing is
 * rotated or reduced across lanes.
 *
 * Every result equals the scalar row kernels bit for bit (tests/unit/test_ggml_types.c): the
 * integers are exact whatever the order, and the float steps are those of the VNNI kernels,
 * per (row, token) lane: Q4_K one fma per 64-element chunk in the gemm order and one per
 * super-block in the gemv order; Q6_K one fma per super-block into each of ggml's 8 lanes k,
 * hsum8's order at the end.
 *
 * No saturation: Q4_K's codes are <= 15 and activations >= -128, so a PMADDUBSW pair sum is at
 * most 3840 in magnitude and the 8 of a 32-element sub-block add up to at most 30720 in int16;
 * Q6_K's codes are <= 63 (pair sums <= 16128), each taken to int32 at once.
 */
#include <immintrin.h>
#include <string.h>

#include "engine/ggml.h"
#include "engine/arch/x86/kquant_x86.h"

static inline __attribute__((always_inline)) __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The int16 PMADDUBSW pair sums of one nibble of the 8 code vectors at qp (64 bytes apart),
 * halves h0 .. h0 + NH - 1 (32 bytes each), against the 4-byte activation groups at
 * y[t]->qs + ao + 4 k, for T tokens: s16[h][t]. One broadcast of an activation group serves
 * both halves. The pointer goes through an empty asm so that the compiler reloads the codes
 * for the second nibble instead of keeping all 8 vectors alive (which spilled them). */
static inline __attribute__((always_inline)) void q4_K_nibble(const uint8_t *qp,
                                                              const vq_block_q8_K *const y[8],
                                                              int ao, const int hi, const int T,
                                                              const int h0, const int NH,
                                                              __m256i s16[2][8]) {
    const __m256i m15 = _mm256_set1_epi8(15);
    __asm__("" : "+r"(qp));
    for (int h = h0; h < h0 + NH; h++)
        for (int t = 0; t < T; t++) s16[h][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        __m256i wq[2];
        for (int h = h0; h < h0 + NH; h++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(qp + 64 * k + 32 * h));
            wq[h] = _mm256_and_si256(hi ? _mm256_srli_epi16(raw, 4) : raw, m15);
        }
        for (int t = 0; t < T; t++) {
            const __m256i av = bcast4(y[t]->qs + ao + 4 * k);
            for (int h = h0; h < h0 + NH; h++) {
                s16[h][t] = _mm256_add_epi16(s16[h][t], _mm256_maddubs_epi16(wq[h], av));
                /* one running sum per (half, token): without this GCC reassociates the 8 adds
                 * into a tree over all products, keeping them alive (spilled to the stack) */
                __asm__("" : "+x"(s16[h][t]));
            }
        }
    }
}

/* ---- Q4_K ----------------------------------------------------------------------------------
 * Half hf of a super-block (rows 8 hf .. 8 hf + 7): per 32-element sub-block s (the low
 * nibbles of chunk p = s / 2 for even s, the high ones for odd s) the PMADDUBSW pair sums of
 * the 8 code vectors are gathered in int16, then PMADDWD by the rows' scales gives the
 * sub-block's scaled sum; the two of chunk p make isum_p, and the rows' (m[2p], m[2p+1]) by
 * the token's block-pair sums imin_p. Up to 4 tokens run both halves in one pass (16
 * accumulators at most), 8 tokens one half at a time. */
static inline __attribute__((always_inline)) void x16_q4_K(int64_t n, const uint8_t *w,
                                                           const uint8_t *a, size_t a_stride,
                                                           const int T, const int gemm, float *out,
                                                           size_t ld_out) {
    const size_t pf = vq_cpu_stream_prefetch(); /* kquant_x86.h, pf_x16 */
    const __m256i k1 = _mm256_set1_epi32(0x3f3f3f3f), k2 = _mm256_set1_epi32(0x0f0f0f0f),
                  k3 = _mm256_set1_epi32(0x03030303);
    /* PSHUFB selectors within a 128-bit lane (word j adds 4 j): byte b of each 32-bit word into
     * both int16 halves, zero-extended; the int16 pairs (byte 0, byte 1), (byte 2, byte 3) */
    const __m256i off = _mm256_set_epi32(12, 8, 4, 0, 12, 8, 4, 0);
    const __m256i off2 = _mm256_or_si256(off, _mm256_slli_epi32(off, 16));
    __m256i bsel[4];
    for (int b = 0; b < 4; b++)
        bsel[b] = _mm256_add_epi32(
            off2, _mm256_set1_epi32((int)(0x80008000u | (unsigned)b << 16 | (unsigned)b)));
    const __m256i psel[2] = {_mm256_add_epi32(off2, _mm256_set1_epi32((int)0x80018000u)),
                             _mm256_add_epi32(off2, _mm256_set1_epi32((int)0x80038002u))};
    const int NH = T <= 4 ? 2 : 1; /* halves per pass */
    __m256 acc[2][8], accm[2][8];
    for (int hf = 0; hf < 2; hf++)
        for (int t = 0; t < T; t++) acc[hf][t] = accm[hf][t] = _mm256_setzero_ps();
    const int64_t nb = n / VQ_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *g = w + (size_t)i * (VQ_X16_ROWS * sizeof(vq_block_q4_K));
        for (int l = 0; l < 4; l++) /* d, dmin, scales */
            pf_x16(pf, g + 64 * l);
        const vq_block_q8_K *y[8];
        int32_t bsp[8][4]; /* token t: (BS[2p], BS[2p+1]) as int16 pairs */
        for (int t = 0; t < T; t++) {
            y[t] = (const vq_block_q8_K *)(const void *)(a + (size_t)t * a_stride +
                                                         (size_t)i * sizeof(vq_block_q8_K));
            _mm_storeu_si128((__m128i *)bsp[t], q8_K_pair_sums(y[t]));
        }
        const uint8_t *q = g + 256;
        for (int l = 0; l < 32; l++) pf_x16(pf, q + 64 * l);
        /* per half: the rows' scales per sub-block (both int16 halves) and (m[2p], m[2p+1])
         * per chunk (ggml's utmp unpacking, one row per lane), parked in memory: the hot loop
         * keeps only its sums in registers */
        __m256i scv[2][8], mpv[2][4];
        for (int hf = 0; hf < 2; hf++) {
            const __m256i u0 = _mm256_loadu_si256((const __m256i *)(g + 64 + 32 * hf));
            const __m256i u1 = _mm256_loadu_si256((const __m256i *)(g + 128 + 32 * hf));
            const __m256i u2 = _mm256_loadu_si256((const __m256i *)(g + 192 + 32 * hf));
            const __m256i sc03 = _mm256_and_si256(u0, k1);
            const __m256i sc47 = _mm256_or_si256(
                _mm256_and_si256(u2, k2),
                _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k3), 4));
            const __m256i m03 = _mm256_and_si256(u1, k1);
            const __m256i m47 = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi32(u2, 4), k2),
                _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k3), 4));
            for (int p = 0; p < 4; p++) {
                const __m256i scs = p < 2 ? sc03 : sc47, ms = p < 2 ? m03 : m47;
                scv[hf][2 * p] = _mm256_shuffle_epi8(scs, bsel[2 * (p & 1)]);
                scv[hf][2 * p + 1] = _mm256_shuffle_epi8(scs, bsel[2 * (p & 1) + 1]);
                mpv[hf][p] = _mm256_shuffle_epi8(ms, psel[p & 1]);
            }
        }
        __m256 dv[2], dmv[2]; /* d and dmin of each half's rows */
        for (int hf = 0; hf < 2; hf++) {
            dv[hf] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 16 * hf)));
            dmv[hf] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 32 + 16 * hf)));
        }
        __asm__ volatile("" : : "r"(scv), "r"(mpv) : "memory");
#pragma GCC unroll 2
        for (int h0 = 0; h0 < 2; h0 += NH) {
            __m256i itot[2][8], mtot[2][8];
            for (int hf = h0; hf < h0 + NH; hf++)
                for (int t = 0; t < T; t++) itot[hf][t] = mtot[hf][t] = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) {
                __m256i s16[2][8], isum[2][8];
                q4_K_nibble(q + 512 * p, y, 64 * p, 0, T, h0, NH, s16);
                for (int hf = h0; hf < h0 + NH; hf++)
                    for (int t = 0; t < T; t++)
                        isum[hf][t] = _mm256_madd_epi16(s16[hf][t], scv[hf][2 * p]);
                q4_K_nibble(q + 512 * p, y, 64 * p + 32, 1, T, h0, NH, s16);
                for (int hf = h0; hf < h0 + NH; hf++)
                    for (int t = 0; t < T; t++) {
                        const __m256i is = _mm256_add_epi32(
                            isum[hf][t], _mm256_madd_epi16(s16[hf][t], scv[hf][2 * p + 1]));
                        const __m256i imin = _mm256_madd_epi16(mpv[hf][p],
                                                               _mm256_set1_epi32(bsp[t][p]));
                        if (gemm) {
                            const __m256 ya = _mm256_set1_ps(y[t]->d);
                            acc[hf][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is),
                                                         _mm256_mul_ps(dv[hf], ya), acc[hf][t]);
                            accm[hf][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin),
                                                          _mm256_mul_ps(dmv[hf], ya), accm[hf][t]);
                        } else {
                            itot[hf][t] = _mm256_add_epi32(itot[hf][t], is);
                            mtot[hf][t] = _mm256_add_epi32(mtot[hf][t], imin);
                        }
                    }
            }
            if (!gemm)
                for (int hf = h0; hf < h0 + NH; hf++)
                    for (int t = 0; t < T; t++) {
                        const __m256 ya = _mm256_set1_ps(y[t]->d);
                        acc[hf][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(itot[hf][t]),
                                                     _mm256_mul_ps(dv[hf], ya), acc[hf][t]);
                        accm[hf][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mtot[hf][t]),
                                                      _mm256_mul_ps(dmv[hf], ya), accm[hf][t]);
                    }
        }
    }
    for (int t = 0; t < T; t++)
        for (int hf = 0; hf < 2; hf++)
            _mm256_storeu_ps(out + (size_t)t * ld_out + 8 * hf,
                             _mm256_sub_ps(acc[hf][t], accm[hf][t]));
}

void vq_vec_dot_x16_q4_K_q8_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                   int n_tok, int gemm, float *out, size_t ld_out) {
    const uint8_t *wb = w, *ab = a;
    if (gemm) { /* whole groups of 4 (8 tokens in one pass) */
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

/* ---- Q6_K ----------------------------------------------------------------------------------
 * Lane k of ggml's AVX2 order (elements e with (e mod 32) / 4 == k) is one vector per (token,
 * half of the group, k), summed over the 8 groups of 32 elements, starting at
 * -32 x (sc[2k] x bsums[2k] + sc[2k+1] x bsums[2k+1]); one fma per super-block into float
 * lane k, hsum8's order at the end. */
static inline __attribute__((always_inline)) void x16_q6_K(int64_t n, const uint8_t *w,
                                                           const uint8_t *a, size_t a_stride,
                                                           const int T, float *out, size_t ld_out) {
    const size_t pf = vq_cpu_stream_prefetch(); /* kquant_x86.h, pf_x16 */
    const __m256i m15 = _mm256_set1_epi8(15), m48 = _mm256_set1_epi8(48);
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    __m256 acc[8][2][8]; /* [token][half][lane k] */
    for (int t = 0; t < T; t++)
        for (int hf = 0; hf < 2; hf++)
            for (int k = 0; k < 8; k++) acc[t][hf][k] = _mm256_setzero_ps();
    const int64_t nb = n / VQ_QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *g = w + (size_t)i * (VQ_X16_ROWS * sizeof(vq_block_q6_K));
        for (int l = 0; l < 5; l++) /* d and scales */
            pf_x16(pf, g + 64 * l);
        /* sd[hf][j]: scale j of each row of half hf in both int16 halves of its word */
        __m256i sd[2][16];
        for (int hf = 0; hf < 2; hf++)
            for (int j = 0; j < 16; j++) {
                const __m256i v = _mm256_cvtepi8_epi32(
                    _mm_loadl_epi64((const __m128i *)(g + 32 + 16 * j + 8 * hf)));
                sd[hf][j] = _mm256_or_si256(_mm256_and_si256(v, lo16), _mm256_slli_epi32(v, 16));
            }
        const vq_block_q8_K *y[8];
        __m256 dd[8][2];
        for (int t = 0; t < T; t++) {
            y[t] = (const vq_block_q8_K *)(const void *)(a + (size_t)t * a_stride +
                                                         (size_t)i * sizeof(vq_block_q8_K));
            for (int hf = 0; hf < 2; hf++)
                dd[t][hf] = _mm256_mul_ps(
                    _mm256_set1_ps(y[t]->d),
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 16 * hf))));
        }
        for (int k = 0; k < 8; k++) {
            const uint8_t *wk = g + 288 + 384 * k; /* ql (h 0), ql (h 0, +32), qh (h 0), h 1 */
            for (int l = 0; l < 6; l++) pf_x16(pf, wk + 64 * l);
            for (int hf = 0; hf < 2; hf++) {
                /* (sc[2k], sc[2k+1]) of each row against the pair (bsums[2k], bsums[2k+1]) */
                const __m256i sp = _mm256_blend_epi16(sd[hf][2 * k], sd[hf][2 * k + 1], 0xAA);
                __m256i s[8];
                for (int t = 0; t < T; t++) {
                    int32_t bp;
                    memcpy(&bp, y[t]->bsums + 2 * k, 4);
                    s[t] = _mm256_sub_epi32(
                        _mm256_setzero_si256(),
                        _mm256_slli_epi32(_mm256_madd_epi16(sp, _mm256_set1_epi32(bp)), 5));
                }
                for (int h = 0; h < 2; h++) {
                    const __m256i qhv = _mm256_loadu_si256(
                        (const __m256i *)(wk + 64 * (3 * h + 2) + 32 * hf));
                    for (int hs = 0; hs < 2; hs++) {
                        const __m256i qlv = _mm256_loadu_si256(
                            (const __m256i *)(wk + 64 * (3 * h + hs) + 32 * hf));
                        for (int up = 0; up < 2; up++) {
                            const int gg = hs + 2 * up; /* group within the 128-element half */
                            const int gp = 4 * h + gg;  /* group of 32 in the super-block */
                            const __m256i low = up ? _mm256_srli_epi16(qlv, 4) : qlv;
                            const __m256i hib = gg == 0 ? _mm256_slli_epi16(qhv, 4)
                                              : gg == 1 ? _mm256_slli_epi16(qhv, 2)
                                              : gg == 2 ? qhv
                                                        : _mm256_srli_epi16(qhv, 2);
                            const __m256i qv = _mm256_or_si256(_mm256_and_si256(low, m15),
                                                               _mm256_and_si256(hib, m48));
                            const __m256i sc = sd[hf][2 * gp + (k >= 4)];
                            for (int t = 0; t < T; t++) {
                                s[t] = _mm256_add_epi32(
                                    s[t],
                                    _mm256_madd_epi16(_mm256_maddubs_epi16(
                                                          qv, bcast4(y[t]->qs + 32 * gp + 4 * k)),
                                                      sc));
                                __asm__("" : "+x"(s[t])); /* one running sum (q4_K_nibble) */
                            }
                        }
                    }
                }
                for (int t = 0; t < T; t++)
                    acc[t][hf][k] = _mm256_fmadd_ps(dd[t][hf], _mm256_cvtepi32_ps(s[t]),
                                                    acc[t][hf][k]);
            }
        }
    }
    for (int t = 0; t < T; t++)
        for (int hf = 0; hf < 2; hf++) {
            const __m256 *c = acc[t][hf];
            const __m256 r = _mm256_add_ps(
                _mm256_add_ps(_mm256_add_ps(c[4], c[0]), _mm256_add_ps(c[6], c[2])),
                _mm256_add_ps(_mm256_add_ps(c[5], c[1]), _mm256_add_ps(c[7], c[3])));
            _mm256_storeu_ps(out + (size_t)t * ld_out + 8 * hf, r);
        }
}

void vq_vec_dot_x16_q6_K_q8_K_avx2(int64_t n, const void *w, const void *a, size_t a_stride,
                                   int n_tok, int gemm, float *out, size_t ld_out) {
    (void)gemm; /* one order */
    const uint8_t *wb = w, *ab = a;
    if (n_tok == 8) { /* 8 tokens in one pass */
        x16_q6_K(n, wb, ab, a_stride, 8, out, ld_out);
        return;
    }
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
