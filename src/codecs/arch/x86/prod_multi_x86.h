/*
 * prod_multi_x86.h — the multi-query kernels of turboquant_prod and qjl (contracts in
 * codecs/qjl.h, docs/ALGORITHMS.md §9.15), included by turboquant_prod_avx512.c
 * (vq_prod_*_multi_avx512) and, with VQ_PROD_VBMI, by turboquant_prod_avx512vbmi.c
 * (vq_prod_*_multi_avx512vbmi: the MSE codes of 16 coordinates by one VPERMB + VPSRLVD from the
 * token's code bytes, instead of two PDEPs and their moves). Also the pdep code helpers of the
 * row kernels. Include only from files built with AVX-512F/BW/VL/DQ and BMI2.
 */
#ifndef VQ_PROD_MULTI_X86_H
#define VQ_PROD_MULTI_X86_H

#include <immintrin.h>
#include <string.h>

#include "codecs/arch/x86/tq_x86.h"
#include "codecs/arch/x86/wide_x86.h"
#include "codecs/qjl.h"

#define VQ_INLINE static inline __attribute__((always_inline))

#ifdef VQ_PROD_VBMI
#define PROD_FN(name) name##_avx512vbmi
#else
#define PROD_FN(name) name##_avx512
#endif

/* Loads 16 codes (2*bits bytes) and returns their indices as 16 dwords. */
VQ_INLINE __m512i idx16(const uint8_t *p, const int bits) {
    uint64_t x = 0;
    if (bits == 1) {
        uint16_t v;
        memcpy(&v, p, 2);
        x = v;
    } else if (bits == 2) {
        uint32_t v;
        memcpy(&v, p, 4);
        x = v;
    } else {
        uint32_t v;
        uint16_t h;
        memcpy(&v, p, 4);
        memcpy(&h, p + 4, 2);
        x = v | ((uint64_t)h << 32);
    }
    const uint64_t m8 = 0x0101010101010101ull * (uint64_t)((1u << bits) - 1u);
    const __m128i b = _mm_set_epi64x((long long)_pdep_u64(x >> (8 * bits), m8),
                                     (long long)_pdep_u64(x, m8));
    return _mm512_cvtepu8_epi32(b);
}

/* Loads the last 8 codes (bits bytes); upper 8 indices are 0. */
VQ_INLINE __m512i idx8(const uint8_t *p, const int bits) {
    uint64_t x = 0;
    if (bits == 1) x = p[0];
    else if (bits == 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        x = v;
    } else {
        uint16_t v;
        memcpy(&v, p, 2);
        x = v | ((uint64_t)p[2] << 16);
    }
    const uint64_t m8 = 0x0101010101010101ull * (uint64_t)((1u << bits) - 1u);
    return _mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)_pdep_u64(x, m8)));
}

/* ---- multi-query kernels ------------------------------------------------------------------
 * Per token the codes are unpacked and looked up once for all queries: 16 coordinates per
 * vector (pdep + VPERMPS), 16 signs per mask register. Scores: one vector per query and token
 * holds <q_r, y^> + 2 k gamma sum_{z=1} a lane-wise; eight tokens are reduced together and
 * finished as n (s - k gamma sum a). Accumulate: the accumulators of 64 coordinates / signs
 * per query stay in registers over a chunk of tokens; a sign adds 2 g where z = +1 and each
 * lane loses the chunk's sum of g once. */

#ifdef VQ_PROD_VBMI
/* VBMI: the 2 * bits code bytes of 16 coordinates (bits of 8) by one masked load; VPERMB puts
 * the two bytes holding code l in the low word of dword l and VPSRLVD shifts the code down
 * (bits above it are left: the centroid register repeats with the code period). */
VQ_INLINE __m512i idx_vb(const uint8_t *p, int nb, const int bits) {
    static const int32_t pidx[3][16] = {
        {0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0201, 0x0201, 0x0201,
         0x0201, 0x0201, 0x0201, 0x0201, 0x0201},
        {0x0100, 0x0100, 0x0100, 0x0100, 0x0201, 0x0201, 0x0201, 0x0201, 0x0302, 0x0302, 0x0302,
         0x0302, 0x0403, 0x0403, 0x0403, 0x0403},
        {0x0100, 0x0100, 0x0100, 0x0201, 0x0201, 0x0201, 0x0302, 0x0302, 0x0403, 0x0403, 0x0403,
         0x0504, 0x0504, 0x0504, 0x0605, 0x0605}};
    static const int32_t shift[3][16] = {{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7},
                                         {0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6},
                                         {0, 3, 6, 1, 4, 7, 2, 5, 0, 3, 6, 1, 4, 7, 2, 5}};
    const __m128i x = _mm_maskz_loadu_epi8((__mmask16)((1u << nb) - 1u), p);
    const __m512i w = _mm512_permutexvar_epi8(_mm512_loadu_si512((const void *)pidx[bits - 1]),
                                              _mm512_castsi128_si512(x));
    return _mm512_srlv_epi32(w, _mm512_loadu_si512((const void *)shift[bits - 1]));
}
#endif

