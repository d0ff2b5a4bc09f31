/*
 * qjl.c — QJL codec (arXiv 2406.03482): 1-bit quantized Johnson-Lindenstrauss sketch of keys,
 * plus the Hadamard sketch and sign-dot kernels shared with turboquant_prod (qjl.h).
 *
 * Math (docs/ALGORITHMS.md §4): S is the Hadamard sketch of qjl.h (m rows of norm sqrt(d),
 * S_b = sqrt(d) * RHT_b, independent signs per d-row block, m may exceed d).
 *   encode:  z = sign(S k) in {+1,-1}^m, n = ||k||
 *   score:   est<q,k> = sqrt(pi/2)/m * n * <S q, z>      (unbiased over the sketch signs)
 *   decode:  k^ = sqrt(pi/2)/m * n * S^T z                (low cosine, ~0.62 at m = d)
 * Values: qjl is meant for keys. Used for values, accumulate adds w_t * k^_t exactly as the
 * decode would (accumulated in the m-dimensional sketch domain, S^T applied once in finish),
 * so attention output equals the weighted sum of decodes.
 * Not implemented yet: the official code's outlier channels (per-32-token-group outlier sketch
 * and norm, docs/ALGORITHMS.md §4.2); a later issue.
 *
 * Parameters: head_dim (8..1024, multiple of 8), jl_dim m (0 = head_dim; 8..8192, multiple of
 * 8), seed. `bits` is ignored (always one bit per sketch row).
 *
 * Block layout (one token per block, block_bytes = 2 + m/8):
 *   offset 0, 2 bytes: n = ||k|| as vq_sf16, little-endian
 *   offset 2, m/8 bytes: sign bits of S k; bit i = bit (i % 8) of byte 2 + i/8, 1 means
 *                        (S k)_i > 0 (z_i = +1), 0 means z_i = -1.
 * A token whose n rounds to sf16 zero is stored as all-zero bytes (decodes to 0, scores 0).
 * Bits/elem = (m + 16) / d (1.125 at m = d = 128, 2.125 at m = 2d).
 *
 * Prepared query (query_bytes = 4 * (pad16(m) + 16)): floats a = S q (m, zero-padded to a
 * multiple of 16), then sum(a).
 * Accumulator (acc_floats = m): sum_t w_t * sqrt(pi/2)/m * n_t * z_t; finish applies S^T.
 */
#include <math.h>
#include <string.h>

#include "codecs/qjl.h"

#define VQ_SQRT_HALF_PI 1.25331413731550025f

/* ============================== Hadamard sketch =========================================== */

uint64_t vq_sketch_block_seed(uint64_t seed, int b) {
    vq_rng r;
    vq_rng_seed(&r, seed ^ 0x514a4c534b455443ull); /* "QJLSKETC" */
    uint64_t s = 0;
    for (int i = 0; i <= b; i++) s = vq_rng_u64(&r);
    return s;
}

vq_status vq_sketch_init(vq_sketch *sk, int d, int m, uint64_t seed) {
    memset(sk, 0, sizeof(*sk));
    if (d < 1 || d > VQ_SKETCH_MAX_D || m < 1 || m > VQ_QJL_MAX_M) return VQ_STATUS_INVALID_ARG;
    sk->d = d;
    sk->m = m;
    sk->n_blocks = (m + d - 1) / d;
    sk->scale = sqrtf((float)d);
    sk->blk = (vq_rht *)vq_alloc(sizeof(vq_rht) * (size_t)sk->n_blocks);
    if (!sk->blk) return VQ_STATUS_NO_MEMORY;
    for (int b = 0; b < sk->n_blocks; b++) {
        vq_status st = vq_rht_init(&sk->blk[b], d, vq_sketch_block_seed(seed, b));
        if (st != VQ_STATUS_OK) {
            for (int j = 0; j < b; j++) vq_rht_free(&sk->blk[j]);
            vq_free(sk->blk);
            sk->blk = NULL;
            return st;
        }
    }
    return VQ_STATUS_OK;
}

void vq_sketch_free(vq_sketch *sk) {
    if (!sk || !sk->blk) return;
    for (int b = 0; b < sk->n_blocks; b++) vq_rht_free(&sk->blk[b]);
    vq_free(sk->blk);
    sk->blk = NULL;
}

void vq_sketch_apply(const vq_sketch *sk, const float *x, float *out) {
    float tmp[VQ_SKETCH_MAX_D];
    const int d = sk->d;
    for (int b = 0; b < sk->n_blocks; b++) {
        vq_rht_forward(&sk->blk[b], x, tmp);
        const int r0 = b * d, r1 = (r0 + d < sk->m) ? r0 + d : sk->m;
        for (int i = r0; i < r1; i++) out[i] = sk->scale * tmp[i - r0];
    }
}

