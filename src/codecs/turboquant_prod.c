/*
 * turboquant_prod.c — TurboQuant inner-product codec (arXiv 2504.19874, docs/ALGORITHMS.md §3.2):
 * (b-1)-bit TurboQuant-MSE codes of the unit vector in the rotated domain plus a 1-bit QJL
 * sketch of the rotated residual, giving an unbiased inner-product estimator.
 *
 * Math. R = vq_rht(d, seed); S = the Hadamard sketch of qjl.h (m rows, seeds derived from the
 * same seed); c[] = Lloyd-Max codebook of the sphere law (VQ_LAW_SPHERE) with b-1 bits, scaled by
 * 1/sqrt(d); K = sqrt(pi/2).
 *   encode:  n = ||x||, y = R (x/n), idx_j = LM(y_j), y^_j = c[idx_j], r' = y - y^,
 *            gamma = ||r'||, z = sign(S r')
 *   score:   <q,x> ~ n * ( <q_r, y^> + K/m * gamma * <S q_r, z> ),  q_r = R q
 *   decode:  x^ = n * R^T ( y^ + K/m * gamma * S^T z )
 * The stored scale is n (the paper's choice), not the "unbiased scale" of turboquant_mse: the
 * QJL stage removes the MSE bias, so the estimator is unbiased over the random signs of S.
 *
 * Parameters: head_dim (8..1024, multiple of 8), bits b = 2..4, jl_dim m (0 = head_dim;
 * 8..8192, multiple of 8; m > d uses ceil(m/d) independent sketch blocks), seed.
 *
 * Block layout (one token per block, block_bytes = 4 + d*(b-1)/8 + m/8):
 *   offset 0, 2 bytes: n = ||x|| as vq_sf16, little-endian
 *   offset 2, 2 bytes: gamma = ||r'|| (residual of the unit vector) as vq_sf16, little-endian
 *   offset 4, d*(b-1)/8 bytes: MSE codes, code j (rotated coordinate j) at bit offset j*(b-1)
 *                        of an LSB-first little-endian bit stream (vq_pack)
 *   offset 4 + d*(b-1)/8, m/8 bytes: sign bits of S r'; bit i = bit (i % 8) of byte i/8,
 *                        1 means (S r')_i > 0.
 * A token whose n rounds to sf16 zero is stored as all-zero bytes (decodes to 0, scores 0).
 * Bits/elem = (b-1) + m/d + 32/d (d = m = 128: 2.25 / 3.25 / 4.25 for b = 2 / 3 / 4).
 *
 * Prepared query (query_bytes = 4 * (pad16(d) + pad16(m) + 16)): floats q_r = R q (d,
 * zero-padded to pad16(d)), a = S q_r (m, zero-padded to pad16(m)), then sum(a).
 * Accumulator (acc_floats = d + m): [0, d) sum_t w_t n_t y^_t (rotated domain),
 * [d, d+m) sum_t w_t n_t K/m gamma_t z_t (sketch domain); finish = R^T (acc0 + S^T acc1).
 */
#include <math.h>
#include <string.h>

#include "codecs/qjl.h"

#define VQ_SQRT_HALF_PI 1.25331413731550025f
#define PROD_CHUNK 128

struct prod_impl {
    struct vq_prod_multi mq;   /* first: the shared multi-query slots (qjl.h) read it */
    int d, m, bm;              /* bm = b - 1 bits of the MSE stage */
    size_t code_bytes;         /* d * bm / 8 */
    size_t q_floats, a_floats; /* pad16(d), pad16(m) */
    float cb[16];              /* 2^bm centroids at unit-vector scale (rest 0) */
    float bounds[15];          /* 2^bm - 1 boundaries at unit-vector scale */
    vq_rht rot;
    vq_sketch sk;
    vq_signdot_rows_fn signdot;
    vq_lutdot_rows_fn lutdot;
    vq_signacc_fn signacc;
    vq_lutacc_fn lutacc;
};

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

