/*
 * turboquant_i16_avx512icl.c — the integer multi-query accumulate of turboquant_mse /
 * turboquant_rvq values on AVX-512 with VNNI and VBMI (Ice Lake and later; contract and
 * reference vq_tq_accumulate_i16_ref in codecs/turboquant_kernels.h, docs/ALGORITHMS.md §9.10).
 *
 * Per chunk of 32 tokens each query's weights w_t * scale_t become int16 (<= 8191, by the
 * chunk's largest); per 64 coordinates of a token, VPMULTISHIFTQB pulls every code into its
 * own byte (plane B's bit lands above plane A's, merged by VPTERNLOGD; bits above the code are
 * left, the 32-entry level table repeats with the code period). Two tokens are paired per
 * coordinate by VPERMI2B (code of token t in word 2i, token t+1 in word 2i+1, 16 coordinates
 * per vector), VPERMW looks the int16 levels up, and one VPDPWSSD per query adds
 * lq_t * uq_t + lq_t+1 * uq_t+1 to the coordinate's int32 lane. 4 vectors of 16 lanes hold the
 * 64 coordinates of each query; their sums go to float once per chunk.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/turboquant_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* Multishift controls and qword sources of one plane of `bits` (1, 2, 4) per code, result
 * shifted up by `up` bits: byte k of qword lane L takes coordinate 8L + k. */
static void plane_ctl(int bits, int up, __m512i *qsrc, __m512i *ctl) {
    int64_t q[8];
    uint8_t c[64];
    for (int L = 0; L < 8; L++) {
        q[L] = 8 * L * bits / 64;
        for (int k = 0; k < 8; k++) c[8 * L + k] = (uint8_t)(((8 * L + k) * bits - up) & 63);
    }
    *qsrc = _mm512_loadu_si512((const void *)q);
    *ctl = _mm512_loadu_si512((const void *)c);
}

/* Code bytes of the 64 coordinates at plane offsets pa / pb (byte c: coordinate c's code in
 * its low BA + BB bits, higher bits arbitrary). */
VQ_INLINE __m512i code_bytes(const uint8_t *pa, const uint8_t *pb, __m512i qa, __m512i ca,
                             __m512i cb, int BA, int BB) {
    __m512i a;
    if (BA == 4) a = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)pa));
    else a = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)pa));
    a = _mm512_multishift_epi64_epi8(ca, _mm512_permutexvar_epi64(qa, a));
    if (!BB) return a;
    uint64_t bw;
    memcpy(&bw, pb, sizeof bw);
    const __m512i b = _mm512_multishift_epi64_epi8(cb, _mm512_set1_epi64((long long)bw));
    /* (a & low) | (b & ~low), low = the BA low bits */
    return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8((char)((1 << BA) - 1)), 0xE4);
}

