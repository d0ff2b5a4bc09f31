/*
 * kivi_avx2.c — AVX2 + FMA kernels of the KIVI codecs (contract in codecs/kivi.h).
 * Codes of 8 channels are expanded with one scalar load, a broadcast and a per-lane variable
 * shift (vpsrlvd), then converted to fp32. dot_rows scores 8 rows at a time (8 independent
 * accumulators, hadd-tree reduction); acc_row needs group size % 8 == 0 (else the scalar
 * reference is used).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/kivi.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* Codes of channels c..c+7 of a row as fp32 (BITS is a compile-time constant). */
VQ_INLINE __m256 codes8(const uint8_t *row, int d, int c, const int BITS) {
    __m256i v;
    if (BITS == 4) {
        uint32_t w;
        memcpy(&w, row + c / 2, 4);
        v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w),
                                               _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                             _mm256_set1_epi32(15));
    } else {
        uint16_t w;
        memcpy(&w, row + c / 4, 2);
        v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w),
                                               _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                             _mm256_set1_epi32(3));
        if (BITS == 3) {
            const __m256i hi = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_set1_epi32(row[d / 4 + c / 8]),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                _mm256_set1_epi32(1));
            v = _mm256_or_si256(v, _mm256_slli_epi32(hi, 2));
        }
    }
    return _mm256_cvtepi32_ps(v);
}

VQ_INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                         __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Sum of the 8 lanes in the same order as one lane of hsum8x8, so a token scores bit-identically
 * whether it is reduced alone or in a group of 8. */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

VQ_INLINE void dot_rows(const float *qp, const uint8_t *rows, int d, int64_t n, float bias,
                        float *out, const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r = rows + (size_t)t * rb;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int c = 0; c < d; c += 8) {
            const __m256 q = _mm256_loadu_ps(qp + c);
            a0 = _mm256_fmadd_ps(q, codes8(r, d, c, BITS), a0);
            a1 = _mm256_fmadd_ps(q, codes8(r + rb, d, c, BITS), a1);
            a2 = _mm256_fmadd_ps(q, codes8(r + 2 * rb, d, c, BITS), a2);
            a3 = _mm256_fmadd_ps(q, codes8(r + 3 * rb, d, c, BITS), a3);
            a4 = _mm256_fmadd_ps(q, codes8(r + 4 * rb, d, c, BITS), a4);
            a5 = _mm256_fmadd_ps(q, codes8(r + 5 * rb, d, c, BITS), a5);
            a6 = _mm256_fmadd_ps(q, codes8(r + 6 * rb, d, c, BITS), a6);
            a7 = _mm256_fmadd_ps(q, codes8(r + 7 * rb, d, c, BITS), a7);
        }
        _mm256_storeu_ps(out + t, _mm256_add_ps(_mm256_set1_ps(bias),
                                                hsum8x8(a0, a1, a2, a3, a4, a5, a6, a7)));
    }
    for (; t < n; t++) {
        const uint8_t *r = rows + (size_t)t * rb;
        __m256 a0 = _mm256_setzero_ps();
        for (int c = 0; c < d; c += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qp + c), codes8(r, d, c, BITS), a0);
        out[t] = bias + hsum1(a0);
    }
}

void vq_kivi_dot_rows_avx2(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                           float bias, float *out) {
    if (bits == 2) dot_rows(qp, rows, d, n, bias, out, 2);
    else if (bits == 3) dot_rows(qp, rows, d, n, bias, out, 3);
    else dot_rows(qp, rows, d, n, bias, out, 4);
}

VQ_INLINE void acc_row(const uint8_t *row, int d, int g, const float *a, float *acc, const int BITS) {
    for (int c = 0; c < d; c += 8) {
        const __m256 av = _mm256_set1_ps(a[c / g]);
        _mm256_storeu_ps(acc + c, _mm256_fmadd_ps(av, codes8(row, d, c, BITS), _mm256_loadu_ps(acc + c)));
    }
}

void vq_kivi_acc_row_avx2(const uint8_t *row, int d, int bits, int g, const float *a, float *acc) {
    if (g % 8 != 0) {
        vq_kivi_acc_row_ref(row, d, bits, g, a, acc);
        return;
    }
    if (bits == 2) acc_row(row, d, g, a, acc, 2);
    else if (bits == 3) acc_row(row, d, g, a, acc, 3);
    else acc_row(row, d, g, a, acc, 4);
}