static vq_status prod_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                             uint8_t *dst) {
    const struct prod_impl *im = (const struct prod_impl *)c->impl;
    const int d = im->d, nb = (1 << im->bm) - 1;
    float y[VQ_SKETCH_MAX_D];
    uint8_t idx[VQ_SKETCH_MAX_D];
    for (int64_t t = 0; t < n_blocks; t++) {
        const float *xt = x + (size_t)t * (size_t)d;
        uint8_t *o = dst + (size_t)t * c->block_bytes;
        const double ss = vq_sumsq_finite(xt, d);
        if (ss < 0.0) return VQ_STATUS_NON_FINITE;
        const double nrm = sqrt(ss);
        if (nrm > (double)VQ_SF16_MAX || !vq_sf16_fits((float)nrm)) return VQ_STATUS_RANGE;
        const uint16_t hn = vq_fp32_to_sf16((float)nrm);
        if (vq_sf16_to_fp32(hn) == 0.0f) {
            memset(o, 0, c->block_bytes);
            continue;
        }
        const float inv = (float)(1.0 / nrm);
        for (int j = 0; j < d; j++) y[j] = xt[j] * inv;
        vq_rht_forward(&im->rot, y, y);
        for (int j = 0; j < d; j++) {
            idx[j] = (uint8_t)vq_lm_encode(y[j], im->bounds, nb);
            y[j] -= im->cb[idx[j]]; /* y becomes the residual r' */
        }
        const double g2 = vq_sumsq_finite(y, d);
        vq_wr_le16(o, hn);
        vq_wr_le16(o + 2, vq_fp32_to_sf16((float)sqrt(g2)));
        vq_pack(idx, d, im->bm, o + 4);
        vq_sketch_signs(&im->sk, y, o + 4 + im->code_bytes);
    }
    return VQ_STATUS_OK;
}

/* v (d, rotated domain, unit scale) = y^ + K/m * gamma * S^T z of one stored token. */
static void prod_rotated(const struct prod_impl *im, const uint8_t *s, float *v) {
    float zs[VQ_QJL_MAX_M];
    uint8_t idx[VQ_SKETCH_MAX_D];
    const float g = VQ_SQRT_HALF_PI / (float)im->m * vq_sf16_to_fp32(vq_rd_le16(s + 2));
    const uint8_t *z = s + 4 + im->code_bytes;
    for (int i = 0; i < im->m; i++) zs[i] = ((z[i >> 3] >> (i & 7)) & 1) ? g : -g;
    vq_sketch_transpose(&im->sk, zs, v);
    vq_unpack(s + 4, im->d, im->bm, idx);
    for (int j = 0; j < im->d; j++) v[j] += im->cb[idx[j]];
}

static void prod_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct prod_impl *im = (const struct prod_impl *)c->impl;
    for (int64_t t = 0; t < n_blocks; t++) {
        const uint8_t *s = src + (size_t)t * c->block_bytes;
        float *xt = x + (size_t)t * (size_t)im->d;
        const float n = vq_sf16_to_fp32(vq_rd_le16(s));
        prod_rotated(im, s, xt);
        vq_rht_inverse(&im->rot, xt, xt);
        for (int j = 0; j < im->d; j++) xt[j] *= n;
    }
}

static void prod_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    const struct prod_impl *im = (const struct prod_impl *)c->impl;
    float *qr = (float *)qs;
    float *a = qr + im->q_floats;
    vq_rht_forward(&im->rot, q, qr);
    for (size_t j = (size_t)im->d; j < im->q_floats; j++) qr[j] = 0.0f;
    vq_sketch_apply(&im->sk, qr, a);
    float sum = 0.0f;
    for (int i = 0; i < im->m; i++) sum += a[i];
    for (size_t i = (size_t)im->m; i < im->a_floats + 16; i++) a[i] = 0.0f;
    a[im->a_floats] = sum;
}