VQ_INLINE void acc_i16(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                       const float *const *w, const int NQ, float *const *acc, const int BA,
                       const int BB) {
    const int d = k->d, rl = k->rec, ng = d / 64;
    float af[4][1024];
    for (int j = 0; j < NQ; j++) memset(af[j], 0, (size_t)d * sizeof(float));
    __m512i qa, ca, qb, cb = _mm512_setzero_si512();
    plane_ctl(BA, 0, &qa, &ca);
    if (BB) plane_ctl(BB, BA, &qb, &cb); /* a 1-bit plane B is broadcast: qb not needed */
    const __m512i tab = _mm512_loadu_si512((const void *)k->lq);
    __m512i pair[4];
    {
        uint8_t ix[4][64];
        for (int g = 0; g < 4; g++)
            for (int i = 0; i < 16; i++) {
                ix[g][4 * i] = ix[g][4 * i + 1] = (uint8_t)(16 * g + i);
                ix[g][4 * i + 2] = ix[g][4 * i + 3] = (uint8_t)(64 + 16 * g + i);
            }
        for (int g = 0; g < 4; g++) pair[g] = _mm512_loadu_si512((const void *)ix[g]);
    }
    const __m512 fmax = _mm512_set1_ps(FLT_MAX);
    for (int64_t t0 = 0; t0 < n; t0 += VQ_TQ_I16_CHUNK) {
        const int m = n - t0 < VQ_TQ_I16_CHUNK ? (int)(n - t0) : VQ_TQ_I16_CHUNK;
        const uint8_t *r0 = codes + t0 * rl;
        float s[VQ_TQ_I16_CHUNK];
        for (int t = 0; t < m; t++) s[t] = vq_tq_sf16(r0 + t * rl);
        for (int t = m; t < VQ_TQ_I16_CHUNK; t++) s[t] = 0.0f;
        const __mmask16 m0 = m >= 16 ? 0xFFFF : (__mmask16)((1u << m) - 1u);
        const __mmask16 m1 = m <= 16 ? 0 : m >= 32 ? 0xFFFF : (__mmask16)((1u << (m - 16)) - 1u);
        int16_t uq[4][VQ_TQ_I16_CHUNK] __attribute__((aligned(64)));
        float f[4];
        int live[4];
        for (int j = 0; j < NQ; j++) {
            const __m512 u0 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, w[j] + t0),
                                            _mm512_loadu_ps(s));
            const __m512 u1 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, w[j] + t0 + 16),
                                            _mm512_loadu_ps(s + 16));
            const __m512 a0 = _mm512_abs_ps(u0), a1 = _mm512_abs_ps(u1);
            const int bad = (_mm512_cmp_ps_mask(a0, fmax, _CMP_NLE_UQ) |
                             _mm512_cmp_ps_mask(a1, fmax, _CMP_NLE_UQ)) != 0;
            const float mx = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
            live[j] = 0;
            if (bad) {
                for (int c = 0; c < d; c++) af[j][c] = NAN;
                memset(uq[j], 0, sizeof uq[j]);
                continue;
            }
            if (mx == 0.0f) {
                memset(uq[j], 0, sizeof uq[j]);
                continue;
            }
            live[j] = 1;
            const __m512 inv = _mm512_set1_ps((float)VQ_TQ_I16_MAX / mx);
            f[j] = mx / (float)VQ_TQ_I16_MAX * k->dl;
            _mm256_store_si256((__m256i *)(void *)uq[j],
                               _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(u0, inv))));
            _mm256_store_si256((__m256i *)(void *)(uq[j] + 16),
                               _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(u1, inv))));
        }
        for (int gi = 0; gi < ng; gi++) {
            const int oa = k->off_a + gi * 8 * BA, ob = k->off_b + gi * 8 * BB;
            __m512i S[4][4];
            for (int j = 0; j < NQ; j++)
                for (int g = 0; g < 4; g++) S[j][g] = _mm512_setzero_si512();
            for (int t = 0; t < m; t += 2) {
                const uint8_t *ra = r0 + t * rl, *rb = t + 1 < m ? ra + rl : ra; /* weight 0 */
                vq_pf_span(ra + VQ_PF_RECS * (size_t)rl, 2 * (size_t)rl);
                const __m512i ka = code_bytes(ra + oa, ra + ob, qa, ca, cb, BA, BB);
                const __m512i kb = code_bytes(rb + oa, rb + ob, qa, ca, cb, BA, BB);
                __m512i wp[4];
                for (int j = 0; j < NQ; j++) {
                    int32_t p;
                    memcpy(&p, uq[j] + t, sizeof p);
                    wp[j] = _mm512_set1_epi32(p);
                }
                for (int g = 0; g < 4; g++) {
                    const __m512i lv =
                        _mm512_permutexvar_epi16(_mm512_permutex2var_epi8(ka, pair[g], kb), tab);
                    for (int j = 0; j < NQ; j++) S[j][g] = _mm512_dpwssd_epi32(S[j][g], lv, wp[j]);
                }
            }
            for (int j = 0; j < NQ; j++) {
                if (!live[j]) continue;
                const __m512 fv = _mm512_set1_ps(f[j]);
                float *a = af[j] + 64 * gi;
                for (int g = 0; g < 4; g++)
                    _mm512_storeu_ps(a + 16 * g,
                                     _mm512_add_ps(_mm512_loadu_ps(a + 16 * g),
                                                   _mm512_mul_ps(_mm512_cvtepi32_ps(S[j][g]), fv)));
            }
        }
    }
    for (int j = 0; j < NQ; j++)
        for (int c = 0; c < d; c++) acc[j][vq_tq_pos(c)] += af[j][c];
}

VQ_INLINE void acc_lay(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                       const float *const *w, const int NQ, float *const *acc) {
    switch (k->bits_a * 4 + k->bits_b) {
    case 16: acc_i16(k, codes, n, w, NQ, acc, 4, 0); break;
    case 9: acc_i16(k, codes, n, w, NQ, acc, 2, 1); break;
    default: acc_i16(k, codes, n, w, NQ, acc, 2, 0); break;
    }
}

void vq_tq_accumulate_i16_avx512icl(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                    const float *const *w, int nq, float *const *acc) {
    switch (nq) {
    case 1: acc_lay(k, codes, n, w, 1, acc); break;
    case 2: acc_lay(k, codes, n, w, 2, acc); break;
    case 3: acc_lay(k, codes, n, w, 3, acc); break;
    default: acc_lay(k, codes, n, w, 4, acc); break;
    }
}

void vq_tq_accumulate1_i16_avx512icl(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                     const float *w, float *acc) {
    acc_lay(k, codes, n, &w, 1, &acc);
}
