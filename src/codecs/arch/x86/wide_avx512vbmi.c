/*
 * wide_avx512vbmi.c — AVX-512 + AVX512_VBMI score / accumulate kernels of the rotated codecs
 * with LUT codes of 6, 7 and 8 bits (turboquant_mse b = 6..8); contract and record layout in
 * codecs/wide_kernels.h. Chosen at run time only where the CPU has VBMI (vq_cpu_avx512vbmi);
 * other codes go to the AVX-512 kernels (wide_avx512.c).
 *
 * 64 coordinates of one token at a time, looked up one byte of the fp32 level at a time:
 *  1. codes: the chunk's bytes (one 64-byte load, masked where it would leave the record) go
 *     through one VPERMB; 8 bits: that is all; 6, 7 bits: VPERMB puts the bytes of 8 codes
 *     into each qword and VPMULTISHIFTQB moves code c to its byte (low b bits; the bits above
 *     are ignored by the lookup). The byte of coordinate 16m + 4L + i (m, L < 4, i < 4) is
 *     placed at byte 16L + 4m + i, so that step 3 yields the coordinates in natural order.
 *  2. levels: four byte planes, plane k = byte k of every level, looked up with VPERMB (64
 *     levels in one register) or VPERMI2B (128 levels in two). A symmetric table (k->sym:
 *     lut[2^b - 1 - c] = -lut[c] exactly, as the Lloyd-Max ones) is looked up in its upper
 *     half U = lut[2^(b-1) ..]: a code c >= 2^(b-1) reads U[c - 2^(b-1)], a lower code reads
 *     U[2^(b-1) - 1 - c] and gets the sign bit of its top byte flipped. So 6 bits and
 *     symmetric 7 bits take one VPERMB per plane, 7 bits and symmetric 8 bits one VPERMI2B;
 *     8 bits need sym (else wide_avx512.c).
 *  3. VPUNPCK{L,H}BW then VPUNPCK{L,H}WD interleave the four planes into 4 x 16 floats,
 *     vector m holding coordinates 16m .. 16m + 15 of the chunk.
 * Per 16 coordinates that is about 3.5 (6 bits) to 5.5 (8 bits) shuffle-port instructions,
 * against 4-7 permutes + blends for a register table (wide_avx512.c) or one VGATHERDPS.
 * Score keeps 8 tokens in flight; accumulate keeps the chunk's 64 accumulator floats in
 * registers across all tokens (even and odd tokens in separate registers). A chunk of fewer
 * than 64 coordinates (d not a multiple of 64) reads only its own bytes; its lanes past d meet
 * zero query lanes (score) or are not stored (accumulate).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/turboquant_kernels.h"
#include "codecs/wide_kernels.h"
#include "codecs/arch/x86/wide_x86.h"

typedef struct {
    __m512i perm;  /* VPERMB control of step 1 */
    __m512i shift; /* VPMULTISHIFTQB offsets of step 1 (6, 7 bits) */
    __m512i t[8];  /* byte planes: t[k] (64 levels) or t[2k], t[2k + 1] (128 levels) */
} vk;

VQ_INLINE void vk_init(const vq_wk *k, vk *u, const int B, const int SYM) {
    uint8_t perm[64], sh[64], tb[8][64];
    for (int p = 0; p < 64; p++) {
        const int L = p / 16, m = (p % 16) / 4, i = p % 4, c0 = 16 * m + 4 * L;
        if (B == 8) {
            perm[p] = (uint8_t)(c0 + i);
            sh[p] = 0;
        } else { /* the run of codes c0 .. c0 + 3 starts at bit c0*B: 4 bytes hold it */
            perm[p] = (uint8_t)(c0 * B / 8 + i);
            sh[p] = (uint8_t)(32 * (m % 2) + (c0 * B) % 8 + i * B);
        }
    }
    const float *lev = k->lut + (SYM ? 1 << (B - 1) : 0); /* SYM: the upper half */
    const int nt = (SYM ? B - 1 : B) == 6 ? 1 : 2;        /* table registers per plane */
    for (int e = 0; e < 64 * nt; e++) {
        uint32_t v;
        memcpy(&v, &lev[e], 4);
        for (int b = 0; b < 4; b++) tb[b * nt + e / 64][e % 64] = (uint8_t)(v >> (8 * b));
    }
    u->perm = _mm512_loadu_si512((const void *)perm);
    u->shift = _mm512_loadu_si512((const void *)sh);
    for (int i = 0; i < 4 * nt; i++) u->t[i] = _mm512_loadu_si512((const void *)tb[i]);
}

