/* turboquant_prod_avx512.c — AVX-512 kernels for the (b-1)-bit MSE codes of turboquant_prod
 * (contracts and references in codecs/qjl.h, qjl.c). 16 codes of `bits` bits are 2*bits
 * bytes; BMI2 pdep spreads them into 16 bytes, which index a 16-lane centroid register through
 * vpermps. Table dot: one FMA with the rotated query per 16 coordinates. Table accumulate: the
 * centroid register is pre-scaled by the token weight and added to the accumulator. The bit
 * width is a compile-time constant in each instantiation so the loads are fixed-size. */
#include "codecs/arch/x86/prod_multi_x86.h"

VQ_INLINE void lutdot_b(const float *q, __m512 cbv, const int bits, int d, const uint8_t *src,
                        size_t stride, int64_t n, float *out) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *p = src + (size_t)t * stride;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        int j = 0;
        for (; j + 32 <= d; j += 32, p += 4 * bits) {
            const __m512 v0 = _mm512_permutexvar_ps(idx16(p, bits), cbv);
            const __m512 v1 = _mm512_permutexvar_ps(idx16(p + 2 * bits, bits), cbv);
            acc0 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(q + j), acc0);
            acc1 = _mm512_fmadd_ps(v1, _mm512_loadu_ps(q + j + 16), acc1);
        }
        if (j + 16 <= d) {
            const __m512 v0 = _mm512_permutexvar_ps(idx16(p, bits), cbv);
            acc0 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(q + j), acc0);
            j += 16;
            p += 2 * bits;
        }
        if (j < d) { /* d % 16 == 8 */
            const __m512 v0 = _mm512_permutexvar_ps(idx8(p, bits), cbv);
            acc1 = _mm512_fmadd_ps(v0, _mm512_maskz_loadu_ps((__mmask16)0xff, q + j), acc1);
        }
        out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    }
}

void vq_lutdot_rows_avx512(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                           size_t stride, int64_t n, float *out) {
    float cbp[16] = {0};
    memcpy(cbp, cb, sizeof(float) * (size_t)(1 << bits));
    const __m512 cbv = _mm512_loadu_ps(cbp);
    switch (bits) {
    case 1: lutdot_b(q, cbv, 1, d, src, stride, n, out); break;
    case 2: lutdot_b(q, cbv, 2, d, src, stride, n, out); break;
    default:
        VQ_ASSERT(bits == 3);
        lutdot_b(q, cbv, 3, d, src, stride, n, out);
        break;
    }
}

VQ_INLINE void lutacc_b(const uint8_t *p, __m512 cbw, const int bits, int d, float *acc) {
    int j = 0;
    for (; j + 16 <= d; j += 16, p += 2 * bits) {
        const __m512 v = _mm512_permutexvar_ps(idx16(p, bits), cbw);
        _mm512_storeu_ps(acc + j, _mm512_add_ps(_mm512_loadu_ps(acc + j), v));
    }
    if (j < d) {
        const __m512 v = _mm512_permutexvar_ps(idx8(p, bits), cbw);
        const __m512 a = _mm512_maskz_loadu_ps((__mmask16)0xff, acc + j);
        _mm512_mask_storeu_ps(acc + j, (__mmask16)0xff, _mm512_add_ps(a, v));
    }
}

void vq_lutacc_avx512(const uint8_t *codes, const float *cb, int bits, int d, float wn,
                      float *acc) {
    float cbp[16] = {0};
    memcpy(cbp, cb, sizeof(float) * (size_t)(1 << bits));
    const __m512 cbw = _mm512_mul_ps(_mm512_loadu_ps(cbp), _mm512_set1_ps(wn));
    switch (bits) {
    case 1: lutacc_b(codes, cbw, 1, d, acc); break;
    case 2: lutacc_b(codes, cbw, 2, d, acc); break;
    default:
        VQ_ASSERT(bits == 3);
        lutacc_b(codes, cbw, 3, d, acc);
        break;
    }
}