/* Centroid indices of coordinates j .. j + 15 (j + 8 .. past d: any index). */
VQ_INLINE __m512i idx_at(const uint8_t *codes, int j, int d, const int bits) {
    if (bits == 0) return _mm512_setzero_si512(); /* qjl: no MSE codes (never called) */
#ifdef VQ_PROD_VBMI
    return idx_vb(codes + j / 8 * bits, j + 16 <= d ? 2 * bits : bits, bits);
#else
    return j + 16 <= d ? idx16(codes + j / 8 * bits, bits) : idx8(codes + j / 8 * bits, bits);
#endif
}

/* The centroid register with period 2^bits (idx_vb leaves the bits above a code). */
VQ_INLINE __m512 cb_periodic(const vq_prod_kern *pk) {
    float c[16];
    for (int i = 0; i < 16; i++) c[i] = pk->cb[i & ((1 << (pk->bm ? pk->bm : 1)) - 1)];
    return _mm512_loadu_ps(c);
}

VQ_INLINE __mmask16 sign_mask(const uint8_t *z, int i, int m) {
    if (i + 16 <= m) {
        uint16_t v;
        memcpy(&v, z + i / 8, 2);
        return (__mmask16)v;
    }
    return (__mmask16)z[i / 8];
}

/* F64: d = m = 64 at compile time (the head dims of SmolLM2 with jl_dim = d), loops unrolled. */
VQ_INLINE void prod_score_nq(const vq_prod_kern *pk, const float *const *qs, const int NQ,
                             const int BITS, const int F64, const uint8_t *codes, int64_t n,
                             float *const *scores) {
    const int d = F64 ? 64 : pk->d, m = F64 ? 64 : pk->m, rl = pk->rec;
    const __m512 cbv = cb_periodic(pk);
    const float *a[4];
    __m256 ksum[4];
    for (int j = 0; j < NQ; j++) {
        a[j] = qs[j] + pk->q_floats;
        ksum[j] = _mm256_set1_ps(a[j][pk->a_floats]);
    }
    const __m256 kv = _mm256_set1_ps(pk->k);
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        const int mt = n - t0 < 8 ? (int)(n - t0) : 8;
        const uint8_t *r0 = codes + (size_t)t0 * (size_t)rl;
        const __mmask16 mk = (__mmask16)((1u << mt) - 1u);
        const __m256 nv = _mm512_castps512_ps256(vq_tq_scales16(r0, rl, mk));
        const __m256 gv = pk->gamma ? _mm512_castps512_ps256(vq_tq_scales16(r0 + 2, rl, mk))
                                    : _mm256_set1_ps(1.0f);
        float c2[8];
        _mm256_storeu_ps(c2, _mm256_mul_ps(_mm256_set1_ps(2.0f), _mm256_mul_ps(kv, gv)));
        __m256 f[4][8];
        for (int u = 0; u < 8; u++) {
            if (u >= mt) {
                for (int j = 0; j < NQ; j++) f[j][u] = _mm256_setzero_ps();
                continue;
            }
            const uint8_t *s = r0 + (size_t)u * (size_t)rl;
            const uint8_t *cd = s + 4, *z = s + pk->sign_off;
            __m512 ms[4], sg[4];
            for (int j = 0; j < NQ; j++) ms[j] = sg[j] = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int c = 0; c < d; c += 16) {
                const __m512 v = _mm512_permutexvar_ps(idx_at(cd, c, d, BITS), cbv);
#pragma GCC unroll 4
                for (int j = 0; j < NQ; j++)
                    ms[j] = _mm512_fmadd_ps(v, _mm512_loadu_ps(qs[j] + c), ms[j]);
            }
#pragma GCC unroll 4
            for (int i = 0; i < m; i += 16) {
                const __mmask16 zm = sign_mask(z, i, m);
#pragma GCC unroll 4
                for (int j = 0; j < NQ; j++)
                    sg[j] = _mm512_mask_add_ps(sg[j], zm, sg[j], _mm512_loadu_ps(a[j] + i));
            }
            const __m512 cv = _mm512_set1_ps(c2[u]);
            for (int j = 0; j < NQ; j++) f[j][u] = fold8(_mm512_fmadd_ps(cv, sg[j], ms[j]));
        }
        const __m256 kg = _mm256_mul_ps(kv, gv);
        for (int j = 0; j < NQ; j++) {
            const __m256 sum = hsum8x8(f[j]);
            _mm256_mask_storeu_ps(scores[j] + t0, (__mmask8)mk,
                                  _mm256_mul_ps(nv, _mm256_fnmadd_ps(kg, ksum[j], sum)));
        }
    }
}

