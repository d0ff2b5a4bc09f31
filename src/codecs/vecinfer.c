/*
 * vecinfer.c — VecInfer product vector quantization (VQ_METHOD_VECINFER; docs/ALGORITHMS.md §8.1).
 *
 * Keys: x~ = WHT(x / lambda) with per-channel smoothing factors lambda and the deterministic
 * orthonormal block Walsh-Hadamard transform (vq_wht_blocks); values: x~ = x (no transform,
 * as in the VeloxQuant port). x~ is split into n_sub = d / v sub-vectors of length v; each
 * stores the index of its nearest codeword among k = 2^c (one codebook per layer and role,
 * shared by all sub-vector positions). No per-vector side data.
 *
 * Block layout (block_tokens = 1): n_sub codes of c bits, LSB-first bit stream, code s at bit
 * offset s*c; block_bytes = ceil(n_sub * c / 8), bits/elem = c / v exactly when n_sub*c is a
 * multiple of 8 (every preset with d a multiple of 8). Encode: NON_FINITE for NaN/Inf, RANGE
 * for |x| > VQ_SF16_MAX (the library-wide input range, although nothing is scaled here).
 *
 * Parameters: (c, v) = (pq_codeword_bits, pq_subvec_dim), both set or both 0; 0 = preset from
 * bits: 1 -> (8,8), 2 -> (8,4), 3 -> (12,4), 4 -> (8,2). c in 1..12, v in 1..16 dividing d.
 * (vq_codec_params_get keeps 0/0 when the preset was used, so equal requests compare equal.)
 * Calibration: params.calib (borrowed, read at create; the codec copies lambda and the
 * codebook) must hold a vecinfer entry for (calib_layer, role) whose codebook is k x v;
 * otherwise create returns NOT_FOUND (no entry) or INVALID_ARG (shape mismatch).
 * Without calibration (calib NULL) the codec uses a data-free fallback: lambda = 1 and k
 * codewords drawn i.i.d. N(0,1) from the seed. It satisfies every codec contract, but its
 * quality is poor (random codebooks carry nothing about the data; docs/ALGORITHMS.md §8.1): it
 * exists for shape/contract tests, not for use.
 *
 * Fused paths. Prepared query: q~ = WHT(q * lambda) (keys) or q (values), then the table
 * LUT[s][i] = <q~_s, C_i> (n_sub * k floats); score = sum_s LUT[s][idx_s] (n_sub table reads,
 * since <q, x^> = <q~, x~^> for the orthonormal symmetric WHT). Values: accumulator = per
 * sub-vector histograms W[s][i] += w_t (n_sub * k floats); finish o~_s = sum_i W[s][i] C_i,
 * then out = lambda * WHT(o~) for keys, o~ for values.
 *
 * Kernels (lutsum_kernels.h): the scalar reference kernels are the vq_vi_*_ref functions
 * below. Every ISA uses the portable generic accumulate (byte-code version for c = 8) and,
 * for c = 8, the byte-code score (4 independent sums, one 32-bit load per 4 codes: faster
 * than gathers on the measured CPU); for c != 8 AVX2 / AVX-512 use the gather score kernels
 * of arch/x86/vecinfer_*.c (the generic one on VQ_ISA_SCALAR). AVX2 / AVX-512 also build the
 * tables, finish and search nearest codewords (encode) with SIMD. Every kernel performs the
 * reference's float operations in the reference's order (one sum per token in sub-vector
 * order, no FMA), so tables, codes, scores, accumulators and outputs are bitwise identical to
 * the reference on every ISA.
 * Codes narrower than 4 bytes (tiny d) always use the reference kernels.
 * This file also holds the shared vq_ls_prog builder and the generic kernels.
 */
#include <math.h>
#include <string.h>

#include "calib/calib.h"
#include "codecs/codec_impl.h"
#include "codecs/lutsum_kernels.h"

