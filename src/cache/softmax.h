/*
 * softmax.h — the exponentials of the cache's fused attention, normalized by the caller:
 * x[i] <- exp(scale*x[i] - m) for i < n (n >= 1), where m = max(m_floor, max_j scale*x[j]),
 * and sum = sum_j x[j] after the update; m and sum are returned through *m_out and *s_out
 * (either may be NULL). m_floor (-INFINITY for none) is the max of a range scored before (the
 * stream sinks) so that both ranges share one m. The weights stay unnormalized: attention
 * scales its output by 1 / sum once (the values are a linear function of the weights), which
 * saves a pass over the scores.
 * The _ref version uses libm expf and a double sum; the x86 versions use a Cephes-style
 * degree-6 polynomial exp (relative error ~2e-7) and fp32 vector sums.
 */
#ifndef VQ_CACHE_SOFTMAX_H
#define VQ_CACHE_SOFTMAX_H

#include <stdint.h>

typedef void (*vq_softmax_fn)(float *x, int64_t n, float scale, float m_floor, float *m_out,
                              float *s_out);

void vq_softmax_ref(float *x, int64_t n, float scale, float m_floor, float *m_out, float *s_out);
#ifdef VQ_HAVE_X86
void vq_softmax_avx2(float *x, int64_t n, float scale, float m_floor, float *m_out, float *s_out);
void vq_softmax_avx512(float *x, int64_t n, float scale, float m_floor, float *m_out, float *s_out);
#endif

#endif
