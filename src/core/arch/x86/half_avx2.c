/* half_avx2.c — F16C/AVX2 row conversions (fp16 <-> fp32, bf16 -> fp32). */
#include <immintrin.h>

#include "core/core.h"
#include "core/arch/x86/core_x86.h"

/* n binary16 -> fp32 with VCVTPH2PS (exact); scalar tail. */
void vq_fp16_to_fp32_row_avx2(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = vq_fp16_to_fp32(src[i]);
}

/* n fp32 -> binary16 with VCVTPS2PH, round to nearest even; scalar tail. */
void vq_fp32_to_fp16_row_avx2(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = vq_fp32_to_fp16(src[i]);
}

/* n bfloat16 -> fp32 (zero-extend and shift). */
void vq_bf16_to_fp32_row_avx2(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) dst[i] = vq_bf16_to_fp32(src[i]);
}