struct vi_impl {
    int d, c, v, n_sub, k;
    int is_key;
    size_t code_bytes;
    float *lambda;   /* (d) smoothing factors (all 1 for values / fallback) */
    float *cb;       /* (k, v) codebook */
    float *cn;       /* (k) squared codeword norms */
    float *cbt;      /* (v, k) codebook transposed */
    vq_ls_prog prog; /* fields = sub-vectors (valid when has_prog) */
    int has_prog;
    vq_ls_score_fn score; /* NULL: reference kernels */
    vq_ls_acc_fn acc;
    void (*cols_dot)(const float *a, int rows, int cols, const float *x, float *y);
    void (*finish_hist)(const float *hist, int n_sub, int k, int v, const float *cb, float *out);
    int (*argmin)(const float *p, const float *cbt, const float *cn, int k, int v);
    vq_vi_vk vk; /* coordinate-domain score / accumulate (AVX-512) when vk_on */
    int vk_on;
};

/* ---- code packing ---------------------------------------------------------------------------- */

static inline uint32_t vi_get_code(const uint8_t *p, int s, int c, size_t nbytes) {
    if (c == 8) return p[s];
    const size_t bit = (size_t)s * (size_t)c, byte = bit >> 3;
    uint32_t v = p[byte];
    if (byte + 1 < nbytes) v |= (uint32_t)p[byte + 1] << 8;
    if (byte + 2 < nbytes) v |= (uint32_t)p[byte + 2] << 16;
    return (v >> (bit & 7)) & ((1u << c) - 1u);
}

static void vi_put_codes(uint8_t *p, const uint32_t *codes, int n, int c, size_t nbytes) {
    memset(p, 0, nbytes);
    for (int s = 0; s < n; s++) {
        const size_t bit = (size_t)s * (size_t)c;
        const uint32_t v = codes[s] << (bit & 7);
        const size_t byte = bit >> 3;
        p[byte] |= (uint8_t)v;
        if (byte + 1 < nbytes) p[byte + 1] |= (uint8_t)(v >> 8);
        if (byte + 2 < nbytes) p[byte + 2] |= (uint8_t)(v >> 16);
    }
}

/* ---- shared program builder and generic kernels (lutsum_kernels.h) ------------------------- */

void vq_ls_prog_free(vq_ls_prog *p) {
    vq_free(p->words);
    vq_free(p->shift);
    vq_free(p->mask);
    vq_free(p->lut_off);
    memset(p, 0, sizeof *p);
}

vq_status vq_ls_prog_build(vq_ls_prog *p, int rec, int code_off, int n_fields, const uint32_t *bit,
                           const uint8_t *width, const uint32_t *lut_off, int f_split,
                           int n_scales) {
    memset(p, 0, sizeof *p);
    VQ_ASSERT(rec >= 4 && code_off >= 0 && n_fields >= 0 && rec <= 65535);
    const int npad = n_fields > 0 ? n_fields : 1;
    p->words = vq_alloc((size_t)npad * sizeof *p->words);
    p->shift = vq_alloc((size_t)npad);
    p->mask = vq_alloc((size_t)npad * sizeof(uint32_t));
    p->lut_off = vq_alloc((size_t)npad * sizeof(uint32_t));
    if (!p->words || !p->shift || !p->mask || !p->lut_off) {
        vq_ls_prog_free(p);
        return VQ_STATUS_NO_MEMORY;
    }
    memset(p->shift, 0, (size_t)npad);
    memset(p->mask, 0, (size_t)npad * sizeof(uint32_t));
    memset(p->lut_off, 0, (size_t)npad * sizeof(uint32_t));
    p->rec = rec;
    p->n_scales = n_scales;
    p->n_fields = n_fields;
    int nw = 0;
    for (int f = 0; f < n_fields;) {
        const int grp = f >= f_split;
        int off = code_off + (int)(bit[f] >> 3);
        if (off + 4 > rec) off = rec - 4; /* stay inside the record: larger shifts */
        const int64_t base = 8 * (int64_t)(off - code_off);
        vq_ls_word *w = &p->words[nw++];
        w->off = (uint16_t)off;
        w->f0 = (uint16_t)f;
        w->grp = (uint16_t)grp;
        while (f < n_fields && (f >= f_split) == grp && (int64_t)bit[f] + width[f] <= base + 32) {
            VQ_ASSERT(width[f] >= 1 && width[f] <= 12 && (int64_t)bit[f] >= base);
            p->shift[f] = (uint8_t)((int64_t)bit[f] - base);
            p->mask[f] = (1u << width[f]) - 1u;
            p->lut_off[f] = lut_off[f];
            f++;
        }
        w->nf = (uint16_t)(f - w->f0);
        VQ_ASSERT(w->nf > 0);
        if (!grp) p->w_split = nw;
    }
    p->n_words = nw;
    return VQ_STATUS_OK;
}

