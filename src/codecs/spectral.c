/*
 * spectral.c — SpectralQuant (VQ_METHOD_SPECTRAL; docs/ALGORITHMS.md §8.2): a calibrated PCA
 * rotation instead of a random one, and a signal/noise split with separate scales.
 *
 * Calibration (per layer and role, vq_calib_fit_spectral): eigenvectors U (descending
 * eigenvalues lambda_j) of E[x x^T], and d_s = ceil(participation ratio).
 * Encode x (d floats):
 *   1. h = U^T x (PCA coordinates); z_j = h_j / sigma_j with sigma_j = sqrt(lambda_j) floored
 *      at sqrt(1e-6 * mean lambda) (whitening: every coordinate then matches one N(0,1)
 *      Lloyd-Max codebook).
 *   2. Coordinate j gets b_j bits (0..6): spectral_waterfill = 1 (default) allocates the
 *      d*bits bits by reverse water-filling over the calibrated spectrum (the RateQuant closed
 *      form with w_j = lambda_j, beta = 4, allowed {0..6}: high-variance directions get more
 *      bits, near-empty ones none); spectral_waterfill = 0 gives every coordinate `bits` bits.
 *   3. Two groups, signal = coordinates j < d_s, noise = the rest. Per group g: codes
 *      i_j = LM_encode(z_j / rms_g) with the N(0,1) Lloyd-Max codebook of b_j bits
 *      (rms over the group's coordinates with b_j > 0), then the least-squares scale
 *      s_g = <z, c> / <c, c> over those coordinates (the MSE-optimal scale for the chosen
 *      codes; 0 for an all-zero group). Coordinates with b_j = 0 decode to 0.
 * Decode: z^_j = s_g c_{b_j}[i_j], x^ = U (sigma * z^).
 *
 * Block layout (block_tokens = 1): offset 0 vq_sf16 s_signal, offset 2 vq_sf16 s_noise,
 * offset 4: codes as one LSB-first bit stream, coordinate j (PCA order) at bit offset
 * sum_{i<j} b_i with b_j bits. block_bytes = 4 + ceil(sum_j b_j / 8) = 4 + ceil(d*bits/8);
 * bits/elem = bits + 32/d. Encode returns RANGE when a scale does not fit vq_sf16.
 *
 * Fused paths. Prepared query: q~_j = sigma_j (U^T q)_j and LUT_j[i] = q~_j c_{b_j}[i]
 * (sum_j 2^{b_j} floats); score = s_signal sum_{j<d_s} LUT_j[i_j] + s_noise sum_{j>=d_s}
 * LUT_j[i_j]. Accumulator: per-coordinate histograms in the LUT layout (sum_j 2^{b_j}
 * floats), H_j[i_j] += w_t s_g; finish: z_j = sum_i H_j[i] c_{b_j}[i], out = U (sigma * z).
 * On AVX-512 with VBMI (vq_sp_vk, lutsum_kernels.h) the prepared query also holds the whitened
 * query q~ in active order after the tables, and the accumulator a coordinate-domain part
 * after the histograms (16 floats per group of 16 active coordinates, sum_t w_t s_g c[i_j]):
 * score and accumulate decode each token's coordinates once for up to 4 queries and dot / add
 * them; finish adds that part to z_j. Equal to the histogram path within float rounding.
 *
 * Calibration is read at create time from params.calib (borrowed; U, lambda and d_s are
 * copied): the entry for (calib_layer, role) must hold a PCA basis (else NOT_FOUND).
 * Without calibration (calib NULL) the data-free fallback is U = I, lambda = 1 and
 * d_s = d/2: plain per-coordinate Lloyd-Max with two group scales and no rotation (works,
 * but without the rotation there is nothing spectral about it).
 *
 * Kernels (lutsum_kernels.h): the scalar reference kernels are the vq_sp_*_ref functions.
 * VQ_ISA_SCALAR uses the portable generic score/accumulate over a field program (one field
 * per active coordinate, group 0 = signal); AVX2 / AVX-512 use the gather score kernels of
 * arch/x86/vecinfer_*.c, the generic accumulate (a gather + scatter version measured 2x
 * slower than it) — or, with VBMI, the coordinate-domain multi-query kernels of
 * arch/x86/spectral_avx512vbmi.c —, and SIMD matrix-vector products for encode / decode /
 * prepare / finish in the
 * same operation order as the reference (codes and prepared tables are bitwise identical on every
 * ISA).
 */