void PROD_FN(vq_prod_score_multi)(const vq_prod_kern *pk, const float *const *qs, int nq,
                                  const uint8_t *codes, int64_t n, float *const *scores) {
    const int f64 = pk->d == 64 && pk->m == 64;
#define PROD_SC(Q) \
    (pk->bm == 0   ? prod_score_nq(pk, qs, Q, 0, 0, codes, n, scores) \
     : pk->bm == 1 ? prod_score_nq(pk, qs, Q, 1, 0, codes, n, scores) \
     : pk->bm == 2 ? (f64 ? prod_score_nq(pk, qs, Q, 2, 1, codes, n, scores) \
                          : prod_score_nq(pk, qs, Q, 2, 0, codes, n, scores)) \
                   : prod_score_nq(pk, qs, Q, 3, 0, codes, n, scores))
    switch (nq) {
    case 1: PROD_SC(1); break;
    case 2: PROD_SC(2); break;
    case 3: PROD_SC(3); break;
    default: PROD_SC(4); break;
    }
#undef PROD_SC
}

#define PROD_CH 64 /* tokens per chunk: their weights are formed once per query */

/* One slice of up to 64 coordinates (MSE part, FULL: exactly 64) over the chunk's mt tokens. */
VQ_INLINE void prod_acc_mse(const vq_prod_kern *pk, const uint8_t *r0, int mt, int c0,
                            float (*wn)[PROD_CH], __m512 cbv, const int NQ, const int BITS,
                            const int FULL, float *const *acc) {
    const int d = pk->d, rl = pk->rec, nc = FULL ? 64 : (d - c0 < 64 ? d - c0 : 64);
    __m512 v[4][4];
    for (int j = 0; j < NQ; j++)
        for (int k = 0; k < 4; k++) v[j][k] = _mm512_setzero_ps();
    for (int u = 0; u < mt; u++) {
        const uint8_t *cd = r0 + (size_t)u * (size_t)rl + 4;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            if (!FULL && 16 * k >= nc) break;
            const __m512 y = _mm512_permutexvar_ps(idx_at(cd, c0 + 16 * k, d, BITS), cbv);
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++)
                v[j][k] = _mm512_fmadd_ps(_mm512_set1_ps(wn[j][u]), y, v[j][k]);
        }
    }
    for (int j = 0; j < NQ; j++)
        for (int k = 0; k < 4 && 16 * k < nc; k++) {
            float *p = acc[j] + c0 + 16 * k;
            const __mmask16 am = (__mmask16)(nc - 16 * k >= 16 ? 0xFFFF : 0xFF);
            _mm512_mask_storeu_ps(p, am, _mm512_add_ps(_mm512_maskz_loadu_ps(am, p), v[j][k]));
        }
}

/* One slice of up to 64 sketch rows (FULL: exactly 64) over the chunk's mt tokens: z_i = +1
 * adds 2 g to lane i (one masked add per 16 signs and query), and every lane loses the
 * chunk's sum of g once at the end (sum of z_i g = 2 sum_{z=+1} g - sum g). */
