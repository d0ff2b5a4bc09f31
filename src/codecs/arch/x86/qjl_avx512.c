/* qjl_avx512.c — AVX-512 sign-dot row kernel (contract and reference in codecs/qjl.h, qjl.c).
 * Each 16 sign bits are a __mmask16 selecting the lanes of a that are added; the result is
 * 2 * sum_{z=+1} a - sum(a). */
#include <immintrin.h>
#include <string.h>

#include "codecs/qjl.h"

void vq_signdot_rows_avx512(const float *a, float sum_a, int m, const uint8_t *src, size_t stride,
                            int64_t n, float *out) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *z = src + (size_t)t * stride;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        int i = 0;
        for (; i + 32 <= m; i += 32) {
            uint32_t bits;
            memcpy(&bits, z + i / 8, 4);
            acc0 = _mm512_mask_add_ps(acc0, (__mmask16)(bits & 0xffff), acc0,
                                      _mm512_loadu_ps(a + i));
            acc1 = _mm512_mask_add_ps(acc1, (__mmask16)(bits >> 16), acc1,
                                      _mm512_loadu_ps(a + i + 16));
        }
        if (i + 16 <= m) {
            uint16_t bits;
            memcpy(&bits, z + i / 8, 2);
            acc0 = _mm512_mask_add_ps(acc0, (__mmask16)bits, acc0, _mm512_loadu_ps(a + i));
            i += 16;
        }
        if (i < m) { /* m % 16 == 8 */
            const __m512 v = _mm512_maskz_loadu_ps((__mmask16)0xff, a + i);
            acc1 = _mm512_mask_add_ps(acc1, (__mmask16)z[i / 8], acc1, v);
        }
        out[t] = 2.0f * _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - sum_a;
    }
}

void vq_signacc_avx512(const uint8_t *z, int m, float g, float *acc) {
    const __m512 pos = _mm512_set1_ps(g), neg = _mm512_set1_ps(-g);
    int i = 0;
    for (; i + 16 <= m; i += 16) {
        uint16_t bits;
        memcpy(&bits, z + i / 8, 2);
        const __m512 v = _mm512_mask_blend_ps((__mmask16)bits, neg, pos);
        _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), v));
    }
    if (i < m) { /* m % 16 == 8 */
        const __m512 v = _mm512_mask_blend_ps((__mmask16)z[i / 8], neg, pos);
        const __m512 a = _mm512_maskz_loadu_ps((__mmask16)0xff, acc + i);
        _mm512_mask_storeu_ps(acc + i, (__mmask16)0xff, _mm512_add_ps(a, v));
    }
}
