/*
 * polar_avx512vbmi.c — PolarQuant score and accumulate for several queries at once on AVX-512
 * with VBMI (contract in codecs/polar.h; scalar references polar_token_score and
 * polar_accumulate in polar.c; docs/ALGORITHMS.md §5.4, §9.15).
 *
 * Each coordinate block of a token is decoded once into its 16 rotated values and then meets
 * every query: the 16 lanes of one vector are the block's coordinates. The block's record
 * (B <= 57 bits) is broadcast to the eight 64-bit lanes by its load, and one VPMULTISHIFTQB
 * pulls, for lane j, the codes of its four ancestors (level 1 angle j/2, level 2 angle j/4,
 * level 3 angle j/8, the level-4 angle) into the four bytes of dword j; one VPTERNLOGD keeps
 * each code's bits and sets bit 4 where lane j takes the sine branch at that level
 * ((j >> (l - 1)) & 1). Per level one VPERMT2PS then reads cos (bit 4 clear) or sin of the
 * centroid from the two 16-entry tables, and the value is radius * c4 * c3 * c2 * c1, in the
 * order of the reference's top-down decode. Scores: q_r . y over the blocks (one FMA chain per
 * query), eight tokens' sums reduced together; accumulate: acc += w_t * y per block and query.
 * Every level needs at most 4 bits (b1 <= 4). Records are read with 8-byte loads; the few at
 * the end of the buffer whose 8 bytes would pass it are read with a masked load, so every
 * token takes the same path and a token's result does not depend on where a call starts.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/tq_x86.h"
#include "codecs/arch/x86/wide_x86.h"
#include "codecs/polar.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* The kernels' constants: the codec's tables (polar_vb_tables in polar.c, built once at
 * create) in registers, and how many tokens of this call may use 8-byte record loads. */
struct pv {
    const struct polar_impl *im;
    __m512i mask, sinb;
    __m512 cs[VQ_POLAR_LEVELS], sn[VQ_POLAR_LEVELS];
    const int *bo, *sh; /* byte offset and bit phase of block k's record in the stream */
    int64_t n_safe;     /* tokens whose 8-byte record loads all stay inside the buffer */
};

static void pv_init(const struct polar_impl *im, size_t bb, int64_t n, struct pv *P) {
    P->im = im;
    P->mask = _mm512_loadu_si512((const void *)im->vb_mask);
    P->sinb = _mm512_loadu_si512((const void *)im->vb_sinb);
    for (int l = 0; l < VQ_POLAR_LEVELS; l++) {
        P->cs[l] = _mm512_loadu_ps(im->cs[l]);
        P->sn[l] = _mm512_loadu_ps(im->sn[l]);
    }
    P->bo = im->vb_bo;
    P->sh = im->vb_sh;
    /* token t is safe iff t bb + ang_off + bo_max + 8 <= n bb */
    const int64_t need = (int64_t)im->ang_off + im->vb_bo[im->nblk - 1] + 8;
    const int64_t total = n * (int64_t)bb;
    P->n_safe = total < need ? 0 : (total - need) / (int64_t)bb + 1;
    if (P->n_safe > n) P->n_safe = n;
}

/* The 8 record bytes of block k (bytes past the stream's end of the last records read as 0). */
VQ_INLINE __m512i rec_at(const uint8_t *ang, const struct pv *P, int k, int safe,
                         const uint8_t *end) {
    const uint8_t *p = ang + P->bo[k];
    if (safe) {
        long long v;
        memcpy(&v, p, sizeof v);
        return _mm512_set1_epi64(v);
    }
    const ptrdiff_t av = end - p;
    const __mmask16 m = (__mmask16)(av >= 8 ? 0xFF : (1u << av) - 1u);
    return _mm512_broadcastq_epi64(_mm_maskz_loadu_epi8(m, p));
}