void vq_sketch_signs(const vq_sketch *sk, const float *x, uint8_t *bits) {
    float tmp[VQ_SKETCH_MAX_D];
    const int d = sk->d;
    for (int b = 0; b < sk->n_blocks; b++) {
        vq_rht_forward(&sk->blk[b], x, tmp);
        const int r0 = b * d, r1 = (r0 + d < sk->m) ? r0 + d : sk->m; /* multiples of 8 */
        for (int i = r0; i < r1; i += 8) {
            unsigned byte = 0; /* branch-free: the signs are random */
            for (int k = 0; k < 8; k++) byte |= (unsigned)(tmp[i - r0 + k] > 0.0f) << k;
            bits[i >> 3] = (uint8_t)byte;
        }
    }
}

void vq_sketch_transpose(const vq_sketch *sk, const float *v, float *out) {
    float tmp[VQ_SKETCH_MAX_D];
    const int d = sk->d;
    for (int j = 0; j < d; j++) out[j] = 0.0f;
    for (int b = 0; b < sk->n_blocks; b++) {
        const int r0 = b * d, r1 = (r0 + d < sk->m) ? r0 + d : sk->m;
        for (int i = r0; i < r1; i++) tmp[i - r0] = v[i];
        for (int i = r1 - r0; i < d; i++) tmp[i] = 0.0f;
        vq_rht_inverse(&sk->blk[b], tmp, tmp);
        for (int j = 0; j < d; j++) out[j] += sk->scale * tmp[j];
    }
}

/* ============================== row kernels (reference) =================================== */

/* Flips the sign of a unless bit is 1 (branch-free, vectorizable). */
static inline float vq_signed_(float a, unsigned bit) {
    uint32_t u;
    memcpy(&u, &a, 4);
    u ^= (uint32_t)(~bit & 1u) << 31;
    memcpy(&a, &u, 4);
    return a;
}

void vq_signdot_rows_ref(const float *a, float sum_a, int m, const uint8_t *src, size_t stride,
                         int64_t n, float *out) {
    (void)sum_a;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *z = src + (size_t)t * stride;
        float s = 0.0f;
        for (int p = 0; p < m / 8; p++) {
            const unsigned byte = z[p];
            for (int i = 0; i < 8; i++) s += vq_signed_(a[8 * p + i], byte >> i);
        }
        out[t] = s;
    }
}

void vq_signacc_ref(const uint8_t *z, int m, float g, float *acc) {
    for (int p = 0; p < m / 8; p++) {
        const unsigned byte = z[p];
        for (int i = 0; i < 8; i++) acc[8 * p + i] += vq_signed_(g, byte >> i);
    }
}

/* The 8 codes of group p (bits bytes at src + p * bits) as one little-endian word. */
static inline uint32_t vq_code_group_(const uint8_t *src, int p, int bits) {
    const uint8_t *g = src + (size_t)p * (size_t)bits;
    uint32_t x = 0;
    for (int i = 0; i < bits; i++) x |= (uint32_t)g[i] << (8 * i);
    return x;
}

void vq_lutdot_rows_ref(const float *q, const float *cb, int bits, int d, const uint8_t *src,
                        size_t stride, int64_t n, float *out) {
    VQ_ASSERT(bits >= 1 && bits <= 3 && d % 8 == 0);
    const uint32_t mask = (1u << bits) - 1u;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *row = src + (size_t)t * stride;
        float s = 0.0f;
        for (int p = 0; p < d / 8; p++) {
            const uint32_t x = vq_code_group_(row, p, bits);
            for (int i = 0; i < 8; i++) s += q[8 * p + i] * cb[(x >> (i * bits)) & mask];
        }
        out[t] = s;
    }
}

void vq_lutacc_ref(const uint8_t *codes, const float *cb, int bits, int d, float wn, float *acc) {
    VQ_ASSERT(bits >= 1 && bits <= 3 && d % 8 == 0);
    const uint32_t mask = (1u << bits) - 1u;
    for (int p = 0; p < d / 8; p++) {
        const uint32_t x = vq_code_group_(codes, p, bits);
        for (int i = 0; i < 8; i++) acc[8 * p + i] += wn * cb[(x >> (i * bits)) & mask];
    }
}

vq_signdot_rows_fn vq_signdot_rows_pick(enum vq_isa isa) {
#if defined(VQ_HAVE_X86)
    if (isa == VQ_ISA_AVX512) return vq_signdot_rows_avx512;
    if (isa == VQ_ISA_AVX2) return vq_signdot_rows_avx2;
#endif
    (void)isa;
    return vq_signdot_rows_ref;
}

