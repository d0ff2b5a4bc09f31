/* core_x86.h — prototypes of the x86 SIMD variants of core kernels (compiled with per-file
 * ISA flags; callers must check the ISA first). Internal. */
#ifndef VQ_CORE_X86_H
#define VQ_CORE_X86_H
#include <stdint.h>

#ifdef VQ_HAVE_X86
/* AVX2 + F16C row conversions; same results as the scalar ones. */
void vq_fp16_to_fp32_row_avx2(const uint16_t *src, float *dst, int64_t n);
void vq_fp32_to_fp16_row_avx2(const float *src, uint16_t *dst, int64_t n);
void vq_bf16_to_fp32_row_avx2(const uint16_t *src, float *dst, int64_t n);
#endif

#endif
