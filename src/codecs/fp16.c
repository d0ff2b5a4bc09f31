/*
 * fp16.c — the fp16 baseline codec (VQ_METHOD_FP16): the speed and quality reference every
 * compressed method is compared against.
 *
 * Block layout (block_tokens = 1, block_bytes = 2*d):
 *   offset 0: d x IEEE binary16 (little-endian), channel order, round to nearest even.
 * Prepared query: d x fp32 (the query itself). Accumulator: d x fp32 (output domain; finish
 * copies it). Encode rejects NaN/Inf (NON_FINITE) and |x| > 65504 (RANGE), so a stored value
 * is never inf. Parameters used: head_dim (bits and all other options are ignored).
 */
#include <math.h>
#include <string.h>

#include "codecs/codec_impl.h"
#include "codecs/fp16.h"

/* ---- scalar reference kernels -------------------------------------------------------------- */

/* scores[t] = <q, x_t> for n records of d fp16 values. Row conversion is exact, the dot is a
 * plain fp32 sum in four interleaved partial sums. */
void vq_fp16_score_ref(const float *q, const uint16_t *x, int d, int64_t n, float *scores) {
    float row[1024];
    for (int64_t t = 0; t < n; t++) {
        vq_fp16_to_fp32_row(x + t * d, row, d);
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int c = 0; c < d; c += 4) {
            s0 += q[c] * row[c];
            s1 += q[c + 1] * row[c + 1];
            s2 += q[c + 2] * row[c + 2];
            s3 += q[c + 3] * row[c + 3];
        }
        scores[t] = (s0 + s1) + (s2 + s3);
    }
}

/* acc[c] += sum_t w[t] * x_t[c] for n records of d fp16 values. */
void vq_fp16_accumulate_ref(const uint16_t *x, int d, int64_t n, const float *w, float *acc) {
    float row[1024];
    for (int64_t t = 0; t < n; t++) {
        const float wt = w[t];
        if (wt == 0.0f) continue;
        vq_fp16_to_fp32_row(x + t * d, row, d);
        for (int c = 0; c < d; c++) acc[c] += wt * row[c];
    }
}

/* ---- vtable glue ---------------------------------------------------------------------------- */

typedef void (*vq_fp16_score_fn)(const float *, const uint16_t *, int, int64_t, float *);
typedef void (*vq_fp16_acc_fn)(const uint16_t *, int, int64_t, const float *, float *);

struct vq_fp16_impl {
    vq_fp16_score_fn score;
    vq_fp16_acc_fn accumulate;
};

static vq_status fp16_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                             uint8_t *dst) {
    const int64_t n = n_blocks * c->p.head_dim;
    vq_status st = VQ_STATUS_OK;
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        if (!isfinite(v)) return VQ_STATUS_NON_FINITE;
        if (fabsf(v) > 65504.0f) st = VQ_STATUS_RANGE;
    }
    if (st != VQ_STATUS_OK) return st;
    vq_fp32_to_fp16_row(x, (uint16_t *)(void *)dst, n);
    return VQ_STATUS_OK;
}

static void fp16_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    vq_fp16_to_fp32_row((const uint16_t *)(const void *)src, x, n_blocks * c->p.head_dim);
}

static void fp16_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    memcpy(qs, q, (size_t)c->p.head_dim * sizeof(float));
}

static void fp16_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores) {
    const struct vq_fp16_impl *im = c->impl;
    im->score((const float *)qs, (const uint16_t *)(const void *)codes, c->p.head_dim, n_tokens,
              scores);
}

static void fp16_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc) {
    const struct vq_fp16_impl *im = c->impl;
    im->accumulate((const uint16_t *)(const void *)codes, c->p.head_dim, n_tokens, w, acc);
}

static void fp16_finish(const struct vq_codec *c, const float *acc, float *out) {
    memcpy(out, acc, (size_t)c->p.head_dim * sizeof(float));
}

static vq_status fp16_init(struct vq_codec *c) {
    struct vq_fp16_impl *im = vq_alloc(sizeof *im);
    if (!im) return VQ_STATUS_NO_MEMORY;
    im->score = vq_fp16_score_ref;
    im->accumulate = vq_fp16_accumulate_ref;
#ifdef VQ_HAVE_X86
    if (c->isa == VQ_ISA_AVX512) {
        im->score = vq_fp16_score_avx512;
        im->accumulate = vq_fp16_accumulate_avx512;
    } else if (c->isa == VQ_ISA_AVX2) {
        im->score = vq_fp16_score_avx2;
        im->accumulate = vq_fp16_accumulate_avx2;
    }
#endif
    const int d = c->p.head_dim;
    c->impl = im;
    c->block_tokens = 1;
    c->block_bytes = (size_t)d * 2;
    c->query_bytes = (size_t)d * sizeof(float);
    c->acc_floats = (size_t)d;
    c->encode = fp16_encode;
    c->decode = fp16_decode;
    c->prepare_query = fp16_prepare_query;
    c->score = fp16_score;
    c->accumulate = fp16_accumulate;
    c->finish = fp16_finish;
    return VQ_STATUS_OK;
}

static void fp16_destroy(struct vq_codec *c) {
    vq_free(c->impl);
    c->impl = NULL;
}

const struct vq_codec_i vq_codec_fp16 = {
    .name = "fp16",
    .params_doc = "(none)",
    .bits_formula = "16",
    .needs_calibration = 0,
    .default_bits = 16,
    .min_bits = 16,
    .max_bits = 16,
    .flags = VQ_METHOD_F_FP16_ROWS,
    .init = fp16_init,
    .destroy = fp16_destroy,
};
