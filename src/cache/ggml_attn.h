/*
 * ggml_attn.h — the kernels of the cache's llama.cpp-identical fp16 attention (internal).
 *
 * A layer whose keys and values are plain fp16 rows (see cache.c, "fp16 layers") is attended
 * in the operation order of ggml's CPU backend (x86, AVX-512 build, non-flash path), so that
 * an engine built on the cache computes llama.cpp's logits to the last bit: the int8
 * re-quantization of activations before every matmul turns any last-bit difference into whole
 * rounding steps that grow over the layers (tests/golden/README.md). Every kernel has a scalar
 * reference (fmaf, the normative spec) and AVX2 / AVX-512 twins that return bit-identical
 * results (tests/unit/test_cache_ggml_attn.c). Kernels are pure functions of their arguments
 * (thread-safe); the table returned by vq_ggml_attn_kernels is immutable.
 */
#ifndef VQ_CACHE_GGML_ATTN_H
#define VQ_CACHE_GGML_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"

/* out[h] = sum over i < d of q[h*d + i] * k[i] for h < G (k fp16, q already fp16-rounded):
 * b1 = 0: 16 lanes (lane l: fma chain over i = l mod 16, ascending), reduced as gcc's
 * _mm512_reduce_add_ps — ggml's tinyBLAS F16 product (batches of >= 2 queries);
 * b1 = 1: ggml_vec_dot_f16 (4 x 16 lanes over 64-element steps, then s0+s2, s1+s3, sum,
 * reduce; elements past the last full 64 added in double) — llama.cpp's 1-query path.
 * b1 = 0 needs d % 16 == 0. */
typedef void (*vq_ggml_dot_f16_fn)(const float *q, int G, const uint16_t *k, int d, int b1,
                                   float *out);

struct vq_ggml_attn_kernels {
    vq_ggml_dot_f16_fn dot_f16;
    /* w[h*ws + t] = dot_f16 of query h with key row t, times scale, for t < n (k holds n rows
     * of d fp16 values), h < G: the same bits as dot_f16 row by row. */
    void (*scores_f16)(const float *q, int G, const uint16_t *k, int64_t n, int d, int b1,
                       float scale, float *w, size_t ws);
    /* x[i] = fp16-rounded (round to nearest even) x[i] * scale, as a float, for i < n. */
    void (*scale_round_f16)(float *x, int64_t n, float scale);
    /* w[i] = ggml_v_expf(w[i] - max) in place for i < n (n a multiple of 16); returns the sum
     * of the 16-element chunk reductions, accumulated in double (ggml_vec_soft_max_f32). */
    double (*softmax_exp)(float *w, int64_t n, float max);
    /* acc is G blocks of (S, d), S = 16 (b1 = 0) or 64 (b1 = 1): for each token t in
     * [t0, t0 + n), ascending, whose slot t mod S is in [s0, s1),
     *     acc[h][t mod S][j] = fma(v_t[j], p[h*ps + t - t0], acc[h][t mod S][j])
     * for h < G, j < d; v holds n rows of d fp16 values. With vq_ggml_pv_finish this is
     * ggml's V^T P product (tinyBLAS, or vec_dot_f16 over tokens when b1). d % 16 == 0.
     * Each slot is its own chain, so threads may share the slots of one head
     * (0 <= s0 <= s1 <= S; the whole product: 0, S). */
    void (*pv_f16)(float *acc, int G, const uint16_t *v, const float *p, size_t ps, int64_t t0,
                   int64_t n, int d, int b1, int s0, int s1);
};

/* The kernels for isa (AUTO: the library default, $VQ_ISA honoured; an unavailable ISA falls
 * back to scalar). Static table, thread-safe. */
const struct vq_ggml_attn_kernels *vq_ggml_attn_kernels(enum vq_isa isa);
/* out[j] for j < d from one head's (S, d) block of pv_f16: S = 16: the _mm512_reduce_add_ps
 * order over the 16 rows; S = 64 (b1): rows r and r+32 summed, then r and r+16 (ggml's
 * 4-accumulator reduce), then the 16-row order. */
void vq_ggml_pv_finish(const float *acc, int d, int b1, float *out);
/* scores_f16 semantics computed row by row with dot (any dot_f16 variant). Thread-safe. */
void vq_ggml_scores_rows(vq_ggml_dot_f16_fn dot, const float *q, int G, const uint16_t *k,
                         int64_t n, int d, int b1, float scale, float *w, size_t ws);
/* ggml_v_expf (AVX-512 variant) for one float, with fmaf and ldexpf: relative error ~2e-7,
 * 0 below ~-104 and for -inf, inf above ~89. Also the engine's SwiGLU exp. */
float vq_ggml_expf_ref(float x);

void vq_ggml_dot_f16_ref(const float *q, int G, const uint16_t *k, int d, int b1, float *out);
void vq_ggml_scores_f16_ref(const float *q, int G, const uint16_t *k, int64_t n, int d, int b1,
                            float scale, float *w, size_t ws);
void vq_ggml_scale_round_f16_ref(float *x, int64_t n, float scale);
double vq_ggml_softmax_exp_ref(float *w, int64_t n, float max);
void vq_ggml_pv_f16_ref(float *acc, int G, const uint16_t *v, const float *p, size_t ps, int64_t t0,
                        int64_t n, int d, int b1, int s0, int s1);
#ifdef VQ_HAVE_X86
/* src/cache/arch/x86/; only called after the ISA check of vq_ggml_attn_kernels. */
void vq_ggml_dot_f16_avx2(const float *q, int G, const uint16_t *k, int d, int b1, float *out);
void vq_ggml_scores_f16_avx2(const float *q, int G, const uint16_t *k, int64_t n, int d, int b1,
                             float scale, float *w, size_t ws);
void vq_ggml_scale_round_f16_avx2(float *x, int64_t n, float scale);
double vq_ggml_softmax_exp_avx2(float *w, int64_t n, float max);
void vq_ggml_pv_f16_avx2(float *acc, int G, const uint16_t *v, const float *p, size_t ps,
                         int64_t t0, int64_t n, int d, int b1, int s0, int s1);
void vq_ggml_dot_f16_avx512(const float *q, int G, const uint16_t *k, int d, int b1, float *out);
void vq_ggml_scores_f16_avx512(const float *q, int G, const uint16_t *k, int64_t n, int d, int b1,
                               float scale, float *w, size_t ws);
void vq_ggml_scale_round_f16_avx512(float *x, int64_t n, float scale);
double vq_ggml_softmax_exp_avx512(float *w, int64_t n, float max);
void vq_ggml_pv_f16_avx512(float *acc, int G, const uint16_t *v, const float *p, size_t ps,
                           int64_t t0, int64_t n, int d, int b1, int s0, int s1);
#endif

#endif
