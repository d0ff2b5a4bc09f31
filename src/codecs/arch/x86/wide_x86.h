/*
 * wide_x86.h — reduction helpers shared by the x86 kernels of the 5..8-bit rotated codecs
 * (wide_avx2.c, wide_avx512.c, wide_avx512vbmi.c; contract in codecs/wide_kernels.h) and by
 * the multi-query kernels that reduce eight tokens' dot products together (polar, spectral,
 * vecinfer, turboquant_prod / qjl). Include only from files built with AVX2 (fold8: AVX-512F).
 */
#ifndef VQ_WIDE_X86_H
#define VQ_WIDE_X86_H

#include <immintrin.h>

#define VQ_INLINE static inline __attribute__((always_inline))

/* Lane i of the result = sum of the 8 lanes of a[i] (one horizontal-add tree for 8 tokens). */
VQ_INLINE __m256 hsum8x8(const __m256 *a) {
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                         _mm256_permute2f128_ps(u0, u1, 0x31));
}

#ifdef __AVX512F__
/* The two 8-lane halves of a added. */
VQ_INLINE __m256 fold8(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}
#endif

#endif