vq_lutdot_rows_fn vq_lutdot_rows_pick(enum vq_isa isa) {
#if defined(VQ_HAVE_X86)
    if (isa == VQ_ISA_AVX512) return vq_lutdot_rows_avx512;
    if (isa == VQ_ISA_AVX2) return vq_lutdot_rows_avx2;
#endif
    (void)isa;
    return vq_lutdot_rows_ref;
}

vq_signacc_fn vq_signacc_pick(enum vq_isa isa) {
#if defined(VQ_HAVE_X86)
    if (isa == VQ_ISA_AVX512) return vq_signacc_avx512;
    if (isa == VQ_ISA_AVX2) return vq_signacc_avx2;
#endif
    (void)isa;
    return vq_signacc_ref;
}

vq_lutacc_fn vq_lutacc_pick(enum vq_isa isa) {
#if defined(VQ_HAVE_X86)
    if (isa == VQ_ISA_AVX512) return vq_lutacc_avx512;
    if (isa == VQ_ISA_AVX2) return vq_lutacc_avx2;
#endif
    (void)isa;
    return vq_lutacc_ref;
}

/* ============================== qjl codec ================================================= */

struct qjl_impl {
    struct vq_prod_multi mq; /* first: the shared multi-query slots read it */
    int d, m;
    size_t a_floats; /* pad16(m): offset of sum(a) in the prepared query */
    vq_sketch sk;
    vq_signdot_rows_fn signdot;
    vq_signacc_fn signacc;
};

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

static vq_status qjl_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                            uint8_t *dst) {
    const struct qjl_impl *im = (const struct qjl_impl *)c->impl;
    const int d = im->d;
    float u[VQ_SKETCH_MAX_D];
    for (int64_t t = 0; t < n_blocks; t++) {
        const float *xt = x + (size_t)t * (size_t)d;
        uint8_t *o = dst + (size_t)t * c->block_bytes;
        const double ss = vq_sumsq_finite(xt, d);
        if (ss < 0.0) return VQ_STATUS_NON_FINITE;
        const double nrm = sqrt(ss);
        if (nrm > (double)VQ_SF16_MAX || !vq_sf16_fits((float)nrm)) return VQ_STATUS_RANGE;
        const uint16_t h = vq_fp32_to_sf16((float)nrm);
        if (vq_sf16_to_fp32(h) == 0.0f) {
            memset(o, 0, c->block_bytes);
            continue;
        }
        vq_wr_le16(o, h);
        const float inv = (float)(1.0 / nrm);
        for (int j = 0; j < d; j++) u[j] = xt[j] * inv;
        vq_sketch_signs(&im->sk, u, o + 2);
    }
    return VQ_STATUS_OK;
}

static void qjl_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct qjl_impl *im = (const struct qjl_impl *)c->impl;
    float v[VQ_QJL_MAX_M];
    for (int64_t t = 0; t < n_blocks; t++) {
        const uint8_t *s = src + (size_t)t * c->block_bytes;
        float *xt = x + (size_t)t * (size_t)im->d;
        const float g = VQ_SQRT_HALF_PI / (float)im->m * vq_sf16_to_fp32(vq_rd_le16(s));
        for (int i = 0; i < im->m; i++) v[i] = ((s[2 + (i >> 3)] >> (i & 7)) & 1) ? g : -g;
        vq_sketch_transpose(&im->sk, v, xt);
    }
}

static void qjl_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    const struct qjl_impl *im = (const struct qjl_impl *)c->impl;
    float *a = (float *)qs;
    vq_sketch_apply(&im->sk, q, a);
    float sum = 0.0f;
    for (int i = 0; i < im->m; i++) sum += a[i];
    for (size_t i = (size_t)im->m; i < im->a_floats + 16; i++) a[i] = 0.0f;
    a[im->a_floats] = sum;
}

static void qjl_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                      int64_t n_tokens, float *scores) {
    const struct qjl_impl *im = (const struct qjl_impl *)c->impl;
#if defined(VQ_HAVE_X86)
    if (im->mq.msc) {
        vq_prod_codec_score_multi(c, &qs, 1, codes, n_tokens, &scores);
        return;
    }
#endif
    const float *a = (const float *)qs;
    const size_t bb = c->block_bytes;
    im->signdot(a, a[im->a_floats], im->m, codes + 2, bb, n_tokens, scores);
    const float k = VQ_SQRT_HALF_PI / (float)im->m;
    for (int64_t t = 0; t < n_tokens; t++)
        scores[t] *= k * vq_sf16_to_fp32(vq_rd_le16(codes + (size_t)t * bb));
}

static void qjl_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                           const float *w, float *acc) {
    const struct qjl_impl *im = (const struct qjl_impl *)c->impl;
#if defined(VQ_HAVE_X86)
    if (im->mq.mac) {
        vq_prod_codec_accumulate_multi(c, codes, n_tokens, &w, 1, &acc);
        return;
    }
#endif
    const float k = VQ_SQRT_HALF_PI / (float)im->m;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *s = codes + (size_t)t * c->block_bytes;
        const float g = w[t] * k * vq_sf16_to_fp32(vq_rd_le16(s));
        if (g == 0.0f) continue;
        im->signacc(s + 2, im->m, g, acc);
    }
}

