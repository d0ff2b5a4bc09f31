/* turboquant_prod_avx512.c — AVX-512 table-dot row kernel for the (b-1)-bit MSE codes of
 * turboquant_prod (contract and reference in codecs/qjl.h, qjl.c). 16 codes of `bits` bits
 * are 2*bits bytes; BMI2 pdep spreads them into 16 bytes, which index a 16-lane centroid
 * register through vpermps; one FMA with the rotated query per 16 coordinates. */
#include <immintrin.h>
#include <string.h>

#include "codecs/qjl.h"

void vq_lutdot_rows_avx512(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                           size_t stride, int64_t n, float *out) {
    float cbp[16] = {0};
    memcpy(cbp, cb, sizeof(float) * (size_t)(1 << bits));
    const __m512 cbv = _mm512_loadu_ps(cbp);
    const uint64_t m8 = 0x0101010101010101ull * (uint64_t)((1u << bits) - 1u);
    const size_t g16 = 2 * (size_t)bits;       /* bytes per 16 codes */
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *p = src + (size_t)t * stride;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        int j = 0;
        for (; j + 32 <= d; j += 32, p += 2 * g16) {
            uint64_t x0 = 0, x1 = 0;
            memcpy(&x0, p, g16);
            memcpy(&x1, p + g16, g16);
            const __m128i i0 = _mm_set_epi64x((long long)_pdep_u64(x0 >> (8 * bits), m8),
                                              (long long)_pdep_u64(x0, m8));
            const __m128i i1 = _mm_set_epi64x((long long)_pdep_u64(x1 >> (8 * bits), m8),
                                              (long long)_pdep_u64(x1, m8));
            const __m512 v0 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(i0), cbv);
            const __m512 v1 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(i1), cbv);
            acc0 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(q + j), acc0);
            acc1 = _mm512_fmadd_ps(v1, _mm512_loadu_ps(q + j + 16), acc1);
        }
        for (; j + 16 <= d; j += 16, p += g16) {
            uint64_t x0 = 0;
            memcpy(&x0, p, g16);
            const __m128i i0 = _mm_set_epi64x((long long)_pdep_u64(x0 >> (8 * bits), m8),
                                              (long long)_pdep_u64(x0, m8));
            const __m512 v0 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(i0), cbv);
            acc0 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(q + j), acc0);
        }
        if (j < d) {   /* d % 16 == 8: bits bytes hold the last 8 codes */
            uint64_t x0 = 0;
            memcpy(&x0, p, (size_t)bits);
            const __m128i i0 = _mm_cvtsi64_si128((long long)_pdep_u64(x0, m8));
            const __m512 v0 = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(i0), cbv);
            acc1 = _mm512_fmadd_ps(v0, _mm512_maskz_loadu_ps((__mmask16)0xff, q + j), acc1);
        }
        out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    }
}