VQ_INLINE void prod_acc_sign(const vq_prod_kern *pk, const uint8_t *r0, int mt, int i0,
                             float (*g2)[PROD_CH], const float *gsum, const int NQ, const int FULL,
                             float *const *acc) {
    const int m = pk->m, rl = pk->rec, ni = FULL ? 64 : (m - i0 < 64 ? m - i0 : 64);
    __m512 v[4][4];
    for (int j = 0; j < NQ; j++)
        for (int k = 0; k < 4; k++) v[j][k] = _mm512_setzero_ps();
    for (int u = 0; u < mt; u++) {
        const uint8_t *z = r0 + (size_t)u * (size_t)rl + pk->sign_off;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            if (!FULL && 16 * k >= ni) break;
            const __mmask16 zm = FULL ? (__mmask16)(z[(i0 >> 3) + 2 * k] |
                                                    (unsigned)z[(i0 >> 3) + 2 * k + 1] << 8)
                                      : sign_mask(z, i0 + 16 * k, m);
#pragma GCC unroll 4
            for (int j = 0; j < NQ; j++)
                v[j][k] = _mm512_mask_add_ps(v[j][k], zm, v[j][k], _mm512_set1_ps(g2[j][u]));
        }
    }
    for (int j = 0; j < NQ; j++) {
        const __m512 gs = _mm512_set1_ps(gsum[j]);
        for (int k = 0; k < 4 && 16 * k < ni; k++) {
            float *p = acc[j] + pk->d + i0 + 16 * k;
            const __mmask16 am = (__mmask16)(ni - 16 * k >= 16 ? 0xFFFF : 0xFF);
            _mm512_mask_storeu_ps(
                p, am, _mm512_add_ps(_mm512_maskz_loadu_ps(am, p), _mm512_sub_ps(v[j][k], gs)));
        }
    }
}

VQ_INLINE void prod_acc_nq(const vq_prod_kern *pk, const uint8_t *codes, int64_t n,
                           const float *const *w, const int NQ, const int BITS, float *const *acc) {
    const int d = pk->d, m = pk->m, rl = pk->rec;
    const __m512 cbv = cb_periodic(pk);
    const __m512 kv = _mm512_set1_ps(pk->k);
    float wn[4][PROD_CH], g2[4][PROD_CH], gsum[4];
    for (int64_t t0 = 0; t0 < n; t0 += PROD_CH) {
        const int mt = n - t0 < PROD_CH ? (int)(n - t0) : PROD_CH;
        const uint8_t *r0 = codes + (size_t)t0 * (size_t)rl;
        __m512 gs[4];
        for (int j = 0; j < NQ; j++) gs[j] = _mm512_setzero_ps();
        for (int u = 0; u < mt; u += 16) {
            const __mmask16 mk = (__mmask16)(mt - u >= 16 ? 0xFFFF : (1u << (mt - u)) - 1u);
            const uint8_t *r = r0 + (size_t)u * (size_t)rl;
            const __m512 nv = vq_tq_scales16(r, rl, mk);
            const __m512 gv = pk->gamma ? vq_tq_scales16(r + 2, rl, mk) : _mm512_set1_ps(1.0f);
            for (int j = 0; j < NQ; j++) { /* wn = w n, g = (wn k) gamma (prod_accumulate) */
                const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, w[j] + t0 + u), nv);
                const __m512 g = _mm512_mul_ps(_mm512_mul_ps(x, kv), gv);
                _mm512_storeu_ps(wn[j] + u, x);
                _mm512_storeu_ps(g2[j] + u, _mm512_add_ps(g, g));
                gs[j] = _mm512_add_ps(gs[j], g);
            }
        }
        for (int j = 0; j < NQ; j++) gsum[j] = _mm512_reduce_add_ps(gs[j]);
        for (int c0 = 0; c0 < d; c0 += 64) { /* MSE part, 64 coordinates at a time */
            if (c0 + 64 <= d) prod_acc_mse(pk, r0, mt, c0, wn, cbv, NQ, BITS, 1, acc);
            else prod_acc_mse(pk, r0, mt, c0, wn, cbv, NQ, BITS, 0, acc);
        }
        for (int i0 = 0; i0 < m; i0 += 64) { /* sign part */
            if (i0 + 64 <= m) prod_acc_sign(pk, r0, mt, i0, g2, gsum, NQ, 1, acc);
            else prod_acc_sign(pk, r0, mt, i0, g2, gsum, NQ, 0, acc);
        }
    }
}

void PROD_FN(vq_prod_acc_multi)(const vq_prod_kern *pk, const uint8_t *codes, int64_t n,
                                const float *const *w, int nq, float *const *acc) {
#define PROD_AC(Q) \
    (pk->bm == 0   ? prod_acc_nq(pk, codes, n, w, Q, 0, acc) \
     : pk->bm == 1 ? prod_acc_nq(pk, codes, n, w, Q, 1, acc) \
     : pk->bm == 2 ? prod_acc_nq(pk, codes, n, w, Q, 2, acc) \
                   : prod_acc_nq(pk, codes, n, w, Q, 3, acc))
    switch (nq) {
    case 1: PROD_AC(1); break;
    case 2: PROD_AC(2); break;
    case 3: PROD_AC(3); break;
    default: PROD_AC(4); break;
    }
#undef PROD_AC
}

#endif
