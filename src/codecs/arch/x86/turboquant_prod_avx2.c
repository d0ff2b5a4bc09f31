/* turboquant_prod_avx2.c — AVX2 kernels for the (b-1)-bit MSE codes of turboquant_prod
 * (contracts and references in codecs/qjl.h, qjl.c). 8 codes of `bits` bits are `bits` bytes;
 * BMI2 pdep spreads them into 8 bytes, which index an 8-lane centroid register through vpermps
 * (bits <= 3). Table dot: one FMA with the rotated query per 8 coordinates; table accumulate:
 * the centroid register is pre-scaled by the token weight. The bit width is a compile-time
 * constant in each instantiation so the loads are fixed-size. */
#include <immintrin.h>
#include <string.h>

#include "codecs/qjl.h"

#define VQ_INLINE static inline __attribute__((always_inline))

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Loads 8 codes (bits bytes) and returns their indices as 8 dwords. */
VQ_INLINE __m256i idx8(const uint8_t *p, const int bits) {
    uint64_t x;
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
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)_pdep_u64(x, m8)));
}

VQ_INLINE void lutdot_b(const float *q, __m256 cbv, const int bits, int d, const uint8_t *src,
                        size_t stride, int64_t n, float *out) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *p = src + (size_t)t * stride;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int j = 0;
        for (; j + 16 <= d; j += 16, p += 2 * bits) {
            const __m256 v0 = _mm256_permutevar8x32_ps(cbv, idx8(p, bits));
            const __m256 v1 = _mm256_permutevar8x32_ps(cbv, idx8(p + bits, bits));
            acc0 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(q + j), acc0);
            acc1 = _mm256_fmadd_ps(v1, _mm256_loadu_ps(q + j + 8), acc1);
        }
        if (j < d) {
            const __m256 v0 = _mm256_permutevar8x32_ps(cbv, idx8(p, bits));
            acc0 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(q + j), acc0);
        }
        out[t] = hsum256(_mm256_add_ps(acc0, acc1));
    }
}

void vq_lutdot_rows_avx2(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                         size_t stride, int64_t n, float *out) {
    float cbp[8] = {0};
    memcpy(cbp, cb, sizeof(float) * (size_t)(1 << bits));
    const __m256 cbv = _mm256_loadu_ps(cbp);
    switch (bits) {
    case 1: lutdot_b(q, cbv, 1, d, src, stride, n, out); break;
    case 2: lutdot_b(q, cbv, 2, d, src, stride, n, out); break;
    default:
        VQ_ASSERT(bits == 3);
        lutdot_b(q, cbv, 3, d, src, stride, n, out);
        break;
    }
}

VQ_INLINE void lutacc_b(const uint8_t *p, __m256 cbw, const int bits, int d, float *acc) {
    for (int j = 0; j < d; j += 8, p += bits) {
        const __m256 v = _mm256_permutevar8x32_ps(cbw, idx8(p, bits));
        _mm256_storeu_ps(acc + j, _mm256_add_ps(_mm256_loadu_ps(acc + j), v));
    }
}

void vq_lutacc_avx2(const uint8_t *codes, const float *cb, int bits, int d, float wn, float *acc) {
    float cbp[8] = {0};
    memcpy(cbp, cb, sizeof(float) * (size_t)(1 << bits));
    const __m256 cbw = _mm256_mul_ps(_mm256_loadu_ps(cbp), _mm256_set1_ps(wn));
    switch (bits) {
    case 1: lutacc_b(codes, cbw, 1, d, acc); break;
    case 2: lutacc_b(codes, cbw, 2, d, acc); break;
    default:
        VQ_ASSERT(bits == 3);
        lutacc_b(codes, cbw, 3, d, acc);
        break;
    }
}
