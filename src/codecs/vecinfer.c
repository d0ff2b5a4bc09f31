/*
 * vecinfer.c — VecInfer product vector quantization (VQ_METHOD_VECINFER; ALGORITHMS.md 8.1).
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
 * quality is poor (random codebooks; ALGORITHMS.md: "random codebooks are useless"): it
 * exists for shape/contract tests, not for use.
 *
 * Fused paths. Prepared query: q~ = WHT(q * lambda) (keys) or q (values), then the table
 * LUT[s][i] = <q~_s, C_i> (n_sub * k floats); score = sum_s LUT[s][idx_s] (n_sub table reads,
 * since <q, x^> = <q~, x~^> for the orthonormal symmetric WHT). Values: accumulator = per
 * sub-vector histograms W[s][i] += w_t (n_sub * k floats); finish o~_s = sum_i W[s][i] C_i,
 * then out = lambda * WHT(o~) for keys, o~ for values.
 */
#include <math.h>
#include <string.h>

#include "calib/calib.h"
#include "codecs/codec_impl.h"

struct vi_impl {
    int d, c, v, n_sub, k;
    int is_key;
    size_t code_bytes;
    float *lambda;   /* (d) smoothing factors (all 1 for values / fallback) */
    float *cb;       /* (k, v) codebook */
    float *cn;       /* (k) squared codeword norms */
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

/* ---- encode / decode ------------------------------------------------------------------------- */

static vq_status vi_encode(const struct vq_codec *c, const float *x, int64_t n_blocks, uint8_t *dst) {
    const struct vi_impl *m = c->impl;
    const int d = m->d;
    for (int64_t i = 0; i < n_blocks * d; i++)
        if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;
    for (int64_t i = 0; i < n_blocks * d; i++)   /* library-wide input range (vq_sf16) */
        if (fabsf(x[i]) > VQ_SF16_MAX) return VQ_STATUS_RANGE;
    float t[1024];
    uint32_t codes[1024];
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *r = x + b * d;
        for (int i = 0; i < d; i++) t[i] = r[i] / m->lambda[i];
        if (m->is_key) vq_wht_blocks(t, d);
        for (int s = 0; s < m->n_sub; s++)
            codes[s] = (uint32_t)vq_nearest_centroid(t + s * m->v, m->cb, m->cn, m->k, m->v);
        vi_put_codes(dst + (size_t)b * m->code_bytes, codes, m->n_sub, m->c, m->code_bytes);
    }
    return VQ_STATUS_OK;
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

/* ---- fused score / value paths ---------------------------------------------------------------- */

static void vi_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    const struct vi_impl *m = c->impl;
    float t[1024];
    for (int i = 0; i < m->d; i++) t[i] = q[i] * m->lambda[i];
    if (m->is_key) vq_wht_blocks(t, m->d);
    float *lut = qs;
    for (int s = 0; s < m->n_sub; s++) {
        const float *qsub = t + s * m->v;
        float *row = lut + (size_t)s * m->k;
        for (int i = 0; i < m->k; i++) {
            const float *cw = m->cb + (size_t)i * m->v;
            float dot = 0.0f;
            for (int j = 0; j < m->v; j++) dot += qsub[j] * cw[j];
            row[i] = dot;
        }
    }
}

static void vi_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
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
        for (int s = 0; s < n_sub; s++) acc += lut[(size_t)s * k + vi_get_code(p, s, m->c, m->code_bytes)];
        scores[t] = acc;
    }
}

static void vi_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                          const float *w, float *acc) {
    const struct vi_impl *m = c->impl;
    const int n_sub = m->n_sub, k = m->k;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *p = codes + (size_t)t * m->code_bytes;
        const float wt = w[t];
        for (int s = 0; s < n_sub; s++) acc[(size_t)s * k + vi_get_code(p, s, m->c, m->code_bytes)] += wt;
    }
}