/* sum of the lookups of words [k0, k1) of one record, in field order from 0.0f (the order of
 * the reference kernels: bitwise equal results) */
static inline float ls_sum_generic(const vq_ls_prog *p, int k0, int k1, const float *lut,
                                   const uint8_t *r) {
    float a = 0.0f;
    for (int k = k0; k < k1; k++) {
        const vq_ls_word *w = &p->words[k];
        const uint32_t word = vq_ls_load32(r + w->off);
        for (int f = w->f0; f < w->f0 + w->nf; f++)
            a += lut[p->lut_off[f] + ((word >> p->shift[f]) & p->mask[f])];
    }
    return a;
}

static inline float ls_scale(const uint8_t *r, int g) {
    return vq_sf16_to_fp32((uint16_t)(r[2 * g] | (uint16_t)r[2 * g + 1] << 8));
}

void vq_ls_score_generic(const vq_ls_prog *p, const float *lut, const uint8_t *codes, int64_t n,
                         float *scores) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *r = codes + (size_t)t * (size_t)p->rec;
        if (p->n_scales == 0) {
            scores[t] = ls_sum_generic(p, 0, p->n_words, lut, r);
        } else {
            const float a0 = ls_sum_generic(p, 0, p->w_split, lut, r);
            const float a1 = ls_sum_generic(p, p->w_split, p->n_words, lut, r);
            scores[t] = ls_scale(r, 0) * a0 + ls_scale(r, 1) * a1;
        }
    }
}

static inline void ls_hist_generic(const vq_ls_prog *p, int k0, int k1, float *acc,
                                   const uint8_t *r, float ws) {
    for (int k = k0; k < k1; k++) {
        const vq_ls_word *w = &p->words[k];
        const uint32_t word = vq_ls_load32(r + w->off);
        for (int f = w->f0; f < w->f0 + w->nf; f++)
            acc[p->lut_off[f] + ((word >> p->shift[f]) & p->mask[f])] += ws;
    }
}

void vq_ls_accumulate_generic(const vq_ls_prog *p, const uint8_t *codes, int64_t n, const float *w,
                              float *acc) {
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *r = codes + (size_t)t * (size_t)p->rec;
        if (p->n_scales == 0) {
            ls_hist_generic(p, 0, p->n_words, acc, r, w[t]);
        } else {
            ls_hist_generic(p, 0, p->w_split, acc, r, w[t] * ls_scale(r, 0));
            ls_hist_generic(p, p->w_split, p->n_words, acc, r, w[t] * ls_scale(r, 1));
        }
    }
}

void vq_ls_score_bytes_generic(const vq_ls_prog *p, const float *lut, const uint8_t *codes,
                               int64_t n, float *scores) {
    const int ns = p->n_fields;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *r = codes + (size_t)t * (size_t)p->rec;
        const float *L = lut;
        float a = 0.0f; /* one sum in field order: bitwise equal to the reference */
        int s = 0;
        for (; s + 4 <= ns; s += 4, L += 1024) {
            const uint32_t w = vq_ls_load32(r + s);
            a += L[w & 255u];
            a += L[256 + ((w >> 8) & 255u)];
            a += L[512 + ((w >> 16) & 255u)];
            a += L[768 + (w >> 24)];
        }
        for (; s < ns; s++, L += 256) a += L[r[s]];
        scores[t] = a;
    }
}

