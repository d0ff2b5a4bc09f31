/* polar_avx2.c — AVX2 fused score and accumulate of the PolarQuant codec (contracts in
 * codecs/polar.h; scalar references polar_token_score / polar_accumulate in polar.c). Same
 * scheme as polar_avx512.c: the 8 lanes of one pass are 8 coordinate blocks of one token; two
 * masked 4-lane 64-bit gathers fetch the bit records, fields are shifted out with constant
 * positions and packed to 8 dwords, level-1 values / angles are gathered, 16-entry cos/sin
 * tables of levels >= 2 are read with two vpermps and a blend. */
#include <immintrin.h>
#include <string.h>

#include "codecs/polar.h"

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
    const __m256 is_sub = _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
    return _mm256_blendv_ps(_mm256_castsi256_ps(normal), sub, is_sub);
}

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

struct polar_simd2 {
    int pos[15], wid[15];
    __m256 c_lo[VQ_POLAR_LEVELS], c_hi[VQ_POLAR_LEVELS];
    __m256 s_lo[VQ_POLAR_LEVELS], s_hi[VQ_POLAR_LEVELS];
};

static void polar_simd2_init(const struct polar_impl *im, struct polar_simd2 *ps) {
    int p = 0, f = 0;
    for (int l = 0; l < VQ_POLAR_LEVELS; l++)
        for (int j = 0; j < (8 >> l); j++, f++) {
            ps->pos[f] = p;
            ps->wid[f] = im->b[l];
            p += im->b[l];
        }
    for (int l = 0; l < VQ_POLAR_LEVELS; l++) {
        ps->c_lo[l] = _mm256_loadu_ps(im->cs[l]);
        ps->c_hi[l] = _mm256_loadu_ps(im->cs[l] + 8);
        ps->s_lo[l] = _mm256_loadu_ps(im->sn[l]);
        ps->s_hi[l] = _mm256_loadu_ps(im->sn[l] + 8);
    }
}

/* Lane mask (all-ones dwords) for the first nl of 8 lanes. */
static inline __m256i lane_mask32(int nl) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(nl), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Records of blocks k0 .. k0+7 as two 4 x 64-bit vectors, shifted to bit 0 (masked lanes 0). */
static inline void polar_records2(const uint8_t *ang, int k0, int B, int nl, __m256i *lo,
                                  __m256i *hi) {
    const __m256i l4 = _mm256_setr_epi64x(0, 1, 2, 3);
    const __m256i boff0 = _mm256_mul_epu32(_mm256_add_epi64(l4, _mm256_set1_epi64x(k0)),
                                           _mm256_set1_epi64x(B));
    const __m256i boff1 = _mm256_mul_epu32(_mm256_add_epi64(l4, _mm256_set1_epi64x(k0 + 4)),
                                           _mm256_set1_epi64x(B));
    const __m256i m0 = _mm256_cmpgt_epi64(_mm256_set1_epi64x(nl), l4);
    const __m256i m1 = _mm256_cmpgt_epi64(_mm256_set1_epi64x(nl - 4), l4);
    const long long *base = (const long long *)(const void *)ang;
    __m256i w0 = _mm256_mask_i64gather_epi64(_mm256_setzero_si256(), base,
                                             _mm256_srli_epi64(boff0, 3), m0, 1);
    __m256i w1 = _mm256_mask_i64gather_epi64(_mm256_setzero_si256(), base,
                                             _mm256_srli_epi64(boff1, 3), m1, 1);
    const __m256i seven = _mm256_set1_epi64x(7);
    *lo = _mm256_srlv_epi64(w0, _mm256_and_si256(boff0, seven));
    *hi = _mm256_srlv_epi64(w1, _mm256_and_si256(boff1, seven));
}

/* Field f of the 8 records as 8 dwords (lane order = block order). */
static inline __m256i polar_field2(__m256i lo, __m256i hi, const struct polar_simd2 *ps, int f) {
    const __m256i mask = _mm256_set1_epi64x((1 << ps->wid[f]) - 1);
    const __m128i sh = _mm_cvtsi32_si128(ps->pos[f]);
    const __m256i a = _mm256_and_si256(_mm256_srl_epi64(lo, sh), mask);
    const __m256i b = _mm256_and_si256(_mm256_srl_epi64(hi, sh), mask);
    const __m256 packed = _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0x88);
    return _mm256_permute4x64_epi64(_mm256_castps_si256(packed), 0xD8);
}

/* 16-entry table lookup: t[idx] for idx in 0..15. */
static inline __m256 lut16(__m256 tlo, __m256 thi, __m256i idx) {
    const __m256 a = _mm256_permutevar8x32_ps(tlo, idx);
    const __m256 b = _mm256_permutevar8x32_ps(thi, idx);
    const __m256 hi = _mm256_castsi256_ps(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7)));
    return _mm256_blendv_ps(a, b, hi);
}

static inline __m256 radii(const uint8_t *s, int k0, int nl) {
    uint16_t r[8] = {0};
    memcpy(r, s + 2 * k0, 2 * (size_t)nl);
    return sf16_to_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)r)));
}

