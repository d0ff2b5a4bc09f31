/*
 * kivi_avx512.c — AVX-512 (F, BW, VL, DQ) kernels of the KIVI codecs (contract in
 * codecs/kivi.h). Codes of 16 channels come from one or two scalar loads, broadcasts and a
 * per-lane variable shift; a row tail of 8 channels (d % 16 == 8) reads only its own bytes and
 * multiplies the 8 unused lanes by zero query lanes. dot_rows: 8 rows at a time (8
 * independent zmm accumulators); acc_row needs group size % 8 == 0 (else scalar reference).
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "codecs/kivi.h"

#define VQ_INLINE static inline __attribute__((always_inline))

/* Codes of channels c..c+15 (c..c+7 when HALF; the upper lanes are then arbitrary codes). */
VQ_INLINE __m512 codes16(const uint8_t *row, int d, int c, const int BITS, const int HALF) {
    __m512i v;
    if (BITS == 4) {
        uint32_t lo, hi;
        memcpy(&lo, row + c / 2, 4);
        if (HALF) hi = lo;
        else memcpy(&hi, row + c / 2 + 4, 4);
        const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32((int)lo)),
                                             _mm256_set1_epi32((int)hi), 1);
        v = _mm512_and_si512(_mm512_srlv_epi32(w, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0,
                                                                    4, 8, 12, 16, 20, 24, 28)),
                             _mm512_set1_epi32(15));
    } else {
        uint32_t w;
        if (HALF) {
            uint16_t h;
            memcpy(&h, row + c / 4, 2);
            w = h;
        } else {
            memcpy(&w, row + c / 4, 4);
        }
        v = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_set1_epi32((int)w),
                              _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                                28, 30)),
            _mm512_set1_epi32(3));
        if (BITS == 3) {
            uint32_t hb = row[d / 4 + c / 8];
            if (!HALF) hb |= (uint32_t)row[d / 4 + c / 8 + 1] << 8;
            const __m512i hi = _mm512_and_si512(
                _mm512_srlv_epi32(_mm512_set1_epi32((int)hb),
                                  _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
                                                    14, 15)),
                _mm512_set1_epi32(1));
            v = _mm512_or_si512(v, _mm512_slli_epi32(hi, 2));
        }
    }
    return _mm512_cvtepi32_ps(v);
}

VQ_INLINE __m256 fold(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

VQ_INLINE __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                         __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
    const __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Same lane order as one lane of hsum8x8 (bit-identical scores for leftover rows). */
VQ_INLINE float hsum1(__m256 a) {
    const __m256 t = _mm256_hadd_ps(a, a);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

#define STEP8(HALF, Q, C)                                                        \
    do {                                                                         \
        a0 = _mm512_fmadd_ps(Q, codes16(r, d, C, BITS, HALF), a0);               \
        a1 = _mm512_fmadd_ps(Q, codes16(r + rb, d, C, BITS, HALF), a1);          \
        a2 = _mm512_fmadd_ps(Q, codes16(r + 2 * rb, d, C, BITS, HALF), a2);      \
        a3 = _mm512_fmadd_ps(Q, codes16(r + 3 * rb, d, C, BITS, HALF), a3);      \
        a4 = _mm512_fmadd_ps(Q, codes16(r + 4 * rb, d, C, BITS, HALF), a4);      \
        a5 = _mm512_fmadd_ps(Q, codes16(r + 5 * rb, d, C, BITS, HALF), a5);      \
        a6 = _mm512_fmadd_ps(Q, codes16(r + 6 * rb, d, C, BITS, HALF), a6);      \
        a7 = _mm512_fmadd_ps(Q, codes16(r + 7 * rb, d, C, BITS, HALF), a7);      \
    } while (0)

VQ_INLINE void dot_rows(const float *qp, const uint8_t *rows, int d, int64_t n, float bias,
                        float *out, const int BITS) {
    const size_t rb = (size_t)d * BITS / 8;
    const int d16 = d & ~15;
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const uint8_t *r = rows + (size_t)t * rb;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int c = 0; c < d16; c += 16) {
            const __m512 q = _mm512_loadu_ps(qp + c);
            STEP8(0, q, c);
        }
        if (d16 < d) {
            const __m512 q = _mm512_maskz_loadu_ps(0xFF, qp + d16);
            STEP8(1, q, d16);
        }
        _mm256_storeu_ps(out + t, _mm256_add_ps(_mm256_set1_ps(bias),
                                                hsum8x8(fold(a0), fold(a1), fold(a2), fold(a3),
                                                        fold(a4), fold(a5), fold(a6), fold(a7))));
    }
    for (; t < n; t++) {
        const uint8_t *r = rows + (size_t)t * rb;
        __m512 a0 = _mm512_setzero_ps();
        for (int c = 0; c < d16; c += 16)
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qp + c), codes16(r, d, c, BITS, 0), a0);
        if (d16 < d)
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(0xFF, qp + d16), codes16(r, d, d16, BITS, 1), a0);
        out[t] = bias + hsum1(fold(a0));
    }
}

void vq_kivi_dot_rows_avx512(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                             float bias, float *out) {
    if (bits == 2) dot_rows(qp, rows, d, n, bias, out, 2);
    else if (bits == 3) dot_rows(qp, rows, d, n, bias, out, 3);
    else dot_rows(qp, rows, d, n, bias, out, 4);
}

VQ_INLINE void acc_row(const uint8_t *row, int d, int g, const float *a, float *acc, const int BITS) {
    const int d16 = d & ~15;
    for (int c = 0; c < d16; c += 16) {
        const __m512 av = (g % 16 == 0) ? _mm512_set1_ps(a[c / g])
                                        : _mm512_insertf32x8(_mm512_set1_ps(a[c / g]),
                                                             _mm256_set1_ps(a[(c + 8) / g]), 1);
        _mm512_storeu_ps(acc + c, _mm512_fmadd_ps(av, codes16(row, d, c, BITS, 0), _mm512_loadu_ps(acc + c)));
    }
    if (d16 < d) {
        const __m512 av = _mm512_set1_ps(a[d16 / g]);
        const __m512 s = _mm512_fmadd_ps(av, codes16(row, d, d16, BITS, 1),
                                         _mm512_maskz_loadu_ps(0xFF, acc + d16));
        _mm512_mask_storeu_ps(acc + d16, 0xFF, s);
    }
}

void vq_kivi_acc_row_avx512(const uint8_t *row, int d, int bits, int g, const float *a, float *acc) {
    if (g % 8 != 0) {
        vq_kivi_acc_row_ref(row, d, bits, g, a, acc);
        return;
    }
    if (bits == 2) acc_row(row, d, g, a, acc, 2);
    else if (bits == 3) acc_row(row, d, g, a, acc, 3);
    else acc_row(row, d, g, a, acc, 4);
}