void vq_ls_accumulate_bytes_generic(const vq_ls_prog *p, const uint8_t *codes, int64_t n,
                                    const float *w, float *acc) {
    const int ns = p->n_fields;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *r = codes + (size_t)t * (size_t)p->rec;
        const float wt = w[t];
        float *H = acc;
        int s = 0;
        for (; s + 4 <= ns; s += 4, H += 1024) {
            const uint32_t x = vq_ls_load32(r + s);
            H[x & 255u] += wt;
            H[256 + ((x >> 8) & 255u)] += wt;
            H[512 + ((x >> 16) & 255u)] += wt;
            H[768 + (x >> 24)] += wt;
        }
        for (; s < ns; s++, H += 256) H[r[s]] += wt;
    }
}

/* ---- encode / decode ------------------------------------------------------------------------- */

static vq_status vi_encode_impl(const struct vq_codec *c, const float *x, int64_t n_blocks,
                                uint8_t *dst, int simd) {
    const struct vi_impl *m = c->impl;
    const int d = m->d;
    for (int64_t i = 0; i < n_blocks * d; i++)
        if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;
    for (int64_t i = 0; i < n_blocks * d; i++) /* library-wide input range (vq_sf16) */
        if (fabsf(x[i]) > VQ_SF16_MAX) return VQ_STATUS_RANGE;
    float t[1024];
    uint32_t codes[1024];
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *r = x + b * d;
        for (int i = 0; i < d; i++) t[i] = r[i] / m->lambda[i];
        if (m->is_key) vq_wht_blocks(t, d);
        if (simd && m->argmin) {
            for (int s = 0; s < m->n_sub; s++)
                codes[s] = (uint32_t)m->argmin(t + s * m->v, m->cbt, m->cn, m->k, m->v);
        } else {
            for (int s = 0; s < m->n_sub; s++)
                codes[s] = (uint32_t)vq_nearest_centroid(t + s * m->v, m->cb, m->cn, m->k, m->v);
        }
        vi_put_codes(dst + (size_t)b * m->code_bytes, codes, m->n_sub, m->c, m->code_bytes);
    }
    return VQ_STATUS_OK;
}

vq_status vq_vi_encode_ref(const struct vq_codec *c, const float *x, int64_t n_blocks,
                           uint8_t *dst) {
    return vi_encode_impl(c, x, n_blocks, dst, 0);
}

static vq_status vi_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                           uint8_t *dst) {
    return vi_encode_impl(c, x, n_blocks, dst, 1);
}

static void vi_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct vi_impl *m = c->impl;
    const int d = m->d;
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *p = src + (size_t)b * m->code_bytes;
        float *o = x + b * d;
        for (int s = 0; s < m->n_sub; s++) {
            const uint32_t i = vi_get_code(p, s, m->c, m->code_bytes);
            memcpy(o + s * m->v, m->cb + (size_t)i * m->v, (size_t)m->v * sizeof(float));
        }
        if (m->is_key) vq_wht_blocks(o, d);
        for (int i = 0; i < d; i++) o[i] *= m->lambda[i];
    }
}

/* ---- fused score / value paths --------------------------------------------------------------- */

static void vi_prepare_impl(const struct vq_codec *c, const float *q, void *qs, int simd) {
    const struct vi_impl *m = c->impl;
    float t[1024];
    for (int i = 0; i < m->d; i++) t[i] = q[i] * m->lambda[i];
    if (m->is_key) vq_wht_blocks(t, m->d);
    float *lut = qs;
    if (m->vk_on) { /* q~ after the tables, zero-padded */
        float *qt = lut + m->vk.q_off;
        memcpy(qt, t, (size_t)m->d * sizeof(float));
        for (int i = m->d; i < 16 * m->vk.nz; i++) qt[i] = 0.0f;
        if (simd) return; /* the coordinate-domain kernels read q~ only */
    }
    for (int s = 0; s < m->n_sub; s++) {
        const float *qsub = t + s * m->v;
        float *row = lut + (size_t)s * m->k;
        if (simd && m->cols_dot) { /* same products and order: bitwise equal */
            m->cols_dot(m->cbt, m->v, m->k, qsub, row);
            continue;
        }
        for (int i = 0; i < m->k; i++) {
            const float *cw = m->cb + (size_t)i * m->v;
            float dot = 0.0f;
            for (int j = 0; j < m->v; j++) dot += qsub[j] * cw[j];
            row[i] = dot;
        }
    }
}