#include <math.h>
#include <string.h>

#include "calib/calib.h"
#include "codecs/codec_impl.h"
#include "codecs/lutsum_kernels.h"

/* One active (b_j > 0) coordinate, in coordinate order: where its code sits and its table. */
struct sp_desc {
    uint32_t lut_off; /* offset of LUT_j in the prepared query */
    uint16_t byte;    /* byte of the code's first bit (relative to the code stream) */
    uint8_t shift;    /* bit within that byte */
    uint8_t mask;     /* 2^b_j - 1 */
};

struct sp_impl {
    int d, ds;
    int na, na_sig;       /* active coordinates; those with j < d_s */
    int n_safe;           /* leading active coordinates whose 16-bit read stays in the block */
    struct sp_desc *desc; /* (na) */
    uint16_t *act_j;      /* (na) coordinate index of each active entry */
    size_t code_bytes;
    float *ut;         /* (d, d) row j = eigenvector j */
    float *sigma;      /* (d) */
    uint8_t *bits;     /* (d) 0..6 */
    uint32_t *byte;    /* (d) byte of the code's first bit */
    uint8_t *shift;    /* (d) bit within that byte */
    uint8_t *two;      /* (d) 1 if the next byte exists (code may straddle) */
    uint32_t *lut_off; /* (d) offset of coordinate j's table in the prepared query */
    size_t lut_total;
    const float *cent[7]; /* Lloyd-Max N(0,1) centroids by bit-width (library-owned) */
    const float *bound[7];
    float *u;             /* (d, d) row i = component i of every eigenvector (U itself) */
    vq_ls_prog prog;      /* fields = active coordinates; group 1 = noise */
    vq_ls_score_fn score; /* NULL: reference kernels */
    vq_ls_acc_fn acc;
    void (*cols_dot)(const float *a, int rows, int cols, const float *x, float *y);
    vq_sp_vk vk; /* coordinate-domain score / accumulate (AVX-512 VBMI) when vk_on */
    int vk_on;
    uint16_t *act_e; /* (d) active index of coordinate j (when bits[j] > 0) */
};

static inline uint32_t sp_code(const struct sp_impl *m, const uint8_t *p, int j) {
    uint32_t v = p[m->byte[j]];
    if (m->two[j]) v |= (uint32_t)p[m->byte[j] + 1] << 8;
    return (v >> m->shift[j]) & ((1u << m->bits[j]) - 1u);
}

/* ---- encode / decode ------------------------------------------------------------------------- */

