/* polar_avx512.c — AVX-512 fused score of the PolarQuant codec (contract in codecs/polar.h,
 * scalar reference polar_token_score in polar.c). The 8 lanes of one pass are 8 coordinate
 * blocks of one token: one masked 64-bit gather fetches the 8 bit records (shifted per lane by
 * their bit offset), the 15 code fields are shifted out with constant positions, level-1 values
 * are gathered from the per-query table, levels 2..4 combine them with cos/sin of the centroids
 * looked up by vpermt2ps, and the radii (vq_sf16) are decoded in-register. */
#include <immintrin.h>
#include <string.h>

#include "codecs/polar.h"

/* vq_sf16 -> fp32 for 8 values (see vq_sf16_to_fp32). */
static inline __m256 sf16_to_ps(__m256i h) {
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    const __m256i e = _mm256_and_si256(_mm256_srli_epi32(h, 9), _mm256_set1_epi32(63));
    const __m256i m = _mm256_and_si256(h, _mm256_set1_epi32(511));
    const __m256i normal = _mm256_or_si256(
        sign, _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(96)), 23),
                              _mm256_slli_epi32(m, 14)));
    const __m256 sub = _mm256_or_ps(
        _mm256_mul_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(0x1.0p-39f)),
        _mm256_castsi256_ps(sign));
    const __mmask8 is_sub = _mm256_cmpeq_epi32_mask(e, _mm256_setzero_si256());
    return _mm256_mask_blend_ps(is_sub, _mm256_castsi256_ps(normal), sub);
}

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Per-call constants: field positions/widths inside a record and the cos/sin tables. */
struct polar_simd {
    int pos[15], wid[15];
    __m256 c_lo[VQ_POLAR_LEVELS], c_hi[VQ_POLAR_LEVELS];
    __m256 s_lo[VQ_POLAR_LEVELS], s_hi[VQ_POLAR_LEVELS];
};

static void polar_simd_init(const struct polar_impl *im, struct polar_simd *ps) {
    int p = 0, f = 0;
    for (int l = 0; l < VQ_POLAR_LEVELS; l++)
        for (int j = 0; j < (8 >> l); j++, f++) {
            ps->pos[f] = p;
            ps->wid[f] = im->b[l];
            p += im->b[l];
        }
    for (int l = 0; l < VQ_POLAR_LEVELS; l++) { /* level 1 tables only used when b1 <= 4 */
        ps->c_lo[l] = _mm256_loadu_ps(im->cs[l]);
        ps->c_hi[l] = _mm256_loadu_ps(im->cs[l] + 8);
        ps->s_lo[l] = _mm256_loadu_ps(im->sn[l]);
        ps->s_hi[l] = _mm256_loadu_ps(im->sn[l] + 8);
    }
}

/* Records of blocks k0 .. k0+7 (lanes beyond lm read as 0), shifted to bit 0. */
static inline __m512i polar_records(const uint8_t *ang, int k0, int B, __mmask8 lm) {
    const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    const __m512i bitoff = _mm512_mullo_epi64(_mm512_add_epi64(lane, _mm512_set1_epi64(k0)),
                                              _mm512_set1_epi64(B));
    const __m512i w = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), lm,
                                                  _mm512_srli_epi64(bitoff, 3), ang, 1);
    return _mm512_srlv_epi64(w, _mm512_and_si512(bitoff, _mm512_set1_epi64(7)));
}

static inline __m256i polar_field(__m512i w, const struct polar_simd *ps, int f) {
    return _mm512_cvtepi64_epi32(_mm512_and_si512(_mm512_srli_epi64(w, (unsigned)ps->pos[f]),
                                                  _mm512_set1_epi64((1 << ps->wid[f]) - 1)));
}