void vq_polar_score_avx2(const struct polar_impl *im, const float *T1, const uint8_t *codes,
                         size_t bb, int64_t n, float *scores) {
    const int B = im->rec_bits, nblk = im->nblk;
    const int L1 = (int)im->t1_cols;
    VQ_ASSERT(B + 7 <= 64);
    struct polar_simd2 ps;
    polar_simd2_init(im, &ps);
    const __m256i lane32 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *s = codes + (size_t)t * bb;
        const uint8_t *ang = s + im->ang_off;
        __m256 total = _mm256_setzero_ps();
        for (int k0 = 0; k0 < nblk; k0 += 8) {
            const int nl = nblk - k0 < 8 ? nblk - k0 : 8;
            const __m256 lm = _mm256_castsi256_ps(lane_mask32(nl));
            __m256i lo, hi;
            polar_records2(ang, k0, B, nl, &lo, &hi);
            const __m256i rowbase = _mm256_mullo_epi32(
                _mm256_add_epi32(lane32, _mm256_set1_epi32(k0)), _mm256_set1_epi32(8 * L1));
            __m256 v[8];
            for (int j = 0; j < 8; j++) {
                const __m256i idx = _mm256_add_epi32(
                    _mm256_add_epi32(rowbase, polar_field2(lo, hi, &ps, j)),
                    _mm256_set1_epi32(j * L1));
                v[j] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), T1, idx, lm, 4);
            }
            int f = 8;
            for (int l = 1; l < VQ_POLAR_LEVELS; l++) {
                for (int j = 0; j < (8 >> l); j++, f++) {
                    const __m256i cd = polar_field2(lo, hi, &ps, f);
                    const __m256 c = lut16(ps.c_lo[l], ps.c_hi[l], cd);
                    const __m256 sn = lut16(ps.s_lo[l], ps.s_hi[l], cd);
                    v[j] = _mm256_fmadd_ps(v[2 * j], c, _mm256_mul_ps(v[2 * j + 1], sn));
                }
            }
            total = _mm256_fmadd_ps(radii(s, k0, nl), v[0], total);
        }
        scores[t] = hsum256(total);
    }
}

void vq_polar_acc_avx2(const struct polar_impl *im, const uint8_t *codes, size_t bb, int64_t n,
                       const float *w, float *acc) {
    const int B = im->rec_bits, nblk = im->nblk;
    VQ_ASSERT(B + 7 <= 64);
    struct polar_simd2 ps;
    polar_simd2_init(im, &ps);
    const int small1 = im->b[0] <= 4;
    for (int64_t t = 0; t < n; t++) {
        if (w[t] == 0.0f) continue;
        const uint8_t *s = codes + (size_t)t * bb;
        const uint8_t *ang = s + im->ang_off;
        const __m256 wt = _mm256_set1_ps(w[t]);
        for (int k0 = 0; k0 < nblk; k0 += 8) {
            const int nl = nblk - k0 < 8 ? nblk - k0 : 8;
            const __m256i lmi = lane_mask32(nl);
            __m256i lo, hi;
            polar_records2(ang, k0, B, nl, &lo, &hi);
            __m256 r[8], nr[8];
            r[0] = _mm256_mul_ps(wt, radii(s, k0, nl));
            int base = 14;
            for (int l = VQ_POLAR_LEVELS - 1; l >= 1; l--) {
                const int cnt = 8 >> l;
                for (int j = 0; j < cnt; j++) {
                    const __m256i cd = polar_field2(lo, hi, &ps, base + j);
                    nr[2 * j] = _mm256_mul_ps(r[j], lut16(ps.c_lo[l], ps.c_hi[l], cd));
                    nr[2 * j + 1] = _mm256_mul_ps(r[j], lut16(ps.s_lo[l], ps.s_hi[l], cd));
                }
                for (int j = 0; j < 2 * cnt; j++) r[j] = nr[j];
                base -= 2 * cnt;
            }
            for (int j = 0; j < 8; j++) {
                const __m256i cd = polar_field2(lo, hi, &ps, j);
                __m256 c, sn;
                if (small1) {
                    c = lut16(ps.c_lo[0], ps.c_hi[0], cd);
                    sn = lut16(ps.s_lo[0], ps.s_hi[0], cd);
                } else {
                    c = _mm256_i32gather_ps(im->cs[0], cd, 4);
                    sn = _mm256_i32gather_ps(im->sn[0], cd, 4);
                }
                float *a0 = acc + (size_t)(2 * j) * (size_t)nblk + k0;
                float *a1 = a0 + nblk;
                _mm256_maskstore_ps(a0, lmi, _mm256_fmadd_ps(r[j], c, _mm256_maskload_ps(a0, lmi)));
                _mm256_maskstore_ps(a1, lmi,
                                    _mm256_fmadd_ps(r[j], sn, _mm256_maskload_ps(a1, lmi)));
            }
        }
    }
}