static vq_status sp_encode_impl(const struct vq_codec *c, const float *x, int64_t n_blocks,
                                uint8_t *dst, int simd) {
    const struct sp_impl *m = c->impl;
    const int d = m->d;
    for (int64_t i = 0; i < n_blocks * d; i++)
        if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;
    for (int64_t i = 0; i < n_blocks * d; i++) /* library-wide input range (vq_sf16) */
        if (fabsf(x[i]) > VQ_SF16_MAX) return VQ_STATUS_RANGE;
    float z[1024];
    uint8_t code[1024];
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *r = x + b * d;
        uint8_t *o = dst + (size_t)b * c->block_bytes;
        if (simd && m->cols_dot) { /* same products and order: bitwise equal */
            m->cols_dot(m->u, d, d, r, z);
            for (int j = 0; j < d; j++) z[j] /= m->sigma[j];
        } else {
            for (int j = 0; j < d; j++) {
                const float *u = m->ut + (size_t)j * d;
                float h = 0.0f;
                for (int i = 0; i < d; i++) h += u[i] * r[i];
                z[j] = h / m->sigma[j];
            }
        }
        float scale[2];
        for (int g = 0; g < 2; g++) {
            const int j0 = g == 0 ? 0 : m->ds, j1 = g == 0 ? m->ds : d;
            double ss = 0.0;
            int cnt = 0;
            for (int j = j0; j < j1; j++)
                if (m->bits[j]) {
                    ss += (double)z[j] * z[j];
                    cnt++;
                }
            const float rms = cnt ? (float)sqrt(ss / cnt) : 0.0f;
            double num = 0.0, den = 0.0;
            for (int j = j0; j < j1; j++) {
                code[j] = 0;
                const int bj = m->bits[j];
                if (!bj) continue;
                const float u = rms > 0.0f ? z[j] / rms : 0.0f;
                code[j] = (uint8_t)vq_lm_encode(u, m->bound[bj], (1 << bj) - 1);
                const double cj = m->cent[bj][code[j]];
                num += (double)z[j] * cj;
                den += cj * cj;
            }
            scale[g] = (rms > 0.0f && den > 0.0) ? (float)(num / den) : 0.0f;
            if (!vq_sf16_fits(scale[g])) return VQ_STATUS_RANGE;
        }
        const uint16_t s0 = vq_fp32_to_sf16(scale[0]), s1 = vq_fp32_to_sf16(scale[1]);
        o[0] = (uint8_t)s0;
        o[1] = (uint8_t)(s0 >> 8);
        o[2] = (uint8_t)s1;
        o[3] = (uint8_t)(s1 >> 8);
        uint8_t *p = o + 4;
        memset(p, 0, m->code_bytes);
        for (int j = 0; j < d; j++) {
            if (!m->bits[j]) continue;
            const uint32_t v = (uint32_t)code[j] << m->shift[j];
            p[m->byte[j]] |= (uint8_t)v;
            if (m->two[j]) p[m->byte[j] + 1] |= (uint8_t)(v >> 8);
        }
    }
    return VQ_STATUS_OK;
}

vq_status vq_sp_encode_ref(const struct vq_codec *c, const float *x, int64_t n_blocks,
                           uint8_t *dst) {
    return sp_encode_impl(c, x, n_blocks, dst, 0);
}

static vq_status sp_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                           uint8_t *dst) {
    return sp_encode_impl(c, x, n_blocks, dst, 1);
}

static inline float sp_scale(const uint8_t *o, int g) {
    return vq_sf16_to_fp32((uint16_t)(o[2 * g] | (uint16_t)o[2 * g + 1] << 8));
}

static void sp_decode_impl(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x,
                           int simd) {
    const struct sp_impl *m = c->impl;
    const int d = m->d;
    float h[1024];
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *o = src + (size_t)b * c->block_bytes;
        const float s[2] = {sp_scale(o, 0), sp_scale(o, 1)};
        for (int j = 0; j < d; j++) {
            const int bj = m->bits[j];
            h[j] = bj ? s[j >= m->ds] * m->cent[bj][sp_code(m, o + 4, j)] * m->sigma[j] : 0.0f;
        }
        float *r = x + b * d;
        if (simd && m->cols_dot) { /* same order; zero terms add +-0 */
            m->cols_dot(m->ut, d, d, h, r);
            continue;
        }
        memset(r, 0, (size_t)d * sizeof(float));
        for (int j = 0; j < d; j++) {
            if (h[j] == 0.0f) continue;
            const float *u = m->ut + (size_t)j * d;
            for (int i = 0; i < d; i++) r[i] += h[j] * u[i];
        }
    }
}

void vq_sp_decode_ref(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    sp_decode_impl(c, src, n_blocks, x, 0);
}

static void sp_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    sp_decode_impl(c, src, n_blocks, x, 1);
}

/* ---- fused paths ----------------------------------------------------------------------------- */

