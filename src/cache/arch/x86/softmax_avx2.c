/*
 * softmax_avx2.c — AVX2 + FMA scaled exponentials of a softmax (contract in cache/softmax.h):
 * two passes (scale + max, exp + sum); a scalar tail of < 8 elements uses the same
 * polynomial on a zero-padded vector.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cache/softmax.h"

static inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f)),
                      _mm256_set1_ps(-87.3365478515625f));
    const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    /* 2^fx for fx in [-126, 127] through the exponent field */
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void vq_softmax_avx2(float *x, int64_t n, float scale, float m_floor, float *m_out, float *s_out) {
    const __m256 sv = _mm256_set1_ps(scale);
    __m256 mx = _mm256_set1_ps(m_floor);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
        _mm256_storeu_ps(x + i, v);
        mx = _mm256_max_ps(mx, v);
    }
    float m = hmax8(mx);
    for (int64_t j = i; j < n; j++) {
        x[j] *= scale;
        if (x[j] > m) m = x[j];
    }
    const __m256 mv = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        const __m256 e1 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv));
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 e0 = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    if (i < n) {
        float tmp[8];
        const int r = (int)(n - i);
        for (int j = 0; j < 8; j++) tmp[j] = j < r ? x[i + j] - m : -INFINITY;
        const __m256 e0 = exp8(_mm256_loadu_ps(tmp));
        _mm256_storeu_ps(tmp, e0);
        float part = 0;
        for (int j = 0; j < r; j++) {
            x[i + j] = tmp[j];
            part += tmp[j];
        }
        s1 = _mm256_add_ps(s1, _mm256_setr_ps(part, 0, 0, 0, 0, 0, 0, 0));
    }
    const float sum = hsum8(_mm256_add_ps(s0, s1));
    if (m_out) *m_out = m;
    if (s_out) *s_out = sum;
}
