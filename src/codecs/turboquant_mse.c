/*
 * turboquant_mse.c — TurboQuant-MSE (docs/ALGORITHMS.md §3.1): normalize, randomized Hadamard
 * rotation, per-coordinate Gaussian Lloyd-Max codebook scaled by 1/sqrt(d), one 16-bit scale.
 *
 * Parameters: bits 1..8; unbiased_scale (default 1): store s = n / <y, yhat> (removes the
 * 1 - D shrinkage of inner products, docs/ALGORITHMS.md §3.6), else s = n = ||x||. seed selects the
 * rotation signs (and the block-diagonal permutation for non-Hadamard head dims).
 *
 * Record layout (one token, block_tokens = 1), little-endian, no padding:
 *   bytes [0, 2)   s as vq_sf16 (sign, 6-bit exponent bias 31, 9-bit mantissa)
 *   b = 1, 2, 4:   bytes [2, 2 + d*b/8): codes, code j at bit offset j*b of the LSB-first bit
 *                  stream (byte k holds bits 8k..8k+7; for b = 4 the low nibble is code 2k)
 *   b = 3:         two planes: bytes [2, 2 + d/4): low 2 bits of code j at bit offset 2j;
 *                  then bytes [2 + d/4, 2 + d/4 + d/8): high bit of code j at bit offset j
 *   b = 5..8:      bytes [2, 2 + d*b/8): codes, code j at bit offset j*b of the LSB-first bit
 *                  stream (b = 8: byte j; b = 5..7: a code may straddle two bytes)
 *   block_bytes = 2 + ceil(d*b/8) = 2 + d*b/8 (d is a multiple of 8).
 * Code i means level c_i / sqrt(d), c = the N(0,1) Lloyd-Max centroids (ascending); the
 * decoded vector is x^ = s * RHT^-1(level[code]). Encoding picks index = number of
 * boundaries strictly below the rotated coordinate. A vector with ||x|| < 1e-30 is stored as
 * s = 0 with all codes 0.
 *
 * Fused paths: prepare_query stores RHT(q) (b <= 4: chunk-interleaved, see
 * turboquant_kernels.h; b >= 5: natural order, see wide_kernels.h); score = s_t * <q_r,
 * level[codes_t]>; accumulate adds w_t * s_t * level[codes_t] in the rotated domain; finish
 * applies RHT^-1 once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec_impl.h"
#include "codecs/turboquant_kernels.h"
#include "codecs/wide_kernels.h"

typedef struct tq_mse {
    /* rotation, kernel layout, kernels (must be first; both start with the rotation):
     * t for b <= 4, w for b >= 5 */
    union {
        struct vq_tq_base t;
        struct vq_wk_base w;
    } b;
    int bits;
    int unbiased;
    float cb[256];  /* (2^bits) levels: Gaussian centroids / sqrt(d) */
    float bnd[255]; /* (2^bits - 1) boundaries / sqrt(d) */
} tq_mse;

#define TQ_TINY 1e-30

static vq_status mse_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                            uint8_t *dst) {
    const tq_mse *m = (const tq_mse *)c->impl;
    const int d = c->p.head_dim, b = m->bits, L = 1 << b;
    float y[1024];
    uint8_t idx[1024], tmp[1024];
    for (int64_t t = 0; t < n_blocks; t++) {
        const float *xt = x + t * d;
        uint8_t *r = dst + t * (int64_t)c->block_bytes;
        double nn = 0.0;
        for (int j = 0; j < d; j++) {
            if (!isfinite(xt[j])) return VQ_STATUS_NON_FINITE;
            nn += (double)xt[j] * xt[j];
        }
        double n = sqrt(nn);
        if (n < TQ_TINY) {
            memset(r, 0, c->block_bytes);
            continue;
        }
        if (n > VQ_SF16_MAX) return VQ_STATUS_RANGE;
        float inv = (float)(1.0 / n);
        for (int j = 0; j < d; j++) y[j] = xt[j] * inv;
        vq_rht_forward(&m->b.t.rht, y, y);
        /* index = number of boundaries strictly below y_j; b <= 6 boundary-major so the inner
         * loop vectorizes (at b = 5 about 4x faster than the branchy search, which took 1.8 %
         * of a kv5 decode step at depth 512), b >= 7 by binary search (same count: the
         * boundaries ascend) */
        int32_t ii[1024];
        if (b <= 6) {
            for (int j = 0; j < d; j++) ii[j] = 0;
            for (int i = 0; i < L - 1; i++) {
                const float bd = m->bnd[i];
                for (int j = 0; j < d; j++) ii[j] += y[j] > bd;
            }
        } else {
            for (int j = 0; j < d; j++) {
                int lo = 0, hi = L - 1;
                while (lo < hi) {
                    const int mid = (lo + hi) >> 1;
                    if (m->bnd[mid] < y[j]) lo = mid + 1;
                    else hi = mid;
                }
                ii[j] = lo;
            }
        }
        double dot = 0.0;
        for (int j = 0; j < d; j++) {
            idx[j] = (uint8_t)ii[j];
            dot += (double)y[j] * m->cb[ii[j]];
        }
        double s = n;
        if (m->unbiased && dot > 1e-12) s = n / dot;
        if (!vq_sf16_fits((float)s)) return VQ_STATUS_RANGE;
        uint16_t h = vq_fp32_to_sf16((float)s);
        r[0] = (uint8_t)(h & 0xff);
        r[1] = (uint8_t)(h >> 8);
        if (b >= 5) {
            vq_wk_put_codes(&m->b.w.k, idx, r);
        } else if (b == 3) {
            for (int j = 0; j < d; j++) tmp[j] = idx[j] & 3u;
            vq_pack(tmp, d, 2, r + 2);
            for (int j = 0; j < d; j++) tmp[j] = idx[j] >> 2;
            vq_pack(tmp, d, 1, r + 2 + d / 4);
        } else {
            vq_pack(idx, d, b, r + 2);
        }
    }
    return VQ_STATUS_OK;
}