static void sp_prepare_impl(const struct vq_codec *c, const float *q, void *qs, int simd) {
    const struct sp_impl *m = c->impl;
    const int d = m->d;
    float *lut = qs, hq[1024];
    if (m->vk_on) memset(lut + m->lut_total, 0, 16 * (size_t)m->vk.n_grp * sizeof(float));
    if (simd && m->cols_dot) m->cols_dot(m->u, d, d, q, hq);
    for (int j = 0; j < d; j++) {
        const int bj = m->bits[j];
        if (!bj) continue;
        float h = 0.0f;
        if (simd && m->cols_dot) {
            h = hq[j];
        } else {
            const float *u = m->ut + (size_t)j * d;
            for (int i = 0; i < d; i++) h += u[i] * q[i];
        }
        h *= m->sigma[j];
        if (m->vk_on) lut[m->lut_total + m->act_e[j]] = h;
        if (m->vk_on && simd) continue; /* the coordinate-domain kernels read q~ only */
        float *t = lut + m->lut_off[j];
        for (int v = 0; v < (1 << bj); v++) t[v] = h * m->cent[bj][v];
    }
}

void vq_sp_prepare_query_ref(const struct vq_codec *c, const float *q, void *qs) {
    sp_prepare_impl(c, q, qs, 0);
}

static void sp_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    sp_prepare_impl(c, q, qs, 1);
}

static inline uint32_t sp_dcode(const struct sp_desc *e, const uint8_t *p, int safe) {
    uint32_t v = p[e->byte];
    if (safe) v |= (uint32_t)p[e->byte + 1] << 8;
    return (v >> e->shift) & e->mask;
}

/* sum of LUT entries of active coordinates [i0, i1) of one token's code stream p */
static inline float sp_sum(const struct sp_impl *m, const float *lut, const uint8_t *p, int i0,
                           int i1) {
    float a = 0.0f;
    const int s1 = i1 < m->n_safe ? i1 : m->n_safe;
    int i = i0;
    for (; i < s1; i++) {
        const struct sp_desc *e = &m->desc[i];
        uint16_t w;
        memcpy(&w, p + e->byte, 2); /* little-endian pair of bytes, inside the block */
        a += lut[e->lut_off + (((uint32_t)w >> e->shift) & e->mask)];
    }
    for (; i < i1; i++) a += lut[m->desc[i].lut_off + sp_dcode(&m->desc[i], p, 0)];
    return a;
}

void vq_sp_score_ref(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                     int64_t n_tokens, float *scores) {
    const struct sp_impl *m = c->impl;
    const float *lut = qs;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *o = codes + (size_t)t * c->block_bytes;
        const float a0 = sp_sum(m, lut, o + 4, 0, m->na_sig);
        const float a1 = sp_sum(m, lut, o + 4, m->na_sig, m->na);
        scores[t] = sp_scale(o, 0) * a0 + sp_scale(o, 1) * a1;
    }
}

static void sp_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                           const uint8_t *codes, int64_t n_tokens, float *const *scores) {
#ifdef VQ_HAVE_X86
    const struct sp_impl *m = c->impl;
    const float *qa[4];
    for (int j = 0; j < nq; j++) qa[j] = (const float *)qs[j] + m->lut_total;
    vq_sp_score_multi_avx512vbmi(&m->vk, qa, nq, codes, n_tokens, scores);
#else
    (void)c, (void)qs, (void)nq, (void)codes, (void)n_tokens, (void)scores;
#endif
}

static void sp_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                     int64_t n_tokens, float *scores) {
    const struct sp_impl *m = c->impl;
    if (m->vk_on) sp_score_multi(c, &qs, 1, codes, n_tokens, &scores);
    else if (m->score) m->score(&m->prog, qs, codes, n_tokens, scores);
    else vq_sp_score_ref(c, qs, codes, n_tokens, scores);
}

