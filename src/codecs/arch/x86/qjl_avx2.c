/* qjl_avx2.c — AVX2 sign-dot row kernel (contract and reference in codecs/qjl.h, qjl.c).
 * Each sign byte is expanded to an 8-lane mask (broadcast, AND with 1<<lane, compare) that
 * selects the lanes of a to add; the result is 2 * sum_{z=+1} a - sum(a). */
#include <immintrin.h>

#include "codecs/qjl.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void vq_signdot_rows_avx2(const float *a, float sum_a, int m, const uint8_t *src, size_t stride,
                          int64_t n, float *out) {
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *z = src + (size_t)t * stride;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        int i = 0;
        for (; i + 16 <= m; i += 16) {
            const __m256i b0 = _mm256_and_si256(_mm256_set1_epi32(z[i / 8]), sel);
            const __m256i b1 = _mm256_and_si256(_mm256_set1_epi32(z[i / 8 + 1]), sel);
            const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b0, sel));
            const __m256 m1 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b1, sel));
            acc0 = _mm256_add_ps(acc0, _mm256_and_ps(m0, _mm256_loadu_ps(a + i)));
            acc1 = _mm256_add_ps(acc1, _mm256_and_ps(m1, _mm256_loadu_ps(a + i + 8)));
        }
        if (i < m) {
            const __m256i b0 = _mm256_and_si256(_mm256_set1_epi32(z[i / 8]), sel);
            const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b0, sel));
            acc0 = _mm256_add_ps(acc0, _mm256_and_ps(m0, _mm256_loadu_ps(a + i)));
        }
        out[t] = 2.0f * hsum256(_mm256_add_ps(acc0, acc1)) - sum_a;
    }
}

void vq_signacc_avx2(const uint8_t *z, int m, float g, float *acc) {
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 pos = _mm256_set1_ps(g), neg = _mm256_set1_ps(-g);
    for (int i = 0; i < m; i += 8) {
        const __m256i b = _mm256_and_si256(_mm256_set1_epi32(z[i / 8]), sel);
        const __m256 msk = _mm256_castsi256_ps(_mm256_cmpeq_epi32(b, sel));
        const __m256 v = _mm256_blendv_ps(neg, pos, msk);
        _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), v));
    }
}
