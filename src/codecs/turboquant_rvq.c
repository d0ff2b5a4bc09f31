/*
 * turboquant_rvq.c — two-stage residual quantizer of VeloxQuant-MLX (docs/ALGORITHMS.md §6),
 * compatibility mode. Per token: n = ||x||, u = x/n, y = RHT(u); stage 1 encodes y with the
 * b-bit N(0,1) Lloyd-Max codebook / sqrt(d); stage 2 encodes the residual r = y - c1[i1] with
 * the b-bit Laplace(scale 1) Lloyd-Max codebook times lambda = sigma_q / sqrt(2),
 * sigma_q = d^-1/2 * (sqrt(3*pi)/2) * 4^-b (the constant of the reference implementation).
 * Decoded: x^ = n * RHT^-1(c1[i1] + c2[i2]). Parameters: bits 1 or 2 (per stage), seed.
 *
 * Record layout (one token, block_tokens = 1), little-endian:
 *   bytes [0, 2)        n as vq_sf16
 *   then 8 * ceil(d*b/32) bytes: one stream of combined 2b-bit codes, code j = i1_j | i2_j << b
 *                       at bit offset 2b*j (LSB-first), zero padded. (Same bytes as the two
 *                       uint32-word streams of the reference implementation, but one 2b-bit
 *                       plane lets the fused kernels look up c1[i1] + c2[i2] with a single
 *                       shift + table lookup per code, as turboquant_mse with 2b bits.)
 *   block_bytes = 2 + 8 * ceil(d*b/32).
 * A vector with ||x|| < 1e-30 is stored as n = 0 with all codes 0. Ties go to the lower cell
 * (index = number of boundaries strictly below).
 *
 * Fused paths as turboquant_mse with 2b bits (turboquant_kernels.h, one plane of 2b-bit codes)
 * with the 2^(2b)-entry level table level[i1 | i2 << b] = c1[i1] + c2[i2].
 */
#include <math.h>
#include <string.h>

#include "codecs/codec_impl.h"
#include "codecs/turboquant_kernels.h"

typedef struct tq_rvq {
    struct vq_tq_base b; /* rotation, kernel layout, kernels (must be first) */
    int bits;
    int code_bytes;     /* 8 * ceil(d*b/32): combined 2b-bit codes + zero padding */
    float c1[4], b1[3]; /* stage 1 levels / boundaries (scaled) */
    float c2[4], b2[3]; /* stage 2 levels / boundaries (scaled) */
    float lv[16];       /* combined levels */
} tq_rvq;

#define RVQ_TINY 1e-30

static vq_status rvq_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                            uint8_t *dst) {
    const tq_rvq *m = (const tq_rvq *)c->impl;
    const int d = c->p.head_dim, b = m->bits, nb = (1 << b) - 1;
    float y[1024];
    uint8_t ic[1024];
    for (int64_t t = 0; t < n_blocks; t++) {
        const float *xt = x + t * d;
        uint8_t *r = dst + t * (int64_t)c->block_bytes;
        double nn = 0.0;
        for (int j = 0; j < d; j++) {
            if (!isfinite(xt[j])) return VQ_STATUS_NON_FINITE;
            nn += (double)xt[j] * xt[j];
        }
        double n = sqrt(nn);
        memset(r, 0, c->block_bytes);
        if (n < RVQ_TINY) continue;
        if (!vq_sf16_fits((float)n)) return VQ_STATUS_RANGE;
        float inv = (float)(1.0 / n);
        for (int j = 0; j < d; j++) y[j] = xt[j] * inv;
        vq_rht_forward(&m->b.rht, y, y);
        for (int j = 0; j < d; j++) {
            int a = vq_lm_encode(y[j], m->b1, nb);
            int e = vq_lm_encode(y[j] - m->c1[a], m->b2, nb);
            ic[j] = (uint8_t)(a | e << b);
        }
        uint16_t h = vq_fp32_to_sf16((float)n);
        r[0] = (uint8_t)(h & 0xff);
        r[1] = (uint8_t)(h >> 8);
        vq_pack(ic, d, 2 * b, r + 2);
    }
    return VQ_STATUS_OK;
}

static vq_status rvq_init(struct vq_codec *c) {
    const int d = c->p.head_dim, b = c->p.bits;
    if (b < 1 || b > 2) return VQ_STATUS_INVALID_ARG;
    if (d < 8 || d > 1024 || d % 8 != 0) return VQ_STATUS_INVALID_ARG;
    const float *g, *gb, *l, *lb;
    VQ_RETURN_IF_ERR(vq_lloyd_max(VQ_LAW_GAUSS, b, 0, &g, &gb));
    VQ_RETURN_IF_ERR(vq_lloyd_max(VQ_LAW_LAPLACE, b, 0, &l, &lb));
    tq_rvq *m = (tq_rvq *)vq_alloc(sizeof(*m));
    if (!m) return VQ_STATUS_NO_MEMORY;
    vq_status st = vq_rht_init(&m->b.rht, d, c->p.seed);
    if (st != VQ_STATUS_OK) {
        vq_rht_free(&m->b.rht);
        vq_free(m);
        return st;
    }
    m->bits = b;
    const int L = 1 << b;
    const double inv_sqrt_d = 1.0 / sqrt((double)d);
    const double sigma_q = inv_sqrt_d * (sqrt(3.0 * 3.14159265358979323846) / 2.0) * pow(4.0, -b);
    const double lambda = sigma_q / sqrt(2.0);
    for (int i = 0; i < L; i++) {
        m->c1[i] = (float)(g[i] * inv_sqrt_d);
        m->c2[i] = (float)(l[i] * lambda);
    }
    for (int i = 0; i + 1 < L; i++) {
        m->b1[i] = (float)(gb[i] * inv_sqrt_d);
        m->b2[i] = (float)(lb[i] * lambda);
    }
    for (int i2 = 0; i2 < L; i2++)
        for (int i1 = 0; i1 < L; i1++) m->lv[i1 | i2 << b] = m->c1[i1] + m->c2[i2];
    m->code_bytes = 8 * ((d * b + 31) / 32);
    const int rec = 2 + m->code_bytes;
    vq_tq_kern_init(&m->b.k, d, 2 * b, 0, 2, 2, rec, m->lv, c->isa);
    vq_tq_kern_select(&m->b.k, c->isa, &m->b.score, &m->b.acc);
    c->impl = m;
    c->block_tokens = 1;
    c->block_bytes = (size_t)rec;
    c->query_bytes = sizeof(float) * (size_t)m->b.k.q_floats;
    c->acc_floats = (size_t)m->b.k.dpad;
    c->encode = rvq_encode;
    c->decode = vq_tq_codec_decode;
    c->prepare_query = vq_tq_codec_prepare_query;
    c->score = vq_tq_codec_score;
    c->accumulate = vq_tq_codec_accumulate;
    vq_tq_codec_set_multi(c, &m->b.k);
    c->finish = vq_tq_codec_finish;
    return VQ_STATUS_OK;
}

const struct vq_codec_i vq_codec_turboquant_rvq = {
    .name = "turboquant_rvq",
    .params_doc = "bits=1..2 (per stage) seed",
    .bits_formula = "2*ceil(d*b/32)*32/d + 16/d",
    .needs_calibration = 0,
    .default_bits = 2,
    .min_bits = 1,
    .max_bits = 2,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_CENTERED | VQ_METHOD_F_OUTLIER_TOKENS |
             VQ_METHOD_F_OUTLIER_CHANNELS,
    .init = rvq_init,
    .destroy = vq_tq_codec_destroy,
};