/* The multi-query slots of qjl and turboquant_prod (qjl.h): c->impl starts with a struct
 * vq_prod_multi. */
void vq_prod_codec_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                               const uint8_t *codes, int64_t n_tokens, float *const *scores) {
    const struct vq_prod_multi *mq = (const struct vq_prod_multi *)c->impl;
    mq->msc(&mq->pk, (const float *const *)qs, nq, codes, n_tokens, scores);
}

void vq_prod_codec_accumulate_multi(const struct vq_codec *c, const uint8_t *codes,
                                    int64_t n_tokens, const float *const *w, int nq,
                                    float *const *acc) {
    const struct vq_prod_multi *mq = (const struct vq_prod_multi *)c->impl;
    mq->mac(&mq->pk, codes, n_tokens, w, nq, acc);
}

static void qjl_finish(const struct vq_codec *c, const float *acc, float *out) {
    const struct qjl_impl *im = (const struct qjl_impl *)c->impl;
    vq_sketch_transpose(&im->sk, acc, out);
}

static void qjl_destroy(struct vq_codec *c) {
    struct qjl_impl *im = (struct qjl_impl *)c->impl;
    if (!im) return;
    vq_sketch_free(&im->sk);
    vq_free(im);
    c->impl = NULL;
}

static vq_status qjl_init(struct vq_codec *c) {
    const int d = c->p.head_dim;
    if (d < 8 || d > VQ_SKETCH_MAX_D || d % 8 != 0) return VQ_STATUS_INVALID_ARG;
    const int m = c->p.jl_dim ? c->p.jl_dim : d;
    if (m < 8 || m > VQ_QJL_MAX_M || m % 8 != 0) return VQ_STATUS_INVALID_ARG;
    c->p.jl_dim = m;
    if (c->isa == VQ_ISA_AUTO) c->isa = vq_isa_resolve(c->p.isa);

    struct qjl_impl *im = (struct qjl_impl *)vq_alloc(sizeof(*im));
    if (!im) return VQ_STATUS_NO_MEMORY;
    im->d = d;
    im->m = m;
    im->a_floats = pad16((size_t)m);
    vq_status st = vq_sketch_init(&im->sk, d, m, c->p.seed);
    if (st != VQ_STATUS_OK) {
        vq_free(im);
        return st;
    }
    im->signdot = vq_signdot_rows_pick(c->isa);
    im->signacc = vq_signacc_pick(c->isa);
    im->mq.pk.m = m; /* d = bm = code_bytes = q_floats = 0: signs only, gamma 1 */
    im->mq.pk.rec = 2 + m / 8;
    im->mq.pk.sign_off = 2;
    im->mq.pk.a_floats = (int)im->a_floats;
    im->mq.pk.k = VQ_SQRT_HALF_PI / (float)m;
#if defined(VQ_HAVE_X86)
    if (c->isa == VQ_ISA_AVX512) { /* no MSE codes: the VBMI variant would be the same */
        im->mq.msc = vq_prod_score_multi_avx512;
        im->mq.mac = vq_prod_acc_multi_avx512;
    }
#endif
    c->impl = im;
    c->block_tokens = 1;
    c->block_bytes = 2 + (size_t)m / 8;
    c->query_bytes = sizeof(float) * (im->a_floats + 16);
    c->acc_floats = (size_t)m;
    c->encode = qjl_encode;
    c->decode = qjl_decode;
    c->prepare_query = qjl_prepare_query;
    c->score = qjl_score;
    c->accumulate = qjl_accumulate;
    c->finish = qjl_finish;
    if (im->mq.msc) {
        c->score_multi = vq_prod_codec_score_multi;
        c->accumulate_multi = vq_prod_codec_accumulate_multi;
    }
    return VQ_STATUS_OK;
}

/* Registry entry (see codec.c). */
const struct vq_codec_i vq_codec_qjl = {
    .name = "qjl",
    .params_doc =
        "jl_dim=m (0 = head_dim; multiple of 8, may exceed head_dim); keys only "
        "(values decode to the low-cosine reconstruction)",
    .bits_formula = "m/d + 16/d",
    .needs_calibration = 0,
    .default_bits = 1,
    .min_bits = 1,
    .max_bits = 1,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_CENTERED | VQ_METHOD_F_OUTLIER_TOKENS |
             VQ_METHOD_F_OUTLIER_CHANNELS | VQ_METHOD_F_SKETCH,
    .init = qjl_init,
    .destroy = qjl_destroy,
};