static vq_status mse_init(struct vq_codec *c) {
    const int d = c->p.head_dim, b = c->p.bits;
    if (b < 1 || b > 8) return VQ_STATUS_INVALID_ARG;
    if (d < 8 || d > 1024 || d % 8 != 0) return VQ_STATUS_INVALID_ARG;
    const float *cb, *bnd;
    VQ_RETURN_IF_ERR(vq_lloyd_max(VQ_LAW_GAUSS, b, 0, &cb, &bnd));
    tq_mse *m = (tq_mse *)vq_alloc(sizeof(*m));
    if (!m) return VQ_STATUS_NO_MEMORY;
    vq_status st = vq_rht_init(&m->b.t.rht, d, c->p.seed);
    if (st != VQ_STATUS_OK) {
        vq_rht_free(&m->b.t.rht);
        vq_free(m);
        return st;
    }
    m->bits = b;
    m->unbiased = c->p.unbiased_scale != 0;
    c->p.unbiased_scale = m->unbiased;
    const float sc = 1.0f / sqrtf((float)d);
    for (int i = 0; i < (1 << b); i++) m->cb[i] = cb[i] * sc;
    for (int i = 0; i + 1 < (1 << b); i++) m->bnd[i] = bnd[i] * sc;
    c->impl = m;
    c->encode = mse_encode;
    if (b >= 5) {
        vq_wk_init(&m->b.w.k, d, b, 0, m->cb);
        vq_wk_codec_setup(c);
        return VQ_STATUS_OK;
    }
    const int rec = 2 + d * b / 8;
    if (b == 3) vq_tq_kern_init(&m->b.t.k, d, 2, 1, 2, 2 + d / 4, rec, m->cb, c->isa);
    else vq_tq_kern_init(&m->b.t.k, d, b, 0, 2, 0, rec, m->cb, c->isa);
    vq_tq_kern_select(&m->b.t.k, c->isa, &m->b.t.score, &m->b.t.acc);
    c->block_tokens = 1;
    c->block_bytes = (size_t)rec;
    c->query_bytes = sizeof(float) * (size_t)m->b.t.k.q_floats;
    c->acc_floats = (size_t)m->b.t.k.dpad;
    c->decode = vq_tq_codec_decode;
    c->prepare_query = vq_tq_codec_prepare_query;
    c->score = vq_tq_codec_score;
    c->accumulate = vq_tq_codec_accumulate;
    vq_tq_codec_set_multi(c, &m->b.t.k);
    c->finish = vq_tq_codec_finish;
    return VQ_STATUS_OK;
}

const struct vq_codec_i vq_codec_turboquant_mse = {
    .name = "turboquant_mse",
    .params_doc = "bits=1..8 unbiased_scale=0|1 seed",
    .bits_formula = "b + 16/d",
    .needs_calibration = 0,
    .default_bits = 4,
    .min_bits = 1,
    .max_bits = 8,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_CENTERED | VQ_METHOD_F_OUTLIER_TOKENS |
             VQ_METHOD_F_OUTLIER_CHANNELS,
    .init = mse_init,
    .destroy = vq_tq_codec_destroy,
};
