/*
 * spectral_avx512vbmi.c — spectral's score and value accumulate for several queries at once on
 * AVX-512 with VBMI, in the coordinate domain (contract and layout in codecs/lutsum_kernels.h;
 * the references are vq_sp_score_ref and the histogram accumulate vq_sp_accumulate_ref plus
 * spectral.c's finish, which these equal within float rounding; docs/ALGORITHMS.md §9.15).
 *
 * 16 active coordinates of a token per vector: one VPERMI2B over the token's code stream (two
 * registers, up to 128 bytes) brings the bytes holding each lane's code into its dword, a
 * variable shift and mask leave the code, and the Lloyd-Max centroid of the lane's width is
 * read from one table: by VPERMI2PS where every width of the group is <= 4 (32 entries), else
 * by a gather. Times the token's signal or noise scale (per lane) this is the token's
 * whitened coordinate; each query dots it with its whitened query (scores, eight tokens reduced
 * together) or adds it with its weight (accumulate: the accumulators of up to 4 groups per
 * query stay in registers over all tokens).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/tq_x86.h"
#include "codecs/arch/x86/wide_x86.h"
#include "codecs/lutsum_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* A token's code stream (code_bytes <= 128 at p) in two registers, zero past its end. */
VQ_INLINE void sp_stream(const vq_sp_vk *k, const uint8_t *p, __m512i *lo, __m512i *hi) {
    const int cb = k->code_bytes;
    *lo = _mm512_maskz_loadu_epi8(cb >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << cb) - 1), p);
    *hi = cb <= 64 ? _mm512_setzero_si512()
                   : _mm512_maskz_loadu_epi8(
                         cb >= 128 ? ~(__mmask64)0 : (((__mmask64)1 << (cb - 64)) - 1), p + 64);
}

/* The whitened coordinates of group g of one token (stream registers lo / hi, scales vs / vn):
 * scale * centroid per lane, 0 past the active coordinates. */
VQ_INLINE __m512 sp_group(const vq_sp_vk *k, int g, __m512i lo, __m512i hi, __m512 T0, __m512 T1,
                          __m512 vs, __m512 vn) {
    const int32_t *ln = k->lane + 48 * g;
    const __m512i x = _mm512_permutex2var_epi8(
        lo, _mm512_loadu_si512((const void *)(k->pidx + 64 * g)), hi);
    /* (code & mask) | offset: each width's entries start at a multiple of their count */
    const __m512i ci = _mm512_ternarylogic_epi32(
        _mm512_srlv_epi32(x, _mm512_loadu_si512((const void *)ln)),
        _mm512_loadu_si512((const void *)(ln + 16)), _mm512_loadu_si512((const void *)(ln + 32)),
        0xEA);
    const __m512 cv = k->small[g] ? _mm512_permutex2var_ps(T0, ci, T1)
                                  : _mm512_i32gather_ps(ci, k->ctab, 4);
    return _mm512_mul_ps(cv, _mm512_mask_blend_ps(k->noise[g], vs, vn));
}

/* scores[j][t] = sum over the active coordinates of qa[j] * the token's whitened coordinate;
 * eight tokens reduced together. */
VQ_INLINE void sp_score_nq(const vq_sp_vk *k, const float *const *qa, const int NQ,
                           const uint8_t *codes, int64_t n, float *const *scores) {
    const __m512 T0 = _mm512_loadu_ps(k->ctab), T1 = _mm512_loadu_ps(k->ctab + 16);
    const int rl = k->rec;
    float ss[8], sn[8];
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        const int mt = n - t0 < 8 ? (int)(n - t0) : 8;
        const uint8_t *r0 = codes + (size_t)t0 * (size_t)rl;
        const __mmask16 mk = (__mmask16)((1u << mt) - 1u);
        _mm256_storeu_ps(ss, _mm512_castps512_ps256(vq_tq_scales16(r0, rl, mk)));
        _mm256_storeu_ps(sn, _mm512_castps512_ps256(vq_tq_scales16(r0 + 2, rl, mk)));
        __m256 f[4][8];
        for (int u = 0; u < 8; u++) {
            if (u >= mt) {
                for (int j = 0; j < NQ; j++) f[j][u] = _mm256_setzero_ps();
                continue;
            }
            const uint8_t *p = r0 + (size_t)u * (size_t)rl + 4;
            __m512i lo, hi;
            sp_stream(k, p, &lo, &hi);
            const __m512 vs = _mm512_set1_ps(ss[u]), vn = _mm512_set1_ps(sn[u]);
            __m512 a[4];
            for (int j = 0; j < NQ; j++) a[j] = _mm512_setzero_ps();
            for (int g = 0; g < k->n_grp; g++) {
                const __m512 y = sp_group(k, g, lo, hi, T0, T1, vs, vn);
#pragma GCC unroll 4
                for (int j = 0; j < NQ; j++)
                    a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(qa[j] + 16 * g), y, a[j]);
            }
            for (int j = 0; j < NQ; j++) f[j][u] = fold8(a[j]);
        }
        for (int j = 0; j < NQ; j++)
            _mm256_mask_storeu_ps(scores[j] + t0, (__mmask8)mk, hsum8x8(f[j]));
    }
}

