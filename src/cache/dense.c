/*
 * dense.c — scalar references of the decode-once attention kernels and their dispatch table
 * (see dense.h).
 */
#include "cache/dense.h"

#include "core/core.h"

void vq_dense_scores_ref(const float *q, int nq, int d, const float *kt, size_t ldk, int64_t n,
                         float scale, float *s, size_t lds) {
    for (int j = 0; j < nq; j++)
        for (int64_t t = 0; t < n; t++) {
            float acc = 0.0f;
            for (int i = 0; i < d; i++)
                acc += q[(size_t)j * (size_t)d + (size_t)i] * kt[(size_t)i * ldk + (size_t)t];
            s[(size_t)j * lds + (size_t)t] = scale * acc;
        }
}

void vq_dense_pv_ref(float *acc, int nq, int d, const float *p, size_t ldp, const float *v,
                     int64_t n) {
    for (int j = 0; j < nq; j++) {
        float *a = acc + (size_t)j * (size_t)d;
        for (int64_t t = 0; t < n; t++) {
            const float w = p[(size_t)j * ldp + (size_t)t];
            for (int i = 0; i < d; i++) a[i] += w * v[(size_t)t * (size_t)d + (size_t)i];
        }
    }
}

float vq_dense_max_ref(const float *x, int64_t n) {
    float m = x[0];
    for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static const struct vq_dense_kernels g_ref = {vq_dense_scores_ref, vq_dense_pv_ref,
                                              vq_dense_max_ref};
#ifdef VQ_HAVE_X86
static const struct vq_dense_kernels g_avx2 = {vq_dense_scores_avx2, vq_dense_pv_avx2,
                                               vq_dense_max_avx2};
static const struct vq_dense_kernels g_avx512 = {vq_dense_scores_avx512, vq_dense_pv_avx512,
                                                 vq_dense_max_avx512};
#endif

const struct vq_dense_kernels *vq_dense_kernels(enum vq_isa isa) {
    isa = vq_isa_resolve(isa);
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX2) return &g_avx2;
    if (isa == VQ_ISA_AVX512) return &g_avx512;
#endif
    return &g_ref;
}