/* Levels of coordinates j0 .. j0 + 63 of the code bytes p (f[m]: j0 + 16m .. j0 + 16m + 15);
 * nb = bytes of the chunk, full: a whole 64-byte load stays inside the record. */
VQ_INLINE void lev64(const vk *u, const uint8_t *p, int j0, int nb, int full, __m512 f[4],
                     const int B, const int SYM) {
    const uint8_t *src = p + j0 * B / 8;
    const __m512i raw = full ? _mm512_loadu_si512((const void *)src)
                             : _mm512_maskz_loadu_epi8(nb >= 64 ? ~0ull : (1ull << nb) - 1u, src);
    __m512i c = _mm512_permutexvar_epi8(u->perm, raw);
    if (B != 8) c = _mm512_multishift_epi64_epi8(u->shift, c);
    __m512i pl[4];
    __mmask64 neg = 0;
    if (SYM) { /* codes c below half: -lut[2^B - 1 - c] = -U[2^(B-1) - 1 - c] */
        const int h = 1 << (B - 1);
        neg = _mm512_testn_epi8_mask(c, _mm512_set1_epi8((char)h));
        c = _mm512_mask_sub_epi8(c, neg, _mm512_set1_epi8((char)(h - 1)), c);
    }
    if ((SYM ? B - 1 : B) == 6) {
        for (int b = 0; b < 4; b++) pl[b] = _mm512_permutexvar_epi8(c, u->t[b]);
    } else {
        for (int b = 0; b < 4; b++)
            pl[b] = _mm512_permutex2var_epi8(u->t[2 * b], c, u->t[2 * b + 1]);
    }
    if (SYM) pl[3] = _mm512_mask_add_epi8(pl[3], neg, pl[3], _mm512_set1_epi8((char)0x80));
    const __m512i a = _mm512_unpacklo_epi8(pl[0], pl[1]), b = _mm512_unpackhi_epi8(pl[0], pl[1]);
    const __m512i e = _mm512_unpacklo_epi8(pl[2], pl[3]), h = _mm512_unpackhi_epi8(pl[2], pl[3]);
    f[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(a, e));
    f[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(a, e));
    f[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(b, h));
    f[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(b, h));
}

/* acc + sum_m f[m] * qs[j0 + 16m ..] over the nv vectors of a chunk (one FMA chain: the 8
 * tokens in flight are independent) */
VQ_INLINE __m512 dot64(const __m512 f[4], const float *q, int nv, __m512 acc) {
    for (int m = 0; m < nv; m++) acc = _mm512_fmadd_ps(f[m], _mm512_loadu_ps(q + 16 * m), acc);
    return acc;
}

VQ_INLINE void score_t(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                       float *scores, const int B, const int SYM) {
    vk u;
    vk_init(k, &u, B, SYM);
    const int d = k->d, rec = k->rec;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r0 = codes + t * rec;
        __m512 acc[8], f[4];
        __m256 h[8];
        float sc[8];
        for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_ps();
        for (int j0 = 0; j0 < d; j0 += 64) {
            const int cnt = d - j0 < 64 ? d - j0 : 64, nb = cnt * B / 8;
            const int full = j0 * B / 8 + 64 <= rec - 2;
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                lev64(&u, r0 + i * rec + 2, j0, nb, full, f, B, SYM);
                acc[i] = dot64(f, qs + j0, (cnt + 15) / 16, acc[i]);
            }
        }
        for (int i = 0; i < 8; i++) {
            h[i] = fold8(acc[i]);
            sc[i] = vq_tq_sf16(r0 + i * rec);
        }
        _mm256_storeu_ps(scores + t, _mm256_mul_ps(hsum8x8(h), _mm256_loadu_ps(sc)));
    }
    for (; t < n; t++) {
        const uint8_t *r = codes + t * rec;
        __m512 acc = _mm512_setzero_ps(), f[4];
        for (int j0 = 0; j0 < d; j0 += 64) {
            const int cnt = d - j0 < 64 ? d - j0 : 64;
            lev64(&u, r + 2, j0, cnt * B / 8, j0 * B / 8 + 64 <= rec - 2, f, B, SYM);
            acc = dot64(f, qs + j0, (cnt + 15) / 16, acc);
        }
        scores[t] = vq_tq_sf16(r) * _mm512_reduce_add_ps(acc);
    }
}

