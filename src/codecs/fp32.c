/*
 * fp32.c — the fp32 codec (VQ_METHOD_FP32): exact storage, used as a reference in tests and
 * quality measurements; not a speed path (scalar kernels only, written so compilers vectorize).
 *
 * Block layout (block_tokens = 1, block_bytes = 4*d):
 *   offset 0: d x IEEE binary32 (little-endian), channel order, stored bit-exactly.
 * Prepared query: d x fp32. Accumulator: d x fp32 (output domain). Encode rejects NaN/Inf
 * (NON_FINITE); there is no range limit. Parameters used: head_dim only.
 */
#include <math.h>
#include <string.h>

#include "codecs/codec_impl.h"

static vq_status fp32_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                             uint8_t *dst) {
    const int64_t n = n_blocks * c->p.head_dim;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;
    memcpy(dst, x, (size_t)n * sizeof(float));
    return VQ_STATUS_OK;
}

static void fp32_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    memcpy(x, src, (size_t)(n_blocks * c->p.head_dim) * sizeof(float));
}

static void fp32_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    memcpy(qs, q, (size_t)c->p.head_dim * sizeof(float));
}

static void fp32_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores) {
    const int d = c->p.head_dim;
    const float *q = qs;
    for (int64_t t = 0; t < n_tokens; t++) {
        float row[8] = {0};
        const float *x = (const float *)(const void *)codes + t * d;
        for (int i = 0; i < d; i += 8)
            for (int j = 0; j < 8; j++) row[j] += q[i + j] * x[i + j];
        scores[t] = ((row[0] + row[1]) + (row[2] + row[3])) +
                    ((row[4] + row[5]) + (row[6] + row[7]));
    }
}

static void fp32_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc) {
    const int d = c->p.head_dim;
    for (int64_t t = 0; t < n_tokens; t++) {
        const float wt = w[t];
        const float *x = (const float *)(const void *)codes + t * d;
        for (int i = 0; i < d; i++) acc[i] += wt * x[i];
    }
}

static void fp32_finish(const struct vq_codec *c, const float *acc, float *out) {
    memcpy(out, acc, (size_t)c->p.head_dim * sizeof(float));
}

static vq_status fp32_init(struct vq_codec *c) {
    const int d = c->p.head_dim;
    c->impl = NULL;
    c->block_tokens = 1;
    c->block_bytes = (size_t)d * 4;
    c->query_bytes = (size_t)d * sizeof(float);
    c->acc_floats = (size_t)d;
    c->encode = fp32_encode;
    c->decode = fp32_decode;
    c->prepare_query = fp32_prepare_query;
    c->score = fp32_score;
    c->accumulate = fp32_accumulate;
    c->finish = fp32_finish;
    return VQ_STATUS_OK;
}

const struct vq_codec_i vq_codec_fp32 = {
    .name = "fp32",
    .params_doc = "(none)",
    .bits_formula = "32",
    .needs_calibration = 0,
    .default_bits = 32,
    .min_bits = 32,
    .max_bits = 32,
    .flags = 0,
    .init = fp32_init,
    .destroy = NULL,
};
