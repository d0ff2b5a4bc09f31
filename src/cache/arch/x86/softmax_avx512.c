/*
 * softmax_avx512.c — AVX-512 scaled exponentials of a softmax (contract in cache/softmax.h):
 * two passes (scale + max, exp + sum), masked tails, polynomial exp with vscalefps.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "cache/softmax.h"

static inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.3762626647949f)),
                      _mm512_set1_ps(-87.3365478515625f));
    const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, fx);
}

void vq_softmax_avx512(float *x, int64_t n, float scale, float m_floor, float *m_out,
                       float *s_out) {
    const __m512 sv = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(m_floor);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), sv);
        _mm512_storeu_ps(x + i, v);
        mx = _mm512_max_ps(mx, v);
    }
    const __mmask16 tm = (__mmask16)((1u << (n - i)) - 1u);
    if (i < n) {
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, x + i), sv);
        _mm512_mask_storeu_ps(x + i, tm, v);
        mx = _mm512_mask_max_ps(mx, tm, mx, v);
    }
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        const __m512 e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), m));
        _mm512_storeu_ps(x + i, e0);
        _mm512_storeu_ps(x + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(x + i, e0);
        s0 = _mm512_add_ps(s0, e0);
    }
    if (i < n) {
        const __m512 e0 = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tm, x + i), m));
        _mm512_mask_storeu_ps(x + i, tm, e0);
        s1 = _mm512_mask_add_ps(s1, tm, s1, e0);
    }
    const float sum = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    if (m_out) *m_out = _mm512_cvtss_f32(m);
    if (s_out) *s_out = sum;
}