VQ_INLINE void acc_t(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w, float *acc,
                     const int B, const int SYM) {
    vk u;
    vk_init(k, &u, B, SYM);
    const int d = k->d, rec = k->rec;
    for (int j0 = 0; j0 < d; j0 += 64) {
        const int cnt = d - j0 < 64 ? d - j0 : 64, nb = cnt * B / 8;
        const int full = j0 * B / 8 + 64 <= rec - 2;
        __m512 a[4], b[4], f[4], g[4];
        for (int m = 0; m < 4; m++) {
            a[m] = _mm512_setzero_ps();
            b[m] = _mm512_setzero_ps();
        }
        int64_t t = 0;
        for (; t + 2 <= n; t += 2) {
            const uint8_t *r = codes + t * rec;
            const __m512 w0 = _mm512_set1_ps(w[t] * vq_tq_sf16(r));
            const __m512 w1 = _mm512_set1_ps(w[t + 1] * vq_tq_sf16(r + rec));
            lev64(&u, r + 2, j0, nb, full, f, B, SYM);
            lev64(&u, r + rec + 2, j0, nb, full, g, B, SYM);
            for (int m = 0; m < 4; m++) {
                a[m] = _mm512_fmadd_ps(w0, f[m], a[m]);
                b[m] = _mm512_fmadd_ps(w1, g[m], b[m]);
            }
        }
        if (t < n) {
            const uint8_t *r = codes + t * rec;
            const __m512 w0 = _mm512_set1_ps(w[t] * vq_tq_sf16(r));
            lev64(&u, r + 2, j0, nb, full, f, B, SYM);
            for (int m = 0; m < 4; m++) a[m] = _mm512_fmadd_ps(w0, f[m], a[m]);
        }
        for (int m = 0; 16 * m < cnt; m++) {
            const __mmask16 msk = cnt - 16 * m >= 16 ? 0xffff : 0xff;
            float *p = acc + j0 + 16 * m;
            _mm512_mask_storeu_ps(
                p, msk, _mm512_add_ps(_mm512_maskz_loadu_ps(msk, p), _mm512_add_ps(a[m], b[m])));
        }
    }
}

void vq_wk_score_avx512vbmi(const vq_wk *k, const float *qs, const uint8_t *codes, int64_t n,
                            float *scores) {
    if (!vq_wk_vbmi_fits(k)) {
        vq_wk_score_avx512(k, qs, codes, n, scores);
        return;
    }
    switch (k->bits * 2 + k->sym) {
    case 12:
    case 13: score_t(k, qs, codes, n, scores, 6, 0); break;
    case 14: score_t(k, qs, codes, n, scores, 7, 0); break;
    case 15: score_t(k, qs, codes, n, scores, 7, 1); break;
    default: score_t(k, qs, codes, n, scores, 8, 1); break;
    }
}

void vq_wk_accumulate_avx512vbmi(const vq_wk *k, const uint8_t *codes, int64_t n, const float *w,
                                 float *acc) {
    if (!vq_wk_vbmi_fits(k)) {
        vq_wk_accumulate_avx512(k, codes, n, w, acc);
        return;
    }
    switch (k->bits * 2 + k->sym) {
    case 12:
    case 13: acc_t(k, codes, n, w, acc, 6, 0); break;
    case 14: acc_t(k, codes, n, w, acc, 7, 0); break;
    case 15: acc_t(k, codes, n, w, acc, 7, 1); break;
    default: acc_t(k, codes, n, w, acc, 8, 1); break;
    }
}