/* adds ws to the histogram cells (lut layout) of active coordinates [i0, i1) of one token */
static inline void sp_hist(const struct sp_impl *m, float *h, const uint8_t *p, int i0, int i1,
                           float ws) {
    const int s1 = i1 < m->n_safe ? i1 : m->n_safe;
    int i = i0;
    for (; i < s1; i++) {
        const struct sp_desc *e = &m->desc[i];
        uint16_t w;
        memcpy(&w, p + e->byte, 2);
        h[e->lut_off + (((uint32_t)w >> e->shift) & e->mask)] += ws;
    }
    for (; i < i1; i++) h[m->desc[i].lut_off + sp_dcode(&m->desc[i], p, 0)] += ws;
}

static void sp_accumulate_multi(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                                const float *const *w, int nq, float *const *acc) {
#ifdef VQ_HAVE_X86
    vq_sp_acc_multi_avx512vbmi(&((const struct sp_impl *)c->impl)->vk, codes, n_tokens, w, nq, acc);
#else
    (void)c, (void)codes, (void)n_tokens, (void)w, (void)nq, (void)acc;
#endif
}

void vq_sp_accumulate_ref(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                          const float *w, float *acc) {
    const struct sp_impl *m = c->impl;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *o = codes + (size_t)t * c->block_bytes;
        sp_hist(m, acc, o + 4, 0, m->na_sig, w[t] * sp_scale(o, 0));
        sp_hist(m, acc, o + 4, m->na_sig, m->na, w[t] * sp_scale(o, 1));
    }
}

static void sp_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                          const float *w, float *acc) {
    const struct sp_impl *m = c->impl;
    if (m->vk_on) sp_accumulate_multi(c, codes, n_tokens, &w, 1, &acc);
    else if (m->acc) m->acc(&m->prog, codes, n_tokens, w, acc);
    else vq_sp_accumulate_ref(c, codes, n_tokens, w, acc);
}

static void sp_finish_impl(const struct vq_codec *c, const float *acc, float *out, int simd) {
    const struct sp_impl *m = c->impl;
    const int d = m->d;
    if (simd && m->cols_dot) { /* same order as below; zero terms add +-0 */
        float hh[1024];
        memset(hh, 0, (size_t)d * sizeof(float));
        for (int i = 0; i < m->na; i++) {
            const int j = m->act_j[i], bj = m->bits[j];
            const float *hist = acc + m->desc[i].lut_off;
            float z = 0.0f;
            for (int v = 0; v < (1 << bj); v++) z += hist[v] * m->cent[bj][v];
            if (m->vk_on) z += acc[m->vk.z_off + i];
            hh[j] = z * m->sigma[j];
        }
        m->cols_dot(m->ut, d, d, hh, out);
        return;
    }
    memset(out, 0, (size_t)d * sizeof(float));
    for (int i = 0; i < m->na; i++) {
        const int j = m->act_j[i], bj = m->bits[j];
        const float *hist = acc + m->desc[i].lut_off;
        float z = 0.0f;
        for (int v = 0; v < (1 << bj); v++) z += hist[v] * m->cent[bj][v];
        if (m->vk_on) z += acc[m->vk.z_off + i];
        const float h = z * m->sigma[j];
        if (h == 0.0f) continue;
        const float *u = m->ut + (size_t)j * d;
        for (int k = 0; k < d; k++) out[k] += h * u[k];
    }
}

void vq_sp_finish_ref(const struct vq_codec *c, const float *acc, float *out) {
    sp_finish_impl(c, acc, out, 0);
}

static void sp_finish(const struct vq_codec *c, const float *acc, float *out) {
    sp_finish_impl(c, acc, out, 1);
}

/* ---- create / destroy ------------------------------------------------------------------------ */

static void sp_destroy(struct vq_codec *c) {
    struct sp_impl *m = c->impl;
    if (!m) return;
    vq_free(m->ut);
    vq_free(m->sigma);
    vq_free(m->bits);
    vq_free(m->byte);
    vq_free(m->shift);
    vq_free(m->two);
    vq_free(m->lut_off);
    vq_free(m->desc);
    vq_free(m->act_j);
    vq_free(m->u);
    vq_ls_prog_free(&m->prog);
    vq_free(m->vk.pidx);
    vq_free(m->vk.lane);
    vq_free(m->vk.noise);
    vq_free(m->vk.small);
    vq_free(m->act_e);
    vq_free(m);
    c->impl = NULL;
}