void vq_vi_prepare_query_ref(const struct vq_codec *c, const float *q, void *qs) {
    vi_prepare_impl(c, q, qs, 0);
}

static void vi_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    vi_prepare_impl(c, q, qs, 1);
}

void vq_vi_score_ref(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                     int64_t n_tokens, float *scores) {
    const struct vi_impl *m = c->impl;
    const float *lut = qs;
    const int n_sub = m->n_sub, k = m->k;
    if (m->c == 8) {
        for (int64_t t = 0; t < n_tokens; t++) {
            const uint8_t *p = codes + (size_t)t * m->code_bytes;
            float acc = 0.0f;
            for (int s = 0; s < n_sub; s++) acc += lut[(size_t)s * 256 + p[s]];
            scores[t] = acc;
        }
        return;
    }
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *p = codes + (size_t)t * m->code_bytes;
        float acc = 0.0f;
        for (int s = 0; s < n_sub; s++)
            acc += lut[(size_t)s * k + vi_get_code(p, s, m->c, m->code_bytes)];
        scores[t] = acc;
    }
}

static void vi_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                           const uint8_t *codes, int64_t n_tokens, float *const *scores) {
#ifdef VQ_HAVE_X86
    vq_vi_score_multi_avx512(&((const struct vi_impl *)c->impl)->vk, (const float *const *)qs, nq,
                             codes, n_tokens, scores);
#else
    (void)c, (void)qs, (void)nq, (void)codes, (void)n_tokens, (void)scores;
#endif
}

static void vi_accumulate_multi(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                                const float *const *w, int nq, float *const *acc) {
#ifdef VQ_HAVE_X86
    vq_vi_acc_multi_avx512(&((const struct vi_impl *)c->impl)->vk, codes, n_tokens, w, nq, acc);
#else
    (void)c, (void)codes, (void)n_tokens, (void)w, (void)nq, (void)acc;
#endif
}

static void vi_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                     int64_t n_tokens, float *scores) {
    const struct vi_impl *m = c->impl;
    if (m->vk_on) vi_score_multi(c, &qs, 1, codes, n_tokens, &scores);
    else if (m->score) m->score(&m->prog, qs, codes, n_tokens, scores);
    else vq_vi_score_ref(c, qs, codes, n_tokens, scores);
}

void vq_vi_accumulate_ref(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                          const float *w, float *acc) {
    const struct vi_impl *m = c->impl;
    const int n_sub = m->n_sub, k = m->k;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *p = codes + (size_t)t * m->code_bytes;
        const float wt = w[t];
        for (int s = 0; s < n_sub; s++)
            acc[(size_t)s * k + vi_get_code(p, s, m->c, m->code_bytes)] += wt;
    }
}

static void vi_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                          const float *w, float *acc) {
    const struct vi_impl *m = c->impl;
    if (m->vk_on) vi_accumulate_multi(c, codes, n_tokens, &w, 1, &acc);
    else if (m->acc) m->acc(&m->prog, codes, n_tokens, w, acc);
    else vq_vi_accumulate_ref(c, codes, n_tokens, w, acc);
}