static void prod_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores) {
    const struct prod_impl *im = (const struct prod_impl *)c->impl;
#if defined(VQ_HAVE_X86)
    if (im->mq.msc) {
        vq_prod_codec_score_multi(c, &qs, 1, codes, n_tokens, &scores);
        return;
    }
#endif
    const float *qr = (const float *)qs;
    const float *a = qr + im->q_floats;
    const size_t bb = c->block_bytes;
    const float k = VQ_SQRT_HALF_PI / (float)im->m;
    float sd[PROD_CHUNK];
    for (int64_t t0 = 0; t0 < n_tokens; t0 += PROD_CHUNK) {
        const int64_t nc = (n_tokens - t0 < PROD_CHUNK) ? n_tokens - t0 : PROD_CHUNK;
        const uint8_t *base = codes + (size_t)t0 * bb;
        im->lutdot(qr, im->cb, im->bm, im->d, base + 4, bb, nc, scores + t0);
        im->signdot(a, a[im->a_floats], im->m, base + 4 + im->code_bytes, bb, nc, sd);
        for (int64_t t = 0; t < nc; t++) {
            const uint8_t *s = base + (size_t)t * bb;
            const float n = vq_sf16_to_fp32(vq_rd_le16(s));
            const float g = vq_sf16_to_fp32(vq_rd_le16(s + 2));
            scores[t0 + t] = n * (scores[t0 + t] + k * g * sd[t]);
        }
    }
}

static void prod_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc) {
    const struct prod_impl *im = (const struct prod_impl *)c->impl;
#if defined(VQ_HAVE_X86)
    if (im->mq.mac) {
        vq_prod_codec_accumulate_multi(c, codes, n_tokens, &w, 1, &acc);
        return;
    }
#endif
    const float k = VQ_SQRT_HALF_PI / (float)im->m;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *s = codes + (size_t)t * c->block_bytes;
        const float wn = w[t] * vq_sf16_to_fp32(vq_rd_le16(s));
        if (wn == 0.0f) continue;
        im->lutacc(s + 4, im->cb, im->bm, im->d, wn, acc);
        const float g = wn * k * vq_sf16_to_fp32(vq_rd_le16(s + 2));
        im->signacc(s + 4 + im->code_bytes, im->m, g, acc + im->d);
    }
}

static void prod_finish(const struct vq_codec *c, const float *acc, float *out) {
    const struct prod_impl *im = (const struct prod_impl *)c->impl;
    vq_sketch_transpose(&im->sk, acc + im->d, out);
    for (int j = 0; j < im->d; j++) out[j] += acc[j];
    vq_rht_inverse(&im->rot, out, out);
}

static void prod_destroy(struct vq_codec *c) {
    struct prod_impl *im = (struct prod_impl *)c->impl;
    if (!im) return;
    vq_sketch_free(&im->sk);
    vq_rht_free(&im->rot);
    vq_free(im);
    c->impl = NULL;
}