/* Builds the tables of the coordinate-domain accumulate (vq_sp_vk, lutsum_kernels.h) and turns
 * it on where it applies: AVX-512 with VBMI, code stream <= 128 bytes. */
static vq_status sp_vk_build(const struct vq_codec *c, struct sp_impl *m) {
    m->vk_on = 0;
#ifdef VQ_HAVE_X86
    if (c->isa != VQ_ISA_AVX512 || !vq_cpu_avx512vbmi() || m->code_bytes > 128 || !m->na)
        return VQ_STATUS_OK;
    m->act_e = vq_alloc((size_t)m->d * sizeof *m->act_e);
    if (!m->act_e) return VQ_STATUS_NO_MEMORY;
    for (int e = 0; e < m->na; e++) m->act_e[m->act_j[e]] = (uint16_t)e;
    vq_sp_vk *k = &m->vk;
    const int ng = (m->na + 15) / 16;
    k->n_grp = ng;
    k->code_bytes = (int)m->code_bytes;
    k->rec = 4 + (int)m->code_bytes;
    k->z_off = (int)m->lut_total;
    k->pidx = vq_alloc((size_t)ng * 64);
    k->lane = vq_alloc((size_t)ng * 48 * sizeof(int32_t));
    k->noise = vq_alloc((size_t)ng * sizeof(uint16_t));
    k->small = vq_alloc((size_t)ng);
    if (!k->pidx || !k->lane || !k->noise || !k->small) return VQ_STATUS_NO_MEMORY;
    /* each width's entries at a multiple of their count (the kernels OR the code into the
     * offset); 2 and 3 stay 0 for the lanes past the active coordinates */
    static const int ofs[7] = {2, 0, 4, 8, 16, 32, 64};
    memset(k->ctab, 0, sizeof k->ctab);
    for (int b = 1; b <= 6; b++)
        for (int i = 0; i < (1 << b); i++) k->ctab[ofs[b] + i] = m->cent[b][i];
    for (int g = 0; g < ng; g++) {
        int32_t *ln = k->lane + 48 * g;
        k->noise[g] = 0;
        k->small[g] = 1;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * g + l;
            const int j = e < m->na ? m->act_j[e] : -1, b = j >= 0 ? m->bits[j] : 0;
            for (int i = 0; i < 4; i++) {
                const uint32_t by = j >= 0 ? m->byte[j] + (uint32_t)i : 0;
                k->pidx[64 * g + 4 * l + i] = (uint8_t)(by > 127 ? 127 : by);
            }
            ln[l] = j >= 0 ? m->shift[j] : 0;
            ln[16 + l] = (1 << b) - 1;
            ln[32 + l] = ofs[b];
            if (e >= m->na_sig && j >= 0) k->noise[g] |= (uint16_t)(1u << l);
            if (b > 4) k->small[g] = 0;
        }
    }
    m->vk_on = 1;
#else
    (void)c;
#endif
    return VQ_STATUS_OK;
}

/* Builds the field program (active coordinates) and picks the kernels for c->isa. */
static vq_status sp_kernels(const struct vq_codec *c, struct sp_impl *m) {
    uint32_t bit[1024], lut_off[1024];
    uint8_t width[1024];
    for (int i = 0; i < m->na; i++) {
        const int j = m->act_j[i];
        bit[i] = m->byte[j] * 8u + m->shift[j];
        width[i] = m->bits[j];
        lut_off[i] = m->lut_off[j];
    }
    VQ_RETURN_IF_ERR(vq_ls_prog_build(&m->prog, 4 + (int)m->code_bytes, 4, m->na, bit, width,
                                      lut_off, m->na_sig, 2));
    m->score = vq_ls_score_generic;
    m->acc = vq_ls_accumulate_generic;
#ifdef VQ_HAVE_X86
    if (c->isa == VQ_ISA_AVX512) {
        m->score = vq_ls_score_avx512;
        m->cols_dot = vq_ls_cols_dot_avx512;
    } else if (c->isa == VQ_ISA_AVX2) {
        m->score = vq_ls_score_avx2;
        m->cols_dot = vq_ls_cols_dot_avx2;
    }
#endif
    return VQ_STATUS_OK;
}