static void vi_finish_impl(const struct vq_codec *c, const float *acc, float *out, int simd) {
    const struct vi_impl *m = c->impl;
    const int v = m->v, k = m->k;
    if (simd && m->finish_hist) { /* same operations and order: bitwise equal */
        m->finish_hist(acc, m->n_sub, k, v, m->cb, out);
    } else {
        for (int s = 0; s < m->n_sub; s++) {
            const float *hist = acc + (size_t)s * k;
            float o[16] = {0};
            for (int i = 0; i < k; i++) {
                const float h = hist[i];
                if (h == 0.0f) continue;
                const float *cw = m->cb + (size_t)i * v;
                for (int j = 0; j < v; j++) o[j] += h * cw[j];
            }
            memcpy(out + s * v, o, (size_t)v * sizeof(float));
        }
    }
    if (m->vk_on) /* the coordinate-domain part */
        for (int i = 0; i < m->d; i++) out[i] += acc[m->vk.z_off + i];
    if (m->is_key) vq_wht_blocks(out, m->d);
    for (int i = 0; i < m->d; i++) out[i] *= m->lambda[i];
}

void vq_vi_finish_ref(const struct vq_codec *c, const float *acc, float *out) {
    vi_finish_impl(c, acc, out, 0);
}

static void vi_finish(const struct vq_codec *c, const float *acc, float *out) {
    vi_finish_impl(c, acc, out, 1);
}

/* ---- create / destroy ------------------------------------------------------------------------ */

static void vi_destroy(struct vq_codec *c) {
    struct vi_impl *m = c->impl;
    if (!m) return;
    vq_free(m->lambda);
    vq_free(m->cb);
    vq_free(m->cn);
    vq_free(m->cbt);
    vq_ls_prog_free(&m->prog);
    vq_free(m->vk.sub);
    vq_free(m->vk.j);
    vq_free(m);
    c->impl = NULL;
}

/* Builds the lane tables of the coordinate-domain kernels (vq_vi_vk, lutsum_kernels.h) and turns
 * them on where they apply: AVX-512, at most 64 sub-vectors, codes of at least 4 bytes. */
static vq_status vi_vk_build(const struct vq_codec *c, struct vi_impl *m) {
    m->vk_on = 0;
#ifdef VQ_HAVE_X86
    if (c->isa != VQ_ISA_AVX512 || m->n_sub > 64 || m->code_bytes < 4) return VQ_STATUS_OK;
    vq_vi_vk *k = &m->vk;
    k->d = m->d;
    k->c = m->c;
    k->v = m->v;
    k->n_sub = m->n_sub;
    k->code_bytes = (int)m->code_bytes;
    k->nz = (m->d + 15) / 16;
    k->q_off = m->n_sub * m->k;
    k->z_off = m->n_sub * m->k;
    k->cb = m->cb;
    k->sub = vq_alloc((size_t)k->nz * 16 * sizeof(int32_t));
    k->j = vq_alloc((size_t)k->nz * 16 * sizeof(int32_t));
    if (!k->sub || !k->j) return VQ_STATUS_NO_MEMORY;
    for (int i = 0; i < 16 * k->nz; i++) { /* lanes past d: any in-range codeword (masked) */
        const int ci = i < m->d ? i : 0;
        k->sub[i] = ci / m->v;
        k->j[i] = ci % m->v;
    }
    m->vk_on = 1;
#else
    (void)c;
#endif
    return VQ_STATUS_OK;
}

