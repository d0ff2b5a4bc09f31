/*
 * dense.h — the fp32 kernels of the cache's decode-once attention (internal).
 *
 * Batched queries (prefill, scoring) attend to a compressed layer page by page: each page of
 * keys and values is decoded once to fp32 for a block of (query, query head) pairs that score
 * it and accumulate its values under an online softmax (cache.c, "decode-once attention").
 * These two kernels are that block's inner products. The scalar references are the spec; the
 * AVX2 / AVX-512 twins compute the same sums in another order (agreement to float rounding,
 * tests/unit/test_cache_dense.c). Kernels are pure functions of their arguments (thread-safe);
 * the table returned by vq_dense_kernels is immutable.
 */
#ifndef VQ_CACHE_DENSE_H
#define VQ_CACHE_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"

struct vq_dense_kernels {
    /* s[j*lds + t] = scale * sum over i < d of q[j*d + i] * kt[i*ldk + t], for j < nq and
     * t < n: nq queries against n keys stored transposed (kt: d rows of ldk >= n floats). */
    void (*scores)(const float *q, int nq, int d, const float *kt, size_t ldk, int64_t n,
                   float scale, float *s, size_t lds);
    /* acc[j*d + i] += sum over t < n of p[j*ldp + t] * v[t*d + i], for j < nq and i < d:
     * nq weight rows applied to n value rows of d floats. */
    void (*pv)(float *acc, int nq, int d, const float *p, size_t ldp, const float *v, int64_t n);
    /* The largest of x[0, n) (n >= 1; -inf entries allowed, no NaN): exact. */
    float (*max)(const float *x, int64_t n);
};

/* The kernels for isa (AUTO: the library default, $VQ_ISA honoured; an unavailable ISA falls
 * back to scalar). Static table, thread-safe. */
const struct vq_dense_kernels *vq_dense_kernels(enum vq_isa isa);

void vq_dense_scores_ref(const float *q, int nq, int d, const float *kt, size_t ldk, int64_t n,
                         float scale, float *s, size_t lds);
void vq_dense_pv_ref(float *acc, int nq, int d, const float *p, size_t ldp, const float *v,
                     int64_t n);
float vq_dense_max_ref(const float *x, int64_t n);
#ifdef VQ_HAVE_X86
/* src/cache/arch/x86/; only called after the ISA check of vq_dense_kernels. */
void vq_dense_scores_avx2(const float *q, int nq, int d, const float *kt, size_t ldk, int64_t n,
                          float scale, float *s, size_t lds);
void vq_dense_pv_avx2(float *acc, int nq, int d, const float *p, size_t ldp, const float *v,
                      int64_t n);
void vq_dense_scores_avx512(const float *q, int nq, int d, const float *kt, size_t ldk, int64_t n,
                            float scale, float *s, size_t lds);
void vq_dense_pv_avx512(float *acc, int nq, int d, const float *p, size_t ldp, const float *v,
                        int64_t n);
float vq_dense_max_avx2(const float *x, int64_t n);
float vq_dense_max_avx512(const float *x, int64_t n);
#endif

#endif