void vq_sp_score_multi_avx512vbmi(const vq_sp_vk *k, const float *const *qa, int nq,
                                  const uint8_t *codes, int64_t n, float *const *scores) {
    switch (nq) {
    case 1: sp_score_nq(k, qa, 1, codes, n, scores); break;
    case 2: sp_score_nq(k, qa, 2, codes, n, scores); break;
    case 3: sp_score_nq(k, qa, 3, codes, n, scores); break;
    default: sp_score_nq(k, qa, 4, codes, n, scores); break;
    }
}

/* Tokens per chunk of the accumulate: their scales are decoded once for every group. */
#define SP_CHUNK 64

/* One group g over the chunk's m tokens (scales ss / sn), SMALL = k->small[g]: the group's
 * accumulators (one vector per query) stay in registers. */
VQ_INLINE void sp_acc_group(const vq_sp_vk *k, int g, const uint8_t *r0, int m, const float *ss,
                            const float *sn, const float *const *w, int64_t t0, const int NQ,
                            const int SMALL, __m512 *z) {
    const __m512 T0 = _mm512_loadu_ps(k->ctab), T1 = _mm512_loadu_ps(k->ctab + 16);
    const int rl = k->rec;
    const int32_t *ln = k->lane + 48 * g;
    const __m512i pidx = _mm512_loadu_si512((const void *)(k->pidx + 64 * g));
    const __m512i sh = _mm512_loadu_si512((const void *)ln);
    const __m512i mk = _mm512_loadu_si512((const void *)(ln + 16));
    const __m512i off = _mm512_loadu_si512((const void *)(ln + 32));
    const __mmask16 nz = k->noise[g];
    for (int u = 0; u < m; u++) {
        const uint8_t *p = r0 + (size_t)u * (size_t)rl + 4;
        __m512i lo, hi;
        sp_stream(k, p, &lo, &hi);
        const __m512i x = _mm512_permutex2var_epi8(lo, pidx, hi);
        const __m512i ci = _mm512_ternarylogic_epi32(_mm512_srlv_epi32(x, sh), mk, off, 0xEA);
        const __m512 cv = SMALL ? _mm512_permutex2var_ps(T0, ci, T1)
                                : _mm512_i32gather_ps(ci, k->ctab, 4);
        const __m512 y = _mm512_mul_ps(
            cv, _mm512_mask_blend_ps(nz, _mm512_set1_ps(ss[u]), _mm512_set1_ps(sn[u])));
#pragma GCC unroll 4
        for (int j = 0; j < NQ; j++) z[j] = _mm512_fmadd_ps(_mm512_set1_ps(w[j][t0 + u]), y, z[j]);
    }
}

VQ_INLINE void sp_acc_nq(const vq_sp_vk *k, const uint8_t *codes, int64_t n, const float *const *w,
                         const int NQ, float *const *acc) {
    const int rl = k->rec;
    float ss[SP_CHUNK], sn[SP_CHUNK];
    for (int64_t t0 = 0; t0 < n; t0 += SP_CHUNK) {
        const int m = n - t0 < SP_CHUNK ? (int)(n - t0) : SP_CHUNK;
        const uint8_t *r0 = codes + (size_t)t0 * (size_t)rl;
        for (int u = 0; u < m; u += 16) {
            const __mmask16 mk = (__mmask16)(m - u >= 16 ? 0xFFFF : (1u << (m - u)) - 1u);
            _mm512_storeu_ps(ss + u, vq_tq_scales16(r0 + (size_t)u * (size_t)rl, rl, mk));
            _mm512_storeu_ps(sn + u, vq_tq_scales16(r0 + (size_t)u * (size_t)rl + 2, rl, mk));
        }
        for (int g = 0; g < k->n_grp; g++) {
            __m512 z[4];
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++) z[j] = _mm512_loadu_ps(acc[j] + k->z_off + 16 * g);
            if (k->small[g]) sp_acc_group(k, g, r0, m, ss, sn, w, t0, NQ, 1, z);
            else sp_acc_group(k, g, r0, m, ss, sn, w, t0, NQ, 0, z);
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++) _mm512_storeu_ps(acc[j] + k->z_off + 16 * g, z[j]);
        }
    }
}

void vq_sp_acc_multi_avx512vbmi(const vq_sp_vk *k, const uint8_t *codes, int64_t n,
                                const float *const *w, int nq, float *const *acc) {
    switch (nq) {
    case 1: sp_acc_nq(k, codes, n, w, 1, acc); break;
    case 2: sp_acc_nq(k, codes, n, w, 2, acc); break;
    case 3: sp_acc_nq(k, codes, n, w, 3, acc); break;
    default: sp_acc_nq(k, codes, n, w, 4, acc); break;
    }
}