/* Builds the field program and picks the kernels for c->isa. */
static vq_status vi_kernels(const struct vq_codec *c, struct vi_impl *m) {
    if (m->code_bytes >= 4) {
        uint32_t bit[1024], lut_off[1024];
        uint8_t width[1024];
        for (int s = 0; s < m->n_sub; s++) {
            bit[s] = (uint32_t)(s * m->c);
            width[s] = (uint8_t)m->c;
            lut_off[s] = (uint32_t)(s * m->k);
        }
        VQ_RETURN_IF_ERR(vq_ls_prog_build(&m->prog, (int)m->code_bytes, 0, m->n_sub, bit, width,
                                          lut_off, m->n_sub, 0));
        m->has_prog = 1;
        m->score = m->c == 8 ? vq_ls_score_bytes_generic : vq_ls_score_generic;
        m->acc = m->c == 8 ? vq_ls_accumulate_bytes_generic : vq_ls_accumulate_generic;
    }
#ifdef VQ_HAVE_X86
    /* Score: the gather kernels for c != 8; for c = 8 the byte kernel stays (faster than
     * gathers on the measured CPU, docs/BENCHMARK.md). Accumulate: generic everywhere (a
     * gather + scatter version measured 2-4x slower). */
    if (c->isa == VQ_ISA_AVX512) {
        if (m->has_prog && m->c != 8) m->score = vq_ls_score_avx512;
        m->cols_dot = vq_ls_cols_dot_avx512;
        m->finish_hist = vq_ls_vi_finish_avx2; /* 16-lane gathers measured 2x slower */
        m->argmin = vq_ls_argmin_avx512;
    } else if (c->isa == VQ_ISA_AVX2) {
        if (m->has_prog && m->c != 8) m->score = vq_ls_score_avx2;
        m->cols_dot = vq_ls_cols_dot_avx2;
        m->finish_hist = vq_ls_vi_finish_avx2;
        m->argmin = vq_ls_argmin_avx2;
    }
#endif
    return VQ_STATUS_OK;
}

vq_status vq_vecinfer_shape(const struct vq_codec_params *p, int *c, int *v) {
    if (!p || !c || !v) return VQ_STATUS_INVALID_ARG;
    int cb = p->pq_codeword_bits, sv = p->pq_subvec_dim;
    if ((cb == 0) != (sv == 0)) return VQ_STATUS_INVALID_ARG;
    if (cb == 0) {
        switch (p->bits) {
        case 1:
            cb = 8;
            sv = 8;
            break;
        case 2:
            cb = 8;
            sv = 4;
            break;
        case 3:
            cb = 12;
            sv = 4;
            break;
        case 4:
            cb = 8;
            sv = 2;
            break;
        default: return VQ_STATUS_INVALID_ARG;
        }
    }
    *c = cb;
    *v = sv;
    return VQ_STATUS_OK;
}

static vq_status vi_init(struct vq_codec *c) {
    struct vq_codec_params *p = &c->p;
    const int d = p->head_dim;
    int cb, v;
    VQ_RETURN_IF_ERR(vq_vecinfer_shape(p, &cb, &v));
    if (cb < 1 || cb > 12 || v < 1 || v > 16 || d % v != 0) return VQ_STATUS_INVALID_ARG;
    const int k = 1 << cb;
    const struct vq_calib_lr *e = NULL;
    if (p->calib) {
        if (vq_calib_data_head_dim(p->calib) != d) return VQ_STATUS_INVALID_ARG;
        e = vq_calib_get(p->calib, p->calib_layer, p->role);
        if (!e) return VQ_STATUS_INVALID_ARG; /* layer out of range */
        if (!e->codebook || (p->role == VQ_ROLE_KEY && !e->smooth)) return VQ_STATUS_NOT_FOUND;
        if (e->cb_k != k || e->cb_v != v) return VQ_STATUS_INVALID_ARG;
    }
    struct vi_impl *m = vq_alloc(sizeof *m);
    if (!m) return VQ_STATUS_NO_MEMORY;
    c->impl = m;
    m->d = d;
    m->c = cb;
    m->v = v;
    m->k = k;
    m->n_sub = d / v;
    m->is_key = p->role == VQ_ROLE_KEY;
    m->code_bytes = ((size_t)m->n_sub * (size_t)cb + 7) / 8;
    m->lambda = vq_alloc((size_t)d * sizeof(float));
    m->cb = vq_alloc((size_t)k * (size_t)v * sizeof(float));
    m->cn = vq_alloc((size_t)k * sizeof(float));
    m->cbt = vq_alloc((size_t)k * (size_t)v * sizeof(float));
    if (!m->lambda || !m->cb || !m->cn || !m->cbt) {
        vi_destroy(c);
        return VQ_STATUS_NO_MEMORY;
    }
    for (int i = 0; i < d; i++) m->lambda[i] = (e && e->smooth) ? e->smooth[i] : 1.0f;
    if (e) {
        memcpy(m->cb, e->codebook, (size_t)k * (size_t)v * sizeof(float));
    } else {
        vq_rng r;
        vq_rng_seed(&r, p->seed ^ 0x7665637666616c6cull); /* "vecvfall" */
        for (int i = 0; i < k * v; i++) m->cb[i] = (float)vq_rng_normal(&r);
    }
    for (int i = 0; i < k; i++) {
        float s = 0.0f;
        for (int j = 0; j < v; j++) s += m->cb[(size_t)i * v + j] * m->cb[(size_t)i * v + j];
        m->cn[i] = s;
        for (int j = 0; j < v; j++) m->cbt[(size_t)j * k + i] = m->cb[(size_t)i * v + j];
    }
    vq_status st = vi_kernels(c, m);
    if (st == VQ_STATUS_OK) st = vi_vk_build(c, m);
    if (st != VQ_STATUS_OK) {
        vi_destroy(c);
        return st;
    }
    c->block_tokens = 1;
    c->block_bytes = m->code_bytes;
    const size_t zf = m->vk_on ? 16 * (size_t)m->vk.nz : 0;
    c->query_bytes = ((size_t)m->n_sub * (size_t)k + zf) * sizeof(float);
    c->acc_floats = (size_t)m->n_sub * (size_t)k + zf;
    c->encode = vi_encode;
    c->decode = vi_decode;
    c->prepare_query = vi_prepare_query;
    c->score = vi_score;
    c->accumulate = vi_accumulate;
    c->finish = vi_finish;
    if (m->vk_on) {
        c->score_multi = vi_score_multi;
        c->accumulate_multi = vi_accumulate_multi;
    }
    return VQ_STATUS_OK;
}