void vq_polar_score_avx512(const struct polar_impl *im, const float *T1, const uint8_t *codes,
                           size_t bb, int64_t n, float *scores) {
    const int B = im->rec_bits, nblk = im->nblk;
    const int L1 = (int)im->t1_cols;
    VQ_ASSERT(B + 7 <= 64);
    struct polar_simd ps;
    polar_simd_init(im, &ps);
    const __m256i lane32 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *s = codes + (size_t)t * bb;
        const uint8_t *ang = s + im->ang_off;
        __m256 total = _mm256_setzero_ps();
        for (int k0 = 0; k0 < nblk; k0 += 8) {
            const int nl = nblk - k0 < 8 ? nblk - k0 : 8;
            const __mmask8 lm = (__mmask8)((1u << nl) - 1u);
            const __m512i w = polar_records(ang, k0, B, lm);
            /* level 1: gather T1[(8 (k0 + lane) + j) L1 + code] */
            const __m256i rowbase = _mm256_mullo_epi32(
                _mm256_add_epi32(lane32, _mm256_set1_epi32(k0)), _mm256_set1_epi32(8 * L1));
            __m256 v[8];
            for (int j = 0; j < 8; j++) {
                const __m256i idx = _mm256_add_epi32(
                    _mm256_add_epi32(rowbase, polar_field(w, &ps, j)), _mm256_set1_epi32(j * L1));
                v[j] = _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), lm, idx, T1, 4);
            }
            int f = 8;
            for (int l = 1; l < VQ_POLAR_LEVELS; l++) {
                for (int j = 0; j < (8 >> l); j++, f++) {
                    const __m256i cd = polar_field(w, &ps, f);
                    const __m256 c = _mm256_permutex2var_ps(ps.c_lo[l], cd, ps.c_hi[l]);
                    const __m256 sn = _mm256_permutex2var_ps(ps.s_lo[l], cd, ps.s_hi[l]);
                    v[j] = _mm256_fmadd_ps(v[2 * j], c, _mm256_mul_ps(v[2 * j + 1], sn));
                }
            }
            const __m256 rad = sf16_to_ps(
                _mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(lm, s + 2 * k0)));
            total = _mm256_fmadd_ps(rad, v[0], total);
        }
        scores[t] = hsum256(total);
    }
}

void vq_polar_acc_avx512(const struct polar_impl *im, const uint8_t *codes, size_t bb, int64_t n,
                         const float *w, float *acc) {
    const int B = im->rec_bits, nblk = im->nblk;
    VQ_ASSERT(B + 7 <= 64);
    struct polar_simd ps;
    polar_simd_init(im, &ps);
    const int small1 = im->b[0] <= 4; /* level-1 cos/sin by vpermt2ps, else by gather */
    for (int64_t t = 0; t < n; t++) {
        if (w[t] == 0.0f) continue;
        const uint8_t *s = codes + (size_t)t * bb;
        const uint8_t *ang = s + im->ang_off;
        const __m256 wt = _mm256_set1_ps(w[t]);
        for (int k0 = 0; k0 < nblk; k0 += 8) {
            const int nl = nblk - k0 < 8 ? nblk - k0 : 8;
            const __mmask8 lm = (__mmask8)((1u << nl) - 1u);
            const __m512i rec = polar_records(ang, k0, B, lm);
            __m256 r[8], nr[8];
            r[0] = _mm256_mul_ps(
                wt, sf16_to_ps(_mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(lm, s + 2 * k0))));
            int base = 14;
            for (int l = VQ_POLAR_LEVELS - 1; l >= 1; l--) {
                const int cnt = 8 >> l;
                for (int j = 0; j < cnt; j++) {
                    const __m256i cd = polar_field(rec, &ps, base + j);
                    nr[2 * j] = _mm256_mul_ps(r[j],
                                              _mm256_permutex2var_ps(ps.c_lo[l], cd, ps.c_hi[l]));
                    nr[2 * j + 1] = _mm256_mul_ps(
                        r[j], _mm256_permutex2var_ps(ps.s_lo[l], cd, ps.s_hi[l]));
                }
                for (int j = 0; j < 2 * cnt; j++) r[j] = nr[j];
                base -= 2 * cnt;
            }
            for (int j = 0; j < 8; j++) {
                const __m256i cd = polar_field(rec, &ps, j);
                __m256 c, sn;
                if (small1) {
                    c = _mm256_permutex2var_ps(ps.c_lo[0], cd, ps.c_hi[0]);
                    sn = _mm256_permutex2var_ps(ps.s_lo[0], cd, ps.s_hi[0]);
                } else {
                    c = _mm256_i32gather_ps(im->cs[0], cd, 4);
                    sn = _mm256_i32gather_ps(im->sn[0], cd, 4);
                }
                float *a0 = acc + (size_t)(2 * j) * (size_t)nblk + k0;
                float *a1 = a0 + nblk;
                _mm256_mask_storeu_ps(a0, lm,
                                      _mm256_fmadd_ps(r[j], c, _mm256_maskz_loadu_ps(lm, a0)));
                _mm256_mask_storeu_ps(a1, lm,
                                      _mm256_fmadd_ps(r[j], sn, _mm256_maskz_loadu_ps(lm, a1)));
            }
        }
    }
}