static void vi_finish(const struct vq_codec *c, const float *acc, float *out) {
    const struct vi_impl *m = c->impl;
    const int v = m->v, k = m->k;
    for (int s = 0; s < m->n_sub; s++) {
        float o[16] = {0};
        const float *hist = acc + (size_t)s * k;
        for (int i = 0; i < k; i++) {
            const float h = hist[i];
            if (h == 0.0f) continue;
            const float *cw = m->cb + (size_t)i * v;
            for (int j = 0; j < v; j++) o[j] += h * cw[j];
        }
        memcpy(out + s * v, o, (size_t)v * sizeof(float));
    }
    if (m->is_key) vq_wht_blocks(out, m->d);
    for (int i = 0; i < m->d; i++) out[i] *= m->lambda[i];
}

/* ---- create / destroy ------------------------------------------------------------------------ */

static void vi_destroy(struct vq_codec *c) {
    struct vi_impl *m = c->impl;
    if (!m) return;
    vq_free(m->lambda);
    vq_free(m->cb);
    vq_free(m->cn);
    vq_free(m);
    c->impl = NULL;
}

static vq_status vi_init(struct vq_codec *c) {
    struct vq_codec_params *p = &c->p;
    const int d = p->head_dim;
    int cb = p->pq_codeword_bits, v = p->pq_subvec_dim;
    if ((cb == 0) != (v == 0)) return VQ_STATUS_INVALID_ARG;
    if (cb == 0) {
        switch (p->bits) {
        case 1: cb = 8; v = 8; break;
        case 2: cb = 8; v = 4; break;
        case 3: cb = 12; v = 4; break;
        case 4: cb = 8; v = 2; break;
        default: return VQ_STATUS_INVALID_ARG;
        }
    }
    if (cb < 1 || cb > 12 || v < 1 || v > 16 || d % v != 0) return VQ_STATUS_INVALID_ARG;
    const int k = 1 << cb;
    const struct vq_calib_lr *e = NULL;
    if (p->calib) {
        if (vq_calib_data_head_dim(p->calib) != d) return VQ_STATUS_INVALID_ARG;
        e = vq_calib_get(p->calib, p->calib_layer, p->role);
        if (!e) return VQ_STATUS_INVALID_ARG;   /* layer out of range */
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
    if (!m->lambda || !m->cb || !m->cn) {
        vi_destroy(c);
        return VQ_STATUS_NO_MEMORY;
    }
    for (int i = 0; i < d; i++) m->lambda[i] = (e && e->smooth) ? e->smooth[i] : 1.0f;
    if (e) {
        memcpy(m->cb, e->codebook, (size_t)k * (size_t)v * sizeof(float));
    } else {
        vq_rng r;
        vq_rng_seed(&r, p->seed ^ 0x7665637666616c6cull);   /* "vecvfall" */
        for (int i = 0; i < k * v; i++) m->cb[i] = (float)vq_rng_normal(&r);
    }
    for (int i = 0; i < k; i++) {
        float s = 0.0f;
        for (int j = 0; j < v; j++) s += m->cb[(size_t)i * v + j] * m->cb[(size_t)i * v + j];
        m->cn[i] = s;
    }
    c->block_tokens = 1;
    c->block_bytes = m->code_bytes;
    c->query_bytes = (size_t)m->n_sub * (size_t)k * sizeof(float);
    c->acc_floats = (size_t)m->n_sub * (size_t)k;
    c->encode = vi_encode;
    c->decode = vi_decode;
    c->prepare_query = vi_prepare_query;
    c->score = vi_score;
    c->accumulate = vi_accumulate;
    c->finish = vi_finish;
    return VQ_STATUS_OK;
}

const struct vq_codec_i vq_codec_vecinfer = {
    .name = "vecinfer",
    .params_doc = "bits=1|2|3|4 presets (c,v)=(8,8)|(8,4)|(12,4)|(8,2); pq_codeword_bits c<=12, "
                  "pq_subvec_dim v<=16 (1.5 bits: c=12 v=8); calib, calib_layer",
    .bits_formula = "c / v",
    .needs_calibration = 1,
    .init = vi_init,
    .destroy = vi_destroy,
};