static vq_status prod_init(struct vq_codec *c) {
    const int d = c->p.head_dim, b = c->p.bits;
    if (d < 8 || d > VQ_SKETCH_MAX_D || d % 8 != 0) return VQ_STATUS_INVALID_ARG;
    if (b < 2 || b > 4) return VQ_STATUS_INVALID_ARG;
    const int m = c->p.jl_dim ? c->p.jl_dim : d;
    if (m < 8 || m > VQ_QJL_MAX_M || m % 8 != 0) return VQ_STATUS_INVALID_ARG;
    c->p.jl_dim = m;
    if (c->isa == VQ_ISA_AUTO) c->isa = vq_isa_resolve(c->p.isa);

    const float *cents = NULL, *bnds = NULL;
    VQ_RETURN_IF_ERR(vq_lloyd_max(VQ_LAW_SPHERE, b - 1, d, &cents, &bnds));

    struct prod_impl *im = (struct prod_impl *)vq_alloc(sizeof(*im));
    if (!im) return VQ_STATUS_NO_MEMORY;
    im->d = d;
    im->m = m;
    im->bm = b - 1;
    im->code_bytes = (size_t)d * (size_t)im->bm / 8;
    im->q_floats = pad16((size_t)d);
    im->a_floats = pad16((size_t)m);
    const float sc = 1.0f / sqrtf((float)d);
    for (int i = 0; i < (1 << im->bm); i++) im->cb[i] = cents[i] * sc;
    for (int i = 0; i < (1 << im->bm) - 1; i++) im->bounds[i] = bnds[i] * sc;
    vq_status st = vq_rht_init(&im->rot, d, c->p.seed);
    if (st != VQ_STATUS_OK) {
        vq_free(im);
        return st;
    }
    st = vq_sketch_init(&im->sk, d, m, c->p.seed);
    if (st != VQ_STATUS_OK) {
        vq_rht_free(&im->rot);
        vq_free(im);
        return st;
    }
    im->signdot = vq_signdot_rows_pick(c->isa);
    im->lutdot = vq_lutdot_rows_pick(c->isa);
    im->signacc = vq_signacc_pick(c->isa);
    im->lutacc = vq_lutacc_pick(c->isa);
    im->mq.pk.d = d;
    im->mq.pk.m = m;
    im->mq.pk.bm = im->bm;
    im->mq.pk.code_bytes = (int)im->code_bytes;
    im->mq.pk.rec = 4 + (int)im->code_bytes + m / 8;
    im->mq.pk.sign_off = 4 + (int)im->code_bytes;
    im->mq.pk.gamma = 1;
    im->mq.pk.q_floats = (int)im->q_floats;
    im->mq.pk.a_floats = (int)im->a_floats;
    im->mq.pk.k = VQ_SQRT_HALF_PI / (float)m;
    memcpy(im->mq.pk.cb, im->cb, sizeof im->cb);
#if defined(VQ_HAVE_X86)
    if (c->isa == VQ_ISA_AVX512) {
        const int vb = vq_cpu_avx512vbmi();
        im->mq.msc = vb ? vq_prod_score_multi_avx512vbmi : vq_prod_score_multi_avx512;
        im->mq.mac = vb ? vq_prod_acc_multi_avx512vbmi : vq_prod_acc_multi_avx512;
    }
#endif
    c->impl = im;
    c->block_tokens = 1;
    c->block_bytes = 4 + im->code_bytes + (size_t)m / 8;
    c->query_bytes = sizeof(float) * (im->q_floats + im->a_floats + 16);
    c->acc_floats = (size_t)d + (size_t)m;
    c->encode = prod_encode;
    c->decode = prod_decode;
    c->prepare_query = prod_prepare_query;
    c->score = prod_score;
    c->accumulate = prod_accumulate;
    c->finish = prod_finish;
    if (im->mq.msc) {
        c->score_multi = vq_prod_codec_score_multi;
        c->accumulate_multi = vq_prod_codec_accumulate_multi;
    }
    return VQ_STATUS_OK;
}

/* Registry entry (see codec.c). */
const struct vq_codec_i vq_codec_turboquant_prod = {
    .name = "turboquant_prod",
    .params_doc = "bits=2..4 (b-1 MSE bits + 1 QJL bit) jl_dim=m (0 = head_dim; multiple of 8)",
    .bits_formula = "(b-1) + m/d + 32/d",
    .needs_calibration = 0,
    .default_bits = 3,
    .min_bits = 2,
    .max_bits = 4,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_CENTERED | VQ_METHOD_F_OUTLIER_TOKENS |
             VQ_METHOD_F_OUTLIER_CHANNELS | VQ_METHOD_F_SKETCH,
    .init = prod_init,
    .destroy = prod_destroy,
};