static vq_status sp_init(struct vq_codec *c) {
    const struct vq_codec_params *p = &c->p;
    const int d = p->head_dim;
    if (p->bits < 1 || p->bits > 4) return VQ_STATUS_INVALID_ARG;
    if (p->spectral_waterfill != 0 && p->spectral_waterfill != 1) return VQ_STATUS_INVALID_ARG;
    const struct vq_calib_lr *e = NULL;
    if (p->calib) {
        if (vq_calib_data_head_dim(p->calib) != d) return VQ_STATUS_INVALID_ARG;
        e = vq_calib_get(p->calib, p->calib_layer, p->role);
        if (!e) return VQ_STATUS_INVALID_ARG;
        if (!e->pca_u) return VQ_STATUS_NOT_FOUND;
    }
    struct sp_impl *m = vq_alloc(sizeof *m);
    if (!m) return VQ_STATUS_NO_MEMORY;
    c->impl = m;
    m->d = d;
    m->ut = vq_alloc((size_t)d * d * sizeof(float));
    m->u = vq_alloc((size_t)d * d * sizeof(float));
    m->sigma = vq_alloc((size_t)d * sizeof(float));
    m->bits = vq_alloc((size_t)d);
    m->byte = vq_alloc((size_t)d * sizeof(uint32_t));
    m->shift = vq_alloc((size_t)d);
    m->two = vq_alloc((size_t)d);
    m->lut_off = vq_alloc((size_t)d * sizeof(uint32_t));
    double *w = vq_alloc((size_t)d * sizeof(double));
    int *bits = vq_alloc((size_t)d * sizeof(int));
    if (!m->ut || !m->u || !m->sigma || !m->bits || !m->byte || !m->shift || !m->two ||
        !m->lut_off || !w || !bits) {
        vq_free(w);
        vq_free(bits);
        sp_destroy(c);
        return VQ_STATUS_NO_MEMORY;
    }
    double mean_l = 0.0;
    for (int j = 0; j < d; j++) {
        w[j] = e ? e->pca_lambda[j] : 1.0;
        mean_l += w[j];
    }
    mean_l /= d;
    const double floor_l = mean_l > 0.0 ? 1e-6 * mean_l : 1.0;
    for (int j = 0; j < d; j++) {
        if (!(w[j] > floor_l)) w[j] = floor_l;
        m->sigma[j] = (float)sqrt(w[j]);
        for (int i = 0; i < d; i++)
            m->ut[(size_t)j * d + i] = e ? e->pca_u[(size_t)i * d + j] : (float)(i == j);
    }
    m->ds = e ? e->pca_ds : d / 2;
    vq_status s = VQ_STATUS_OK;
    if (p->spectral_waterfill) {
        const int allowed[7] = {0, 1, 2, 3, 4, 5, 6};
        s = vq_ratequant_allocate(w, d, (double)p->bits, allowed, 7, 4.0, bits);
    } else {
        for (int j = 0; j < d; j++) bits[j] = p->bits;
    }
    vq_free(w);
    if (s != VQ_STATUS_OK) {
        vq_free(bits);
        sp_destroy(c);
        return s;
    }
    size_t off = 0, lut = 0;
    for (int j = 0; j < d; j++) {
        m->bits[j] = (uint8_t)bits[j];
        m->byte[j] = (uint32_t)(off >> 3);
        m->shift[j] = (uint8_t)(off & 7);
        m->lut_off[j] = (uint32_t)lut;
        off += (size_t)bits[j];
        if (bits[j]) lut += (size_t)1 << bits[j];
    }
    vq_free(bits);
    m->code_bytes = (off + 7) / 8;
    for (int j = 0; j < d; j++) m->two[j] = m->bits[j] && (size_t)m->byte[j] + 1 < m->code_bytes;
    m->lut_total = lut ? lut : 1;
    m->desc = vq_alloc((size_t)d * sizeof *m->desc);
    m->act_j = vq_alloc((size_t)d * sizeof *m->act_j);
    if (!m->desc || !m->act_j) {
        sp_destroy(c);
        return VQ_STATUS_NO_MEMORY;
    }
    m->na = m->na_sig = 0;
    m->n_safe = -1;
    for (int j = 0; j < d; j++) {
        if (!m->bits[j]) continue;
        struct sp_desc *de = &m->desc[m->na];
        de->lut_off = m->lut_off[j];
        de->byte = (uint16_t)m->byte[j];
        de->shift = m->shift[j];
        de->mask = (uint8_t)((1u << m->bits[j]) - 1u);
        m->act_j[m->na] = (uint16_t)j;
        if (j < m->ds) m->na_sig++;
        if (m->n_safe < 0 && !((size_t)m->byte[j] + 1 < m->code_bytes)) m->n_safe = m->na;
        m->na++;
    }
    if (m->n_safe < 0) m->n_safe = m->na;
    for (int b = 1; b <= 6; b++) {
        s = vq_lloyd_max(VQ_LAW_GAUSS, b, 0, &m->cent[b], &m->bound[b]);
        if (s != VQ_STATUS_OK) {
            sp_destroy(c);
            return s;
        }
    }
    for (int j = 0; j < d; j++)
        for (int i = 0; i < d; i++) m->u[(size_t)i * d + j] = m->ut[(size_t)j * d + i];
    s = sp_kernels(c, m);
    if (s == VQ_STATUS_OK) s = sp_vk_build(c, m);
    if (s != VQ_STATUS_OK) {
        sp_destroy(c);
        return s;
    }
    c->block_tokens = 1;
    c->block_bytes = 4 + m->code_bytes;
    c->query_bytes = (m->lut_total + (m->vk_on ? 16 * (size_t)m->vk.n_grp : 0)) * sizeof(float);
    c->acc_floats = m->lut_total + (m->vk_on ? 16 * (size_t)m->vk.n_grp : 0);
    c->encode = sp_encode;
    c->decode = sp_decode;
    c->prepare_query = sp_prepare_query;
    c->score = sp_score;
    c->accumulate = sp_accumulate;
    c->finish = sp_finish;
    if (m->vk_on) {
        c->score_multi = sp_score_multi;
        c->accumulate_multi = sp_accumulate_multi;
    }
    return VQ_STATUS_OK;
}

/* vq_codec_use_ref_kernels: the reference kernels. */
static void sp_use_ref(struct vq_codec *c) {
    c->encode = vq_sp_encode_ref;
    c->decode = vq_sp_decode_ref;
    c->prepare_query = vq_sp_prepare_query_ref;
    c->score = vq_sp_score_ref;
    c->accumulate = vq_sp_accumulate_ref;
    c->finish = vq_sp_finish_ref;
}

const struct vq_codec_i vq_codec_spectral = {
    .name = "spectral",
    .params_doc = "bits=1..4 (mean bits/coordinate); spectral_waterfill=0|1; calib, calib_layer",
    .bits_formula = "b + 32/d",
    .needs_calibration = 1,
    .default_bits = 3,
    .min_bits = 1,
    .max_bits = 4,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_CALIBRATION | VQ_METHOD_F_CALIB_PCA |
             VQ_METHOD_F_OUTLIER_TOKENS,
    .init = sp_init,
    .destroy = sp_destroy,
    .use_ref_kernels = sp_use_ref,
};
