/*
 * turboquant_i16_avx512icl.c — the integer accumulate of turboquant_mse 3-bit values (the 2+1
 * plane layout) on AVX-512 with VNNI and VBMI (Ice Lake and later; contract and reference
 * vq_tq_accumulate_i16_ref in codecs/turboquant_kernels.h, docs/ALGORITHMS.md §9.10).
 *
 * Per chunk of 16 tokens each query's weights w_t * scale_t become int16 (<= 32767, by the
 * chunk's largest), the levels int16 of <= 4095. Per 64 coordinates of a token,
 * VPMULTISHIFTQB pulls every code into its own byte (plane B's bit lands above plane A's,
 * merged by VPTERNLOGD; bits above the code are left, the 32-entry level table repeats with the
 * code period). Two tokens are paired per coordinate by VPERMI2B (code of token t in word 2i,
 * token t+1 in word 2i+1, 16 coordinates per vector), VPERMW looks the int16 levels up, and
 * one VPDPWSSD per query adds lq_t * uq_t + lq_t+1 * uq_t+1 to the coordinate's int32 lane.
 * 4 vectors of 16 lanes hold the 64 coordinates of each query; their sums go to float once
 * per chunk, straight into the chunk-interleaved accumulator.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codecs/arch/x86/stream_pf.h"
#include "codecs/arch/x86/tq_x86.h"
#include "codecs/arch/x86/vnni_x86.h"
#include "codecs/turboquant_kernels.h"

#define VQ_INLINE static inline __attribute__((always_inline))

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

/* acc[0 .. 7] and acc[16 .. 23] as one vector (lanes 0-7, 8-15), and back. */
VQ_INLINE __m512 ld_split(const float *a) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(a + 16),
                              1);
}
VQ_INLINE void st_split(float *a, __m512 v) {
    _mm256_storeu_ps(a, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(a + 16, _mm512_extractf32x8_ps(v, 1));
}

VQ_INLINE void acc_i16(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *const *w,
                       const int NQ, float *const *acc, const int BA, const int BB) {
    const int d = k->d, rl = k->rec, ng = d / 64;
    const __m512i qa = _mm512_loadu_si512((const void *)k->i16_qa);
    const __m512i ca = _mm512_loadu_si512((const void *)k->i16_ca);
    const __m512i cb = _mm512_loadu_si512((const void *)k->i16_cb);
    const __m512i tab = _mm512_loadu_si512((const void *)k->lq);
    __m512i pair[4];
    for (int g = 0; g < 4; g++) pair[g] = _mm512_loadu_si512((const void *)k->i16_pair[g]);
    const __m512 fmax = _mm512_set1_ps(FLT_MAX);
    /* The accumulators in the lanes of the sums (vector g of 64-group gi: the floats at
     * 32g + i (i < 8) and 32g + 16 + i - 8 past the group's base), read once and written back
     * once: each chunk adds its products to them in the same order as to acc itself. */
    __m512 F[4][16][4];
    for (int j = 0; j < NQ; j++)
        for (int gi = 0; gi < ng; gi++)
            for (int g = 0; g < 4; g++)
                F[j][gi][g] = ld_split(acc[j] + (gi >> 1) * VQ_TQ_CHUNK + 8 * (gi & 1) + 32 * g);
    for (int64_t t0 = 0; t0 < n; t0 += VQ_TQ_I16_CHUNK) {
        const int m = n - t0 < VQ_TQ_I16_CHUNK ? (int)(n - t0) : VQ_TQ_I16_CHUNK;
        const uint8_t *r0 = codes + t0 * rl;
        const __mmask16 m0 = m >= 16 ? 0xFFFF : (__mmask16)((1u << m) - 1u);
        const __m512 s0 = vq_tq_scales16(r0, rl, m0);
        int16_t uq[4][VQ_TQ_I16_CHUNK] __attribute__((aligned(32)));
        float f[4] = {0};
        int live[4];
        for (int j = 0; j < NQ; j++) {
            const __m512 u0 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, w[j] + t0), s0);
            const __m512 a0 = _mm512_abs_ps(u0);
            const int bad = _mm512_cmp_ps_mask(a0, fmax, _CMP_NLE_UQ) != 0;
            const float mx = _mm512_reduce_max_ps(a0);
            live[j] = !bad && mx != 0.0f;
            if (!live[j]) {
                memset(uq[j], 0, sizeof uq[j]);
                if (bad) /* acc += NaN at every coordinate */
                    for (int gi = 0; gi < ng; gi++)
                        for (int g = 0; g < 4; g++)
                            F[j][gi][g] = _mm512_add_ps(F[j][gi][g], _mm512_set1_ps(NAN));
                continue;
            }
            const __m512 inv = _mm512_set1_ps((float)VQ_TQ_I16_WMAX / mx);
            f[j] = mx / (float)VQ_TQ_I16_WMAX * k->dl;
            _mm256_store_si256((__m256i *)(void *)uq[j],
                               _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(u0, inv))));
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
                    const __m512i lv = _mm512_permutexvar_epi16(
                        _mm512_permutex2var_epi8(ka, pair[g], kb), tab);
                    for (int j = 0; j < NQ; j++) S[j][g] = vq_dpwssd(S[j][g], lv, wp[j]);
                }
            }
            for (int j = 0; j < NQ; j++) {
                if (!live[j]) continue;
                const __m512 fv = _mm512_set1_ps(f[j]);
                for (int g = 0; g < 4; g++)
                    F[j][gi][g] = _mm512_add_ps(F[j][gi][g],
                                                _mm512_mul_ps(_mm512_cvtepi32_ps(S[j][g]), fv));
            }
        }
    }
    for (int j = 0; j < NQ; j++)
        for (int gi = 0; gi < ng; gi++)
            for (int g = 0; g < 4; g++)
                st_split(acc[j] + (gi >> 1) * VQ_TQ_CHUNK + 8 * (gi & 1) + 32 * g, F[j][gi][g]);
}

/* The 2+1 layout (turboquant_mse 3 bits). acc_i16 is written for planes of 1, 2, 4 bits with
 * a 0- or 1-bit plane B, but one 4-bit plane ran at 0.97x and one 2-bit plane at 1.09x the
 * float kernels (3 queries, d = 64, docs/ALGORITHMS.md §9.10): only 2+1 gains. */
VQ_INLINE void acc_lay(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *const *w,
                       const int NQ, float *const *acc) {
    acc_i16(k, codes, n, w, NQ, acc, 2, 1);
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