/* The 16 rotated values of one block: radius * c4 * c3 * c2 * c1 (reference order). */
VQ_INLINE __m512 block_y(const struct pv *P, __m512i rec, int sh, __m512 rad) {
    __m512i x = _mm512_multishift_epi64_epi8(_mm512_loadu_si512((const void *)P->im->vb_ctrl[sh]),
                                             rec);
    x = _mm512_ternarylogic_epi32(x, P->mask, P->sinb, 0xEA); /* (x & mask) | sinb */
    __m512 v = _mm512_mul_ps(rad,
                             _mm512_permutex2var_ps(P->cs[3], _mm512_srli_epi32(x, 24), P->sn[3]));
    v = _mm512_mul_ps(v, _mm512_permutex2var_ps(P->cs[2], _mm512_srli_epi32(x, 16), P->sn[2]));
    v = _mm512_mul_ps(v, _mm512_permutex2var_ps(P->cs[1], _mm512_srli_epi32(x, 8), P->sn[1]));
    return _mm512_mul_ps(v, _mm512_permutex2var_ps(P->cs[0], x, P->sn[0]));
}

/* The nblk radii of the token at s into r. */
VQ_INLINE void radii(const uint8_t *s, int nblk, float *r) {
    for (int k = 0; k < nblk; k += 16) {
        const int m = nblk - k < 16 ? nblk - k : 16;
        const __m256i h = _mm256_maskz_loadu_epi16((__mmask16)((1u << m) - 1u), s + 2 * k);
        _mm512_storeu_ps(r + k, vq_sf16x16(_mm512_cvtepu16_epi32(h)));
    }
}

/* The radii of m (<= 8) tokens t0 .. t0 + m - 1 (bb bytes apart from s0) into r[u * 4 + k]
 * when nblk == 4: one 8-byte gather per token, two 16-lane decodes. */
VQ_INLINE void radii8x4(const uint8_t *s0, size_t bb, int m, float *r) {
    const __m512i off = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm512_set1_epi64((long long)bb));
    const __m512i h = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(),
                                                  (__mmask8)((1u << m) - 1u), off, s0, 1);
    _mm512_storeu_ps(r, vq_sf16x16(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h))));
    _mm512_storeu_ps(r + 16, vq_sf16x16(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1))));
}

/* NB: the block count when it is a compile-time 4 (d = 64), else 0 (im->nblk). */
VQ_INLINE void score_nq(const struct polar_impl *im, const float *const *qr, const int NQ,
                        const int NB, const uint8_t *codes, size_t bb, int64_t n,
                        float *const *scores) {
    struct pv P;
    pv_init(im, bb, n, &P);
    const int nblk = NB ? NB : im->nblk;
    const uint8_t *end = codes + (size_t)n * bb;
    float rad[8 * 64];
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        const int m = n - t0 < 8 ? (int)(n - t0) : 8;
        if (NB == 4) radii8x4(codes + (size_t)t0 * bb, bb, m, rad);
        else
            for (int u = 0; u < m; u++) radii(codes + (size_t)(t0 + u) * bb, nblk, rad + 64 * u);
        __m256 f[4][8];
        for (int u = 0; u < 8; u++) {
            if (u >= m) {
#pragma GCC unroll 4
                for (int j = 0; j < NQ; j++) f[j][u] = _mm256_setzero_ps();
                continue;
            }
            const int64_t t = t0 + u;
            const uint8_t *ang = codes + (size_t)t * bb + im->ang_off;
            const int safe = t < P.n_safe;
            const float *ru = rad + (NB == 4 ? 4 : 64) * u;
            __m512 a[4];
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++) a[j] = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int k = 0; k < nblk; k++) {
                const __m512 y = block_y(&P, rec_at(ang, &P, k, safe, end), P.sh[k],
                                         _mm512_set1_ps(ru[k]));
#pragma GCC unroll 4
                for (int j = 0; j < NQ; j++)
                    a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(qr[j] + 16 * k), y, a[j]);
            }
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++) f[j][u] = fold8(a[j]);
        }
        const __mmask8 mk = (__mmask8)((1u << m) - 1u);
