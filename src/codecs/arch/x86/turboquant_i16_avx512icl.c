/*
 * turboquant_i16_avx512icl.c — the integer accumulate of turboquant_mse 3-bit values (the 2+1
 * plane layout) on AVX-512 with VNNI and VBMI (Ice Lake and later; contract and reference
 * vq_tq_accumulate_i16_ref in codecs/turboquant_kernels.h, docs/ALGORITHMS.md §9.10).
 *
 * Per chunk of 16 tokens each query's weights w_t * scale_t become int16 (<= 32767, by the
 * chunk's largest; the next chunk's are prepared before this chunk's products), the levels
 * int16 of <= 4095. Per 64 coordinates of a token, the planes are broadcast by their loads
 * and VPMULTISHIFTQB pulls every code into its own byte (plane B's bit lands above plane A's,
 * merged by VPTERNLOGD; bits above the code are left, the 32-entry level table repeats with
 * the code period). Two tokens are paired per coordinate by VPERMI2B (code of token t in word
 * 2i, token t+1 in word 2i+1, 16 coordinates per vector), VPERMW looks the int16 levels up,
 * and one VPDPWSSD per query adds lq_t * uq_t + lq_t+1 * uq_t+1 to the coordinate's int32
 * lane. 4 vectors of 16 lanes hold the 64 coordinates of each query; their sums go to float
 * once per chunk, straight into the chunk-interleaved accumulator. Written for the 2+1 layout
 * only: the same scheme on one 4-bit plane ran at 0.97x and on one 2-bit plane at 1.09x the
 * float kernels (3 queries, d = 64, docs/ALGORITHMS.md §9.10).
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

/* Records ahead that the kernel asks for: its 26-byte records (d = 64) go by faster than the
 * float kernels' and VQ_PF_RECS (64) was too close. bench_attn_step 8192 9 1, kv3:
 * 64 -> 7.67-7.82 ms, 96 -> 7.49-7.70, 128 -> 7.56-7.67, 192 -> 7.55-7.81, 256 -> 7.70-7.94. */
#define VQ_PF_RECS_I16 128

/* Code bytes of the 64 coordinates of a 2+1 record at plane offsets pa / pb: byte P(c)
 * (turboquant_common.c) holds coordinate c's code in its low 3 bits, higher bits arbitrary.
 * Plane A's 16 bytes are broadcast to the 128-bit lanes and plane B's 8 to the qwords by the
 * loads themselves, so each plane costs one VPMULTISHIFTQB on the shuffle port. */
VQ_INLINE __m512i code_bytes(const uint8_t *pa, const uint8_t *pb, __m512i ca, __m512i cb) {
    const __m512i a = _mm512_multishift_epi64_epi8(
        ca, _mm512_broadcast_i64x2(_mm_loadu_si128((const __m128i *)(const void *)pa)));
    long long bw;
    memcpy(&bw, pb, sizeof bw);
    const __m512i b = _mm512_multishift_epi64_epi8(cb, _mm512_set1_epi64(bw));
    /* (a & low) | (b & ~low), low = plane A's 2 bits */
    return _mm512_ternarylogic_epi32(a, b, _mm512_set1_epi8(3), 0xE4);
}

/* The largest lane of each of a[0 .. NQ-1] (NQ <= 4; lanes >= 0), in all four lanes of
 * 128-bit quarter j of the result: a transpose-reduction (6 shuffles, 5 VMAXPS) instead of NQ
 * reductions. Exact for finite lanes; a NaN lane gives an unspecified quarter (the caller
 * tests finiteness apart). */
VQ_INLINE __m512 max4q(const __m512 *a, const int NQ) {
    const __m512 z = _mm512_setzero_ps();
    const __m512 A = a[0], B = NQ > 1 ? a[1] : z, C = NQ > 2 ? a[2] : z, D = NQ > 3 ? a[3] : z;
    /* quarters (A0 v A2, A1 v A3, B0 v B2, B1 v B3), the same for C, D */
    const __m512 ab = _mm512_max_ps(_mm512_shuffle_f32x4(A, B, 0x44),
                                    _mm512_shuffle_f32x4(A, B, 0xEE));
    const __m512 cd = _mm512_max_ps(_mm512_shuffle_f32x4(C, D, 0x44),
                                    _mm512_shuffle_f32x4(C, D, 0xEE));
    /* quarter j: vector j's four partial maxima */
    __m512 x = _mm512_max_ps(_mm512_shuffle_f32x4(ab, cd, 0x88),
                             _mm512_shuffle_f32x4(ab, cd, 0xDD));
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4E));
    return _mm512_max_ps(x, _mm512_permute_ps(x, 0xB1));
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

/* One chunk's integer weights, per query j: uq[j] (zero past the chunk's tokens and for a
 * chunk that adds nothing), the float factor f[j] of its sums, live[j] (the chunk adds its
 * sums), bad[j] (a non-finite weight: the query's sums become NaN). */
struct i16_prep {
    int16_t uq[4][VQ_TQ_I16_CHUNK] __attribute__((aligned(32)));
    float f[4];
    int live[4], bad[4];
};

/* Prepares the chunk of tokens [t0, t0 + 16) of n (vq_tq_accumulate_i16_ref's contract):
 * all queries' maxima at once (max4q) and one VDIVPS for their factors, the same values as
 * per query (a max is exact, IEEE division is correctly rounded). */
