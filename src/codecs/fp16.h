/*
 * fp16.h — kernels of the fp16 baseline codec (scalar reference + x86 variants).
 * A record is head_dim IEEE binary16 values (little-endian); the prepared query is head_dim
 * fp32 values; the accumulator is head_dim fp32 values in the output domain.
 * Every variant computes scores[t] = sum_c q[c] * x_t[c] and acc[c] += sum_t w[t] * x_t[c];
 * they differ from the _ref versions only in summation order (tests allow 1e-4 relative).
 */
#ifndef VQ_CODECS_FP16_H
#define VQ_CODECS_FP16_H

#include <stdint.h>

void vq_fp16_score_ref(const float *q, const uint16_t *x, int d, int64_t n, float *scores);
void vq_fp16_accumulate_ref(const uint16_t *x, int d, int64_t n, const float *w, float *acc);

#ifdef VQ_HAVE_X86
void vq_fp16_score_avx2(const float *q, const uint16_t *x, int d, int64_t n, float *scores);
void vq_fp16_accumulate_avx2(const uint16_t *x, int d, int64_t n, const float *w, float *acc);
void vq_fp16_score_avx512(const float *q, const uint16_t *x, int d, int64_t n, float *scores);
void vq_fp16_accumulate_avx512(const uint16_t *x, int d, int64_t n, const float *w, float *acc);
#endif

#endif