#pragma GCC unroll 4
        for (int j = 0; j < NQ; j++) _mm256_mask_storeu_ps(scores[j] + t0, mk, hsum8x8(f[j]));
    }
}

void vq_polar_score_multi_avx512vbmi(const struct polar_impl *im, const float *const *qr, int nq,
                                     const uint8_t *codes, size_t bb, int64_t n,
                                     float *const *scores) {
#define SCORE_NQ(Q) \
    (im->nblk == 4 ? score_nq(im, qr, Q, 4, codes, bb, n, scores) \
                   : score_nq(im, qr, Q, 0, codes, bb, n, scores))
    switch (nq) {
    case 1: SCORE_NQ(1); break;
    case 2: SCORE_NQ(2); break;
    case 3: SCORE_NQ(3); break;
    default: SCORE_NQ(4); break;
    }
#undef SCORE_NQ
}

/* Tokens per pass over a group of blocks: their radii are decoded once per pass. */
#define PV_CHUNK 64

VQ_INLINE void acc_nq(const struct polar_impl *im, const uint8_t *codes, size_t bb, int64_t n,
                      const float *const *w, const int NQ, const int NB, float *const *acc) {
    struct pv P;
    pv_init(im, bb, n, &P);
    const int nblk = NB ? NB : im->nblk, rs = NB == 4 ? 4 : 64;
    const uint8_t *end = codes + (size_t)n * bb;
    float rad[PV_CHUNK * 64];
    for (int64_t t0 = 0; t0 < n; t0 += PV_CHUNK) {
        const int m = n - t0 < PV_CHUNK ? (int)(n - t0) : PV_CHUNK;
        if (NB == 4)
            for (int u = 0; u < m; u += 8)
                radii8x4(codes + (size_t)(t0 + u) * bb, bb, m - u < 8 ? m - u : 8, rad + 4 * u);
        else
            for (int u = 0; u < m; u++) radii(codes + (size_t)(t0 + u) * bb, nblk, rad + 64 * u);
        for (int k0 = 0; k0 < nblk; k0 += 4) {
            const int nk = nblk - k0 < 4 ? nblk - k0 : 4;
            __m512 a[4][4];
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++)
#pragma GCC unroll 4
                for (int kk = 0; kk < 4; kk++) a[j][kk] = _mm512_setzero_ps();
            for (int u = 0; u < m; u++) {
                const int64_t t = t0 + u;
                const uint8_t *ang = codes + (size_t)t * bb + im->ang_off;
                const int safe = t < P.n_safe;
#pragma GCC unroll 4
                for (int kk = 0; kk < 4; kk++) {
                    if (kk >= nk) break;
                    const int k = k0 + kk;
                    const __m512 y = block_y(&P, rec_at(ang, &P, k, safe, end), P.sh[k],
                                             _mm512_set1_ps(rad[rs * u + k]));
#pragma GCC unroll 4
                    for (int j = 0; j < NQ; j++)
                        a[j][kk] = _mm512_fmadd_ps(_mm512_set1_ps(w[j][t]), y, a[j][kk]);
                }
            }
            /* position-major accumulator: coordinate i of block k at acc[i * nblk + k] */
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++)
                for (int kk = 0; kk < nk; kk++) {
                    float v[16];
                    _mm512_storeu_ps(v, a[j][kk]);
                    for (int i = 0; i < 16; i++) acc[j][i * nblk + k0 + kk] += v[i];
                }
        }
    }
}

void vq_polar_acc_multi_avx512vbmi(const struct polar_impl *im, const uint8_t *codes, size_t bb,
                                   int64_t n, const float *const *w, int nq, float *const *acc) {
#define ACC_NQ(Q) \
    (im->nblk == 4 ? acc_nq(im, codes, bb, n, w, Q, 4, acc) \
                   : acc_nq(im, codes, bb, n, w, Q, 0, acc))
    switch (nq) {
    case 1: ACC_NQ(1); break;
    case 2: ACC_NQ(2); break;
    case 3: ACC_NQ(3); break;
    default: ACC_NQ(4); break;
    }
#undef ACC_NQ
}
