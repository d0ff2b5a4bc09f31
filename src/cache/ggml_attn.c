/*
 * ggml_attn.c — scalar references of the llama.cpp-identical fp16 attention kernels and their
 * dispatch table (see ggml_attn.h).
 */
#include "cache/ggml_attn.h"

#include <math.h>

#include "core/core.h"

/* gcc's _mm512_reduce_add_ps order over 16 floats. */
static float red16_(const float *v) {
    float t[8], u[4];
    for (int i = 0; i < 8; i++) t[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; i++) u[i] = t[i + 4] + t[i];
    return (u[0] + u[2]) + (u[1] + u[3]);
}

/* Row l of the 16 reduced rows of column j (b1: rows l, l + 32, l + 16, l + 48 summed as
 * ggml's 4-accumulator reduce). */
static inline float pv_row(const float *acc, int d, int b1, int l, int j) {
    if (!b1) return acc[l * d + j];
    const float x0 = acc[l * d + j] + acc[(32 + l) * d + j];
    const float x1 = acc[(16 + l) * d + j] + acc[(48 + l) * d + j];
    return x0 + x1;
}

/* Columns in blocks of 16 with the reduction steps as loops over the block, which the
 * compiler vectorizes; each column keeps red16_'s order, so the result is the same. */
void vq_ggml_pv_finish(const float *acc, int d, int b1, float *out) {
    int j0 = 0;
    for (; j0 + 16 <= d; j0 += 16) {
        float v[16][16], t[8][16], u[4][16];
        for (int l = 0; l < 16; l++)
            for (int c = 0; c < 16; c++) v[l][c] = pv_row(acc, d, b1, l, j0 + c);
        for (int i = 0; i < 8; i++)
            for (int c = 0; c < 16; c++) t[i][c] = v[i + 8][c] + v[i][c];
        for (int i = 0; i < 4; i++)
            for (int c = 0; c < 16; c++) u[i][c] = t[i + 4][c] + t[i][c];
        for (int c = 0; c < 16; c++) out[j0 + c] = (u[0][c] + u[2][c]) + (u[1][c] + u[3][c]);
    }
    for (int j = j0; j < d; j++) {
        float v[16];
        for (int l = 0; l < 16; l++) v[l] = pv_row(acc, d, b1, l, j);
        out[j] = red16_(v);
    }
}

float vq_ggml_expf_ref(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (fabsf(n) > 192) return n <= 0 ? 0.0f : INFINITY;
    const float u = b * b;
    const float j = fmaf(
        fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
        u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    return ldexpf(j, (int)n);
}

void vq_ggml_dot_f16_ref(const float *q, int G, const uint16_t *k, int d, int b1, float *out) {
    for (int h = 0; h < G; h++) {
        const float *qh = q + (size_t)h * (size_t)d;
        if (!b1) {
            float acc[16] = {0};
            for (int s = 0; s < d; s += 16)
                for (int l = 0; l < 16; l++)
                    acc[l] = fmaf(vq_fp16_to_fp32(k[s + l]), qh[s + l], acc[l]);
            out[h] = red16_(acc);
            continue;
        }
        float acc[64] = {0}, v[16];
        const int np = d & ~63;
        for (int s = 0; s < np; s += 64)
            for (int l = 0; l < 64; l++)
                acc[l] = fmaf(vq_fp16_to_fp32(k[s + l]), qh[s + l], acc[l]);
        for (int l = 0; l < 16; l++) v[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]);
        double sum = (double)red16_(v);
        for (int i = np; i < d; i++) sum += (double)(vq_fp16_to_fp32(k[i]) * qh[i]);
        out[h] = (float)sum;
    }
}

void vq_ggml_scores_rows(vq_ggml_dot_f16_fn dot, const float *q, int G, const uint16_t *k,
                         int64_t n, int d, int b1, float scale, float *w, size_t ws) {
    float o[64];
    for (int64_t t = 0; t < n; t++)
        for (int h0 = 0; h0 < G; h0 += 64) {
            const int g = G - h0 < 64 ? G - h0 : 64;
            dot(q + (size_t)h0 * (size_t)d, g, k + t * d, d, b1, o);
            for (int h = 0; h < g; h++) w[(size_t)(h0 + h) * ws + (size_t)t] = o[h] * scale;
        }
}

void vq_ggml_scores_f16_ref(const float *q, int G, const uint16_t *k, int64_t n, int d, int b1,
                            float scale, float *w, size_t ws) {
    vq_ggml_scores_rows(vq_ggml_dot_f16_ref, q, G, k, n, d, b1, scale, w, ws);
}

void vq_ggml_scale_round_f16_ref(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = vq_fp16_to_fp32(vq_fp32_to_fp16(x[i] * scale));
}

double vq_ggml_softmax_exp_ref(float *w, int64_t n, float max) {
    double sum = 0;
    for (int64_t i = 0; i < n; i += 16) {
        for (int l = 0; l < 16; l++) w[i + l] = vq_ggml_expf_ref(w[i + l] - max);
        sum += (double)red16_(w + i);
    }
    return sum;
}

void vq_ggml_pv_f16_ref(float *acc, int G, const uint16_t *v, const float *p, size_t ps, int64_t t0,
                        int64_t n, int d, int b1, int s0, int s1) {
    const int S = b1 ? 64 : 16;
    for (int64_t t = 0; t < n; t++)
        for (int h = 0; h < G; h++) {
            const int slot = (int)((t0 + t) & (S - 1));
            if (slot < s0 || slot >= s1) continue;
            float *a = acc + ((size_t)h * (size_t)S + (size_t)((t0 + t) & (S - 1))) * (size_t)d;
            const float pt = p[(size_t)h * ps + (size_t)t];
            for (int j = 0; j < d; j++) a[j] = fmaf(vq_fp16_to_fp32(v[t * d + j]), pt, a[j]);
        }
}

static const struct vq_ggml_attn_kernels g_ref = {vq_ggml_dot_f16_ref, vq_ggml_scores_f16_ref,
                                                  vq_ggml_scale_round_f16_ref,
                                                  vq_ggml_softmax_exp_ref, vq_ggml_pv_f16_ref};
#ifdef VQ_HAVE_X86
static const struct vq_ggml_attn_kernels g_avx2 = {vq_ggml_dot_f16_avx2, vq_ggml_scores_f16_avx2,
                                                   vq_ggml_scale_round_f16_avx2,
                                                   vq_ggml_softmax_exp_avx2, vq_ggml_pv_f16_avx2};
static const struct vq_ggml_attn_kernels g_avx512 = {
    vq_ggml_dot_f16_avx512, vq_ggml_scores_f16_avx512, vq_ggml_scale_round_f16_avx512,
    vq_ggml_softmax_exp_avx512, vq_ggml_pv_f16_avx512};
#endif

const struct vq_ggml_attn_kernels *vq_ggml_attn_kernels(enum vq_isa isa) {
    isa = vq_isa_resolve(isa);
#ifdef VQ_HAVE_X86
    if (isa == VQ_ISA_AVX2) return &g_avx2;
    if (isa == VQ_ISA_AVX512) return &g_avx512;
#endif
    return &g_ref;
}