/* Widths: an integer b selects the preset of b (explicit shape cleared); 1.5 is the shape
 * (12, 8) with bits 2 (bits is not read while a shape is set). */
static void vi_set_bits(struct vq_codec_params *p, double bits) {
    const int half = bits != (double)(int)bits;
    p->bits = half ? 2 : (int)bits;
    p->pq_codeword_bits = half ? 12 : 0;
    p->pq_subvec_dim = half ? 8 : 0;
}

/* c / v of the shape in use (1, 1.5, 2, 3, 4 for the presets); p->bits when it has none. */
static double vi_bits_of(const struct vq_codec_params *p) {
    int c, v;
    if (vq_vecinfer_shape(p, &c, &v) != VQ_STATUS_OK || v <= 0) return p->bits;
    return (double)c / v;
}

/* vq_codec_use_ref_kernels: the reference kernels (decode has a single version). */
static void vi_use_ref(struct vq_codec *c) {
    c->encode = vq_vi_encode_ref;
    c->prepare_query = vq_vi_prepare_query_ref;
    c->score = vq_vi_score_ref;
    c->accumulate = vq_vi_accumulate_ref;
    c->finish = vq_vi_finish_ref;
}

const struct vq_codec_i vq_codec_vecinfer = {
    .name = "vecinfer",
    .params_doc =
        "bits=1|2|3|4 presets (c,v)=(8,8)|(8,4)|(12,4)|(8,2); pq_codeword_bits c<=12, "
        "pq_subvec_dim v<=16 (1.5 bits: c=12 v=8); calib, calib_layer",
    .bits_formula = "c / v",
    .needs_calibration = 1,
    .default_bits = 2,
    .min_bits = 1,
    .max_bits = 4,
    .frac_bits = 1.5,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_CALIBRATION | VQ_METHOD_F_CALIB_CODEBOOK |
             VQ_METHOD_F_OUTLIER_TOKENS,
    .set_bits = vi_set_bits,
    .bits_of = vi_bits_of,
    .init = vi_init,
    .destroy = vi_destroy,
    .use_ref_kernels = vi_use_ref,
};
