/* turboquant_prod_avx2.c — AVX2 table-dot row kernel for the (b-1)-bit MSE codes of
 * turboquant_prod (contract and reference in codecs/qjl.h, qjl.c). 8 codes of `bits` bits are
 * `bits` bytes; BMI2 pdep spreads them into 8 bytes, which index an 8-lane centroid register
 * through vpermps (bits <= 3); one FMA with the rotated query per 8 coordinates. */
#include <immintrin.h>
#include <string.h>

#include "codecs/qjl.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void vq_lutdot_rows_avx2(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                         size_t stride, int64_t n, float *out) {
    float cbp[8] = {0};
    memcpy(cbp, cb, sizeof(float) * (size_t)(1 << bits));
    const __m256 cbv = _mm256_loadu_ps(cbp);
    const uint64_t m8 = 0x0101010101010101ull * (uint64_t)((1u << bits) - 1u);
    const size_t g8 = (size_t)bits;            /* bytes per 8 codes */
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *p = src + (size_t)t * stride;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int j = 0;
        for (; j + 16 <= d; j += 16, p += 2 * g8) {
            uint64_t x = 0;
            memcpy(&x, p, 2 * g8);
            const __m256i i0 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)_pdep_u64(x, m8)));
            const __m256i i1 = _mm256_cvtepu8_epi32(
                _mm_cvtsi64_si128((long long)_pdep_u64(x >> (8 * bits), m8)));
            acc0 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(cbv, i0), _mm256_loadu_ps(q + j), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(cbv, i1), _mm256_loadu_ps(q + j + 8),
                                   acc1);
        }
        if (j < d) {
            uint64_t x = 0;
            memcpy(&x, p, g8);
            const __m256i i0 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)_pdep_u64(x, m8)));
            acc0 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(cbv, i0), _mm256_loadu_ps(q + j), acc0);
        }
        out[t] = hsum256(_mm256_add_ps(acc0, acc1));
    }
}