VQ_INLINE void prep_chunk(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                          const float *const *w, const int NQ, int64_t t0, struct i16_prep *P) {
    const int m = n - t0 < VQ_TQ_I16_CHUNK ? (int)(n - t0) : VQ_TQ_I16_CHUNK;
    const __mmask16 m0 = m >= 16 ? 0xFFFF : (__mmask16)((1u << m) - 1u);
    const __m512 s0 = vq_tq_scales16(codes + t0 * k->rec, k->rec, m0);
    __m512 u0[4], a0[4];
    for (int j = 0; j < NQ; j++) {
        u0[j] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, w[j] + t0), s0);
        a0[j] = _mm512_abs_ps(u0[j]);
    }
    float xs[16] __attribute__((aligned(64))), is[16] __attribute__((aligned(64)));
    const __m512 X = max4q(a0, NQ), wmax = _mm512_set1_ps((float)VQ_TQ_I16_WMAX);
    _mm512_store_ps(xs, X);
    _mm512_store_ps(is, _mm512_div_ps(wmax, X));
    for (int j = 0; j < NQ; j++) {
        const float mx = xs[4 * j];
        P->bad[j] = _mm512_cmp_ps_mask(a0[j], _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ) != 0;
        P->live[j] = !P->bad[j] && mx != 0.0f;
        if (!P->live[j]) {
            memset(P->uq[j], 0, sizeof P->uq[j]);
            continue;
        }
        P->f[j] = mx / (float)VQ_TQ_I16_WMAX * k->dl;
        _mm256_store_si256((__m256i *)(void *)P->uq[j],
                           _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(
                               _mm512_mul_ps(u0[j], _mm512_set1_ps(is[4 * j])))));
    }
}

VQ_INLINE void acc_i16(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *const *w,
                       const int NQ, float *const *acc) {
    const int d = k->d, rl = k->rec, ng = d / 64;
    const __m512i ca = _mm512_loadu_si512((const void *)k->i16_ca);
    const __m512i cb = _mm512_loadu_si512((const void *)k->i16_cb);
    const __m512i tab = _mm512_loadu_si512((const void *)k->lq);
    __m512i pair[4];
    for (int g = 0; g < 4; g++) pair[g] = _mm512_loadu_si512((const void *)k->i16_pair[g]);
    /* The accumulators in the lanes of the sums (vector g of 64-group gi: the floats at
     * 32g + i (i < 8) and 32g + 16 + i - 8 past the group's base), read once and written back
     * once: each chunk adds its products to them in the same order as to acc itself. */
    __m512 F[4][16][4];
    for (int j = 0; j < NQ; j++)
        for (int gi = 0; gi < ng; gi++)
            for (int g = 0; g < 4; g++)
                F[j][gi][g] = ld_split(acc[j] + (gi >> 1) * VQ_TQ_CHUNK + 8 * (gi & 1) + 32 * g);
    /* chunk c + 1's weights are prepared before chunk c's products, so that the latency of
     * their chain (maxima, division, conversion) hides behind chunk c's work */
    struct i16_prep P[2];
    prep_chunk(k, codes, n, w, NQ, 0, &P[0]);
    for (int64_t t0 = 0, c = 0; t0 < n; t0 += VQ_TQ_I16_CHUNK, c ^= 1) {
        const int m = n - t0 < VQ_TQ_I16_CHUNK ? (int)(n - t0) : VQ_TQ_I16_CHUNK;
        const uint8_t *r0 = codes + t0 * rl;
        if (t0 + VQ_TQ_I16_CHUNK < n)
            prep_chunk(k, codes, n, w, NQ, t0 + VQ_TQ_I16_CHUNK, &P[c ^ 1]);
        const struct i16_prep *cp = &P[c];
        const int16_t(*uq)[VQ_TQ_I16_CHUNK] = cp->uq;
        for (int j = 0; j < NQ; j++)
            if (cp->bad[j]) /* acc += NaN at every coordinate */
                for (int gi = 0; gi < ng; gi++)
                    for (int g = 0; g < 4; g++)
                        F[j][gi][g] = _mm512_add_ps(F[j][gi][g], _mm512_set1_ps(NAN));
        for (int gi = 0; gi < ng; gi++) {
            const int oa = k->off_a + gi * 16, ob = k->off_b + gi * 8; /* 2 and 1 bits */
            __m512i S[4][4];
            for (int j = 0; j < NQ; j++)
                for (int g = 0; g < 4; g++) S[j][g] = _mm512_setzero_si512();
            for (int t = 0; t < m; t += 2) {
                const uint8_t *ra = r0 + t * rl, *rb = t + 1 < m ? ra + rl : ra; /* weight 0 */
                vq_pf_span(ra + VQ_PF_RECS_I16 * (size_t)rl, 2 * (size_t)rl);
                const __m512i ka = code_bytes(ra + oa, ra + ob, ca, cb);
                const __m512i kb = code_bytes(rb + oa, rb + ob, ca, cb);
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
                if (!cp->live[j]) continue;
                const __m512 fv = _mm512_set1_ps(cp->f[j]);
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

void vq_tq_accumulate_i16_avx512icl(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                    const float *const *w, int nq, float *const *acc) {
    switch (nq) {
    case 1: acc_i16(k, codes, n, w, 1, acc); break;
    case 2: acc_i16(k, codes, n, w, 2, acc); break;
    case 3: acc_i16(k, codes, n, w, 3, acc); break;
    default: acc_i16(k, codes, n, w, 4, acc); break;
    }
}

void vq_tq_accumulate1_i16_avx512icl(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                     const float *w, float *acc) {
    acc_i16(k, codes, n, &w, 1, &acc);
}
