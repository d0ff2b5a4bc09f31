/*
 * kivi.c — KIVI (arXiv 2402.02750) asymmetric min/max quantization, docs/ALGORITHMS.md §7, as two
 * registered methods: VQ_METHOD_KIVI and VQ_METHOD_KIVI_SINK (identical blocks; the cache
 * adds fp16 sink tokens for kivi_sink, see src/cache/cache.c).
 *
 * Parameters: bits in 2..8; group_size G in 1..1024; residual_length R >= 0, a multiple
 * of G (the cache's fp16 window; 0 = none for values, G for keys); kivi_sink: n_sink_tokens in
 * 0..64. Values need head_dim % G == 0. head_dim d is a multiple of 8.
 *
 * Quantizer (per group of elements): z = min, s = (max - min) / (2^b - 1), both stored as
 * vq_sf16 (ŝ, ẑ); code = clamp(floor((x - ẑ) / ŝ + 0.5), 0, 2^b - 1) (code 0 when ŝ = 0);
 * decode x̂ = code * ŝ + ẑ. Encode returns NON_FINITE for NaN/Inf and RANGE when z or s does
 * not fit vq_sf16 (|v| > VQ_SF16_MAX, including max - min overflowing).
 *
 * Code row (the d codes of one token, channel order), rowb = d*b/8 bytes:
 *   b = 2, 4: one LSB-first bit stream, code of channel c at bits [c*b, (c+1)*b).
 *   b = 8:    one byte per code (byte c = code of channel c).
 *   b = 3, 5, 6, 7: bit planes of decreasing width, each an LSB-first stream of d fields in
 *             channel order, holding successive bits of the code from the LSB:
 *             3 = 2-bit plane (bits 0-1, d/4 bytes) + 1-bit plane (bit 2, d/8 bytes);
 *             5 = 4-bit plane (bits 0-3, d/2 bytes) + 1-bit plane (bit 4, d/8 bytes);
 *             6 = 4-bit plane + 2-bit plane (bits 4-5, d/4 bytes);
 *             7 = 4-bit plane + 2-bit plane (bits 4-5) + 1-bit plane (bit 6).
 *   A plane of w bits starts at byte d*(sum of the widths before it)/8 of the row, so a SIMD
 *   kernel reads each plane's fields for 8 or 16 channels with one small load.
 *
 * Key block (role KEY, per-channel groups along time; block_tokens = G):
 *   [0, 2d)            ŝ_c, sf16 little-endian, channel c = 0..d-1
 *   [2d, 4d)           ẑ_c, sf16 little-endian
 *   [4d, 4d + G*rowb)  G code rows, token order
 *   block_bytes = 4d + G*d*b/8; bits/elem = b + 32/G.
 * Keys with per-channel widths (params.channel_bits, docs/ALGORITHMS.md §8.8): the channels
 * are ordered by width class (decreasing width, ascending channel within a class; "position"
 * i holds channel perm[i]); ŝ and ẑ are stored in position order, and each class stores its
 * own G code rows (n_k channels at b_k bits: n_k*b_k/8 bytes per row, layout above) one class
 * after the other, widest first. Σ n_k b_k = d*b, so block_bytes and bits/elem are those of b;
 * without channel_bits this is exactly the layout above (one class, identity order).
 * Value block (role VALUE, per-token groups of G channels; block_tokens = 1), ng = d/G:
 *   [0, 2ng)           ŝ_h, sf16, group h = 0..ng-1 (channels hG .. hG+G-1)
 *   [2ng, 4ng)         ẑ_h, sf16
 *   [4ng, 4ng + rowb)  the token's code row
 *   block_bytes = 4d/G + d*b/8; bits/elem = b + 32/G.
 *
 * Fused paths (§7.3): keys score a block with the scale-folded query q'_c = q_c ŝ_c and the
 * bias β = Σ_c q_c ẑ_c: score_t = β + Σ_c q'_c code_{t,c} (with width classes: the query is
 * permuted once by prepare_query, and each class's partial sum is added to the first's).
 * Values accumulate in acc (d + ng floats): acc[c] += (w ŝ_h) code_c, acc[d + h] += w ẑ_h;
 * finish adds the bias.
 * Key-role accumulate and value-role score (not used by the cache) are exact but scalar.
 */
#include <math.h>
#include <string.h>

#include "codecs/codec_impl.h"
#include "codecs/kivi.h"

/* ---- code rows -------------------------------------------------------------------------- */

/* Plane widths of a code row at `bits` bits, LSB plane first (layout above); returns the
 * number of planes (1 for bits 2, 4 and 8: a single stream). */
static int row_planes(int bits, int w[3]) {
    switch (bits) {
    case 3: w[0] = 2, w[1] = 1; return 2;
    case 5: w[0] = 4, w[1] = 1; return 2;
    case 6: w[0] = 4, w[1] = 2; return 2;
    case 7: w[0] = 4, w[1] = 2, w[2] = 1; return 3;
    default: w[0] = bits; return 1;
    }
}

void vq_kivi_pack_row(const uint8_t *codes, int d, int bits, uint8_t *row) {
    int w[3];
    const int np = row_planes(bits, w);
    uint8_t part[1024];
    for (int i = 0, sh = 0; i < np; sh += w[i], i++) {
        for (int c = 0; c < d; c++) part[c] = (uint8_t)(codes[c] >> sh);
        vq_pack(part, d, w[i], row); /* vq_pack keeps the low w[i] bits */
        row += (size_t)d * (size_t)w[i] / 8;
    }
}

void vq_kivi_unpack_row(const uint8_t *row, int d, int bits, uint8_t *codes) {
    int w[3];
    const int np = row_planes(bits, w);
    vq_unpack(row, d, w[0], codes);
    row += (size_t)d * (size_t)w[0] / 8;
    uint8_t part[1024];
    for (int i = 1, sh = w[0]; i < np; sh += w[i], i++) {
        vq_unpack(row, d, w[i], part);
        for (int c = 0; c < d; c++) codes[c] = (uint8_t)(codes[c] | part[c] << sh);
        row += (size_t)d * (size_t)w[i] / 8;
    }
}

/* ---- scalar reference kernels ---------------------------------------------------------- */

void vq_kivi_dot_rows_ref(const float *qp, const uint8_t *rows, int d, int bits, int64_t n,
                          float bias, float *out) {
    const size_t rb = vq_kivi_row_bytes(d, bits);
    uint8_t codes[1024];
    for (int64_t t = 0; t < n; t++) {
        vq_kivi_unpack_row(rows + (size_t)t * rb, d, bits, codes);
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int c = 0; c < d; c += 4) {
            s0 += qp[c] * (float)codes[c];
            s1 += qp[c + 1] * (float)codes[c + 1];
            s2 += qp[c + 2] * (float)codes[c + 2];
            s3 += qp[c + 3] * (float)codes[c + 3];
        }
        out[t] = bias + ((s0 + s1) + (s2 + s3));
    }
}

void vq_kivi_dot_classes_ref(const float *qp, const uint8_t *rows, int ncls, const int *bits,
                             const int *nch, const size_t *off, int64_t n, float bias, float *out) {
    float part[64];
    vq_kivi_dot_rows_ref(qp, rows + off[0], nch[0], bits[0], n, bias, out);
    qp += nch[0];
    for (int k = 1; k < ncls; k++) {
        for (int64_t t0 = 0; t0 < n; t0 += 64) {
            const int64_t m = n - t0 < 64 ? n - t0 : 64;
            const size_t rb = vq_kivi_row_bytes(nch[k], bits[k]);
            vq_kivi_dot_rows_ref(qp, rows + off[k] + (size_t)t0 * rb, nch[k], bits[k], m, 0.0f,
                                 part);
            for (int64_t t = 0; t < m; t++) out[t0 + t] += part[t];
        }
        qp += nch[k];
    }
}

void vq_kivi_acc_row_ref(const uint8_t *row, int d, int bits, int g, const float *a, float *acc) {
    uint8_t codes[1024];
    vq_kivi_unpack_row(row, d, bits, codes);
    for (int c = 0; c < d; c++) acc[c] += a[c / g] * (float)codes[c];
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

float vq_kivi_fold_ref(const float *q, const uint8_t *s16, const uint8_t *z16, int d, float *qp) {
    float bias = 0;
    for (int c = 0; c < d; c++) {
        qp[c] = q[c] * vq_sf16_to_fp32(rd16(s16 + 2 * c));
        bias += q[c] * vq_sf16_to_fp32(rd16(z16 + 2 * c));
    }
    return bias;
}

void vq_kivi_acc_vals_ref(const uint8_t *blocks, size_t block_bytes, int64_t n, const float *w,
                          int d, int bits, int g, float *acc) {
    const int ng = d / g;
    float a[1024];
    for (int64_t t = 0; t < n; t++) {
        const float wt = w[t];
        if (wt == 0.0f) continue;
        const uint8_t *blk = blocks + (size_t)t * block_bytes;
        for (int h = 0; h < ng; h++) {
            a[h] = wt * vq_sf16_to_fp32(rd16(blk + 2 * h));
            acc[d + h] += wt * vq_sf16_to_fp32(rd16(blk + 2 * ng + 2 * h));
        }
        vq_kivi_acc_row_ref(blk + 4 * (size_t)ng, d, bits, g, a, acc);
    }
}

/* ---- codec state --------------------------------------------------------------------------- */

/* Keys are stored in width classes (one class at `bits` without channel_bits): class k holds
 * cls_n[k] channels (a multiple of 8) at cls_bits[k] bits, at permuted positions cls_c0[k] ..
 * cls_c0[k] + cls_n[k] - 1 (perm maps a position to its channel); its G code rows (cls_row[k]
 * bytes each) start cls_off[k] bytes after the block's scales and zeros. */
#define KIVI_MAX_CLS 8

struct vq_kivi_impl {
    int d, bits, g, ng; /* ng = d / g for values, 0 for keys */
    size_t rowb;
    int ncls, identity; /* identity: perm[i] = i */
    int ncz;            /* classes with codes: ncls, or ncls - 1 when the last is 0-bit */
    int cls_bits[KIVI_MAX_CLS], cls_n[KIVI_MAX_CLS], cls_c0[KIVI_MAX_CLS];
    size_t cls_row[KIVI_MAX_CLS], cls_off[KIVI_MAX_CLS];
    uint16_t perm[1024];
    uint8_t cbits[1024]; /* width of each permuted position; the caller's table: chan_bits */
    uint8_t chan_bits[1024];
    vq_kivi_fold_fn fold;
    vq_kivi_dot_rows_fn dot_rows;
    vq_kivi_dot_classes_fn dot_classes;             /* keys with more than one width class */
    vq_kivi_dot_classes_multi_fn dot_classes_multi; /* the same for up to 4 queries, or NULL */
    vq_kivi_acc_vals_fn acc_vals;
};

/* code = clamp(floor((x - z) / s + 0.5), 0, qmax), written branch-free so loops vectorize:
 * after the clamp r is in [0, qmax] and truncation equals floor. s = +inf (a zero scale)
 * gives code 0. */
static inline uint8_t quant1(float x, float z, float s, float qmax) {
    float r = (x - z) / s + 0.5f;
    r = r < 0.0f ? 0.0f : r;
    r = r > qmax ? qmax : r;
    return (uint8_t)(int)r;
}

/* Quantizes elements x[0], x[stride], ... (n of them) of one group: writes ŝ, ẑ and the codes.
 * Returns RANGE when a side value does not fit vq_sf16. */
static vq_status quant_group(const float *x, int64_t stride, int n, int bits, uint16_t *s_out,
                             uint16_t *z_out, uint8_t *codes, int64_t code_stride) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        const float v = x[(int64_t)i * stride];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    const float qmax = (float)((1 << bits) - 1);
    const float s = (hi - lo) / qmax;
    if (!vq_sf16_fits(lo) || !vq_sf16_fits(s)) return VQ_STATUS_RANGE;
    *s_out = vq_fp32_to_sf16(s);
    *z_out = vq_fp32_to_sf16(lo);
    const float sh = vq_sf16_to_fp32(*s_out), zh = vq_sf16_to_fp32(*z_out);
    const float div = sh > 0.0f ? sh : INFINITY;
    for (int i = 0; i < n; i++)
        codes[(int64_t)i * code_stride] = quant1(x[(int64_t)i * stride], zh, div, qmax);
    return VQ_STATUS_OK;
}

static vq_status kivi_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                             uint8_t *dst) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, bits = im->bits, g = im->g;
    const int64_t n = n_blocks * c->block_tokens * d;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return VQ_STATUS_NON_FINITE;
    uint8_t codes[1024];
    if (c->p.role == VQ_ROLE_KEY) {
        float sh[1024], zh[1024], dv[1024], qm[1024];
        for (int64_t b = 0; b < n_blocks; b++) {
            const float *xb = x + b * g * d;
            uint8_t *blk = dst + (size_t)b * c->block_bytes;
            float lo[1024], hi[1024];
            memcpy(lo, xb, (size_t)d * sizeof(float));
            memcpy(hi, xb, (size_t)d * sizeof(float));
            for (int t = 1; t < g; t++) {
                const float *xr = xb + (int64_t)t * d;
                for (int ch = 0; ch < d; ch++) {
                    lo[ch] = xr[ch] < lo[ch] ? xr[ch] : lo[ch];
                    hi[ch] = xr[ch] > hi[ch] ? xr[ch] : hi[ch];
                }
            }
            for (int i = 0; i < d; i++) { /* position i holds channel perm[i] */
                const int ch = im->perm[i];
                qm[i] = (float)((1 << im->cbits[i]) - 1);
                float s = 0.0f, z = lo[ch];
                if (im->cbits[i] > 0) s = (hi[ch] - lo[ch]) / qm[i];
                else { /* 0-bit channel: the group's mean, no codes */ double m = 0;
                    for (int t = 0; t < g; t++) m += xb[(int64_t)t * d + ch];
                    z = (float)(m / g);
                }
                if (!vq_sf16_fits(z) || !vq_sf16_fits(s)) return VQ_STATUS_RANGE;
                const uint16_t s16 = vq_fp32_to_sf16(s), z16 = vq_fp32_to_sf16(z);
                wr16(blk + 2 * i, s16);
                wr16(blk + 2 * d + 2 * i, z16);
                sh[i] = vq_sf16_to_fp32(s16);
                zh[i] = vq_sf16_to_fp32(z16);
                dv[i] = sh[i] > 0.0f ? sh[i] : INFINITY;
            }
            uint8_t *rows = blk + 4 * (size_t)d;
            for (int t = 0; t < g; t++) {
                const float *xr = xb + (int64_t)t * d;
                for (int i = 0; i < d; i++) codes[i] = quant1(xr[im->perm[i]], zh[i], dv[i], qm[i]);
                for (int k = 0; k < im->ncz; k++)
                    vq_kivi_pack_row(codes + im->cls_c0[k], im->cls_n[k], im->cls_bits[k],
                                     rows + im->cls_off[k] + (size_t)t * im->cls_row[k]);
            }
        }
        return VQ_STATUS_OK;
    }
    for (int64_t t = 0; t < n_blocks; t++) {
        const float *xr = x + t * d;
        uint8_t *blk = dst + (size_t)t * c->block_bytes;
        for (int h = 0; h < im->ng; h++) {
            uint16_t s, z;
            VQ_RETURN_IF_ERR(quant_group(xr + h * g, 1, g, bits, &s, &z, codes + h * g, 1));
            wr16(blk + 2 * h, s);
            wr16(blk + 2 * im->ng + 2 * h, z);
        }
        vq_kivi_pack_row(codes, d, bits, blk + 4 * (size_t)im->ng);
    }
    return VQ_STATUS_OK;
}

/* The d codes of row t of a key block, in position order. */
static void key_codes(const struct vq_kivi_impl *im, const uint8_t *blk, int t, uint8_t *codes) {
    const uint8_t *rows = blk + 4 * (size_t)im->d;
    for (int k = 0; k < im->ncz; k++)
        vq_kivi_unpack_row(rows + im->cls_off[k] + (size_t)t * im->cls_row[k], im->cls_n[k],
                           im->cls_bits[k], codes + im->cls_c0[k]);
    if (im->ncz < im->ncls) /* the 0-bit class: code 0 (its scale is 0) */
        memset(codes + im->cls_c0[im->ncz], 0, (size_t)im->cls_n[im->ncz]);
}

static void kivi_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, bits = im->bits, g = im->g;
    uint8_t codes[1024];
    if (c->p.role == VQ_ROLE_KEY) {
        for (int64_t b = 0; b < n_blocks; b++) {
            const uint8_t *blk = src + (size_t)b * c->block_bytes;
            for (int t = 0; t < g; t++) {
                key_codes(im, blk, t, codes);
                float *xr = x + (b * g + t) * d;
                for (int i = 0; i < d; i++)
                    xr[im->perm[i]] = (float)codes[i] * vq_sf16_to_fp32(rd16(blk + 2 * i)) +
                                      vq_sf16_to_fp32(rd16(blk + 2 * d + 2 * i));
            }
        }
        return;
    }
    for (int64_t t = 0; t < n_blocks; t++) {
        const uint8_t *blk = src + (size_t)t * c->block_bytes;
        vq_kivi_unpack_row(blk + 4 * (size_t)im->ng, d, bits, codes);
        float *xr = x + t * d;
        for (int ch = 0; ch < d; ch++) {
            const int h = ch / g;
            xr[ch] = (float)codes[ch] * vq_sf16_to_fp32(rd16(blk + 2 * h)) +
                     vq_sf16_to_fp32(rd16(blk + 2 * im->ng + 2 * h));
        }
    }
}

/* Prepared query: q (d floats; keys: in position order, q[perm[i]]), then for values the
 * per-group sums of q (ng floats). */
static void kivi_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    const struct vq_kivi_impl *im = c->impl;
    float *o = qs;
    if (im->identity) memcpy(o, q, (size_t)im->d * sizeof(float));
    else
        for (int i = 0; i < im->d; i++) o[i] = q[im->perm[i]];
    for (int h = 0; h < im->ng; h++) {
        float s = 0;
        for (int i = 0; i < im->g; i++) s += q[h * im->g + i];
        o[im->d + h] = s;
    }
}

/* Keys with width classes, up to 4 queries: each block's scale-folded queries, then one pass
 * of dot_classes_multi over its rows (same bits as kivi_score per query). */
static void kivi_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                             const uint8_t *codes, int64_t n_tokens, float *const *scores) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, g = im->g;
    float qpb[4][1024], bias[4], *out[4];
    const float *qp[4] = {qpb[0], qpb[1], qpb[2], qpb[3]};
    for (int64_t b = 0; b < n_tokens / g; b++) {
        const uint8_t *blk = codes + (size_t)b * c->block_bytes;
        for (int j = 0; j < nq; j++) {
            bias[j] = im->fold(qs[j], blk, blk + 2 * d, d, qpb[j]);
            out[j] = scores[j] + b * g;
        }
        /* the rows in quarters, each after asking for a quarter of the next block's bytes: a
         * steady stream of prefetches (the kernel waited on its loads; one burst per block
         * only moved the wait). Per-row arithmetic is unchanged: the same bits. */
        const uint8_t *rows = blk + 4 * (size_t)d, *next = blk + c->block_bytes;
        const int nsub = g % 64 == 0 ? 4 : 1, gs = g / nsub;
        const size_t qb = (c->block_bytes + (size_t)nsub - 1) / (size_t)nsub;
        for (int s = 0; s < nsub; s++) {
            if (b + 1 < n_tokens / g)
                for (size_t o = (size_t)s * qb; o < (size_t)(s + 1) * qb; o += 64)
                    vq_prefetch(next + o);
            size_t off[KIVI_MAX_CLS];
            float *os[4];
            for (int k = 0; k < im->ncz; k++)
                off[k] = im->cls_off[k] + (size_t)(s * gs) * im->cls_row[k];
            for (int j = 0; j < nq; j++) os[j] = out[j] + s * gs;
            im->dot_classes_multi(qp, nq, rows, im->ncz, im->cls_bits, im->cls_n, off, gs, bias,
                                  os);
        }
    }
}

static void kivi_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, g = im->g;
    const float *q = qs;
    if (c->p.role == VQ_ROLE_KEY) {
        float qp[1024];
        for (int64_t b = 0; b < n_tokens / g; b++) {
            const uint8_t *blk = codes + (size_t)b * c->block_bytes;
            const uint8_t *rows = blk + 4 * (size_t)d;
            float *out = scores + b * g;
            const float bias = im->fold(q, blk, blk + 2 * d, d, qp);
            if (im->ncls == 1) im->dot_rows(qp, rows, d, im->bits, g, bias, out);
            else
                im->dot_classes(qp, rows, im->ncz, im->cls_bits, im->cls_n, im->cls_off, g, bias,
                                out);
        }
        return;
    }
    uint8_t cd[1024];
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t *blk = codes + (size_t)t * c->block_bytes;
        vq_kivi_unpack_row(blk + 4 * (size_t)im->ng, d, im->bits, cd);
        float s = 0;
        for (int h = 0; h < im->ng; h++) {
            float dot = 0;
            for (int i = 0; i < g; i++) dot += q[h * g + i] * (float)cd[h * g + i];
            s += vq_sf16_to_fp32(rd16(blk + 2 * h)) * dot +
                 vq_sf16_to_fp32(rd16(blk + 2 * im->ng + 2 * h)) * q[d + h];
        }
        scores[t] = s;
    }
}

/* Accumulator: values: acc[0..d) = sum_t w_t s_{t,h} code_{t,c}, acc[d + h] = sum_t w_t z_{t,h};
 * keys: acc[0..d) directly in the output domain (per-block s_c, z_c folded at once). */
static void kivi_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, g = im->g;
    if (c->p.role == VQ_ROLE_KEY) {
        uint8_t cd[1024];
        float tmp[1024];
        for (int64_t b = 0; b < n_tokens / g; b++) {
            const uint8_t *blk = codes + (size_t)b * c->block_bytes;
            float wsum = 0;
            memset(tmp, 0, (size_t)d * sizeof(float));
            for (int t = 0; t < g; t++) {
                const float wt = w[b * g + t];
                if (wt == 0.0f) continue;
                wsum += wt;
                key_codes(im, blk, t, cd);
                for (int i = 0; i < d; i++) tmp[i] += wt * (float)cd[i];
            }
            for (int i = 0; i < d; i++)
                acc[im->perm[i]] += vq_sf16_to_fp32(rd16(blk + 2 * i)) * tmp[i] +
                                    vq_sf16_to_fp32(rd16(blk + 2 * d + 2 * i)) * wsum;
        }
        return;
    }
    im->acc_vals(codes, c->block_bytes, n_tokens, w, d, im->bits, g, acc);
}

static void kivi_finish(const struct vq_codec *c, const float *acc, float *out) {
    const struct vq_kivi_impl *im = c->impl;
    for (int ch = 0; ch < im->d; ch++)
        out[ch] = acc[ch] + (im->ng ? acc[im->d + ch / im->g] : 0.0f);
}

/* Width classes and permutation from the channel widths w (NULL: one class at im->bits):
 * classes by decreasing width, channels ascending within a class (a 0-bit class, if any, is
 * last). INVALID_ARG unless every width is 0 or 2..8, each used by a multiple of 8 channels,
 * at least one is nonzero, and the widths sum to d * bits. */
static vq_status kivi_classes(struct vq_kivi_impl *im, const uint8_t *w) {
    const int d = im->d;
    int n_at[9] = {0}, sum = 0;
    for (int c = 0; c < d; c++) {
        const int b = w ? w[c] : im->bits;
        if ((b < 2 && b != 0) || b > 8) return VQ_STATUS_INVALID_ARG;
        n_at[b]++;
        sum += b;
        im->chan_bits[c] = (uint8_t)b;
    }
    if (sum != d * im->bits) return VQ_STATUS_INVALID_ARG;
    im->ncls = 0;
    int pos = 0;
    size_t off = 0;
    for (int b = 8; b >= 0; b--) {
        if (n_at[b] == 0 || b == 1) continue;
        if (n_at[b] % 8 != 0) return VQ_STATUS_INVALID_ARG;
        const int k = im->ncls++;
        im->cls_bits[k] = b;
        im->cls_n[k] = n_at[b];
        im->cls_c0[k] = pos;
        im->cls_row[k] = vq_kivi_row_bytes(n_at[b], b);
        im->cls_off[k] = off;
        off += (size_t)im->g * im->cls_row[k];
        for (int c = 0; c < d; c++)
            if (im->chan_bits[c] == b) {
                im->cbits[pos] = (uint8_t)b;
                im->perm[pos++] = (uint16_t)c;
            }
    }
    im->ncz = im->ncls - (im->cls_bits[im->ncls - 1] == 0);
    if (im->ncz == 0) return VQ_STATUS_INVALID_ARG;
    im->identity = 1;
    for (int i = 0; i < d; i++) im->identity &= im->perm[i] == i;
    return VQ_STATUS_OK;
}

static vq_status kivi_init(struct vq_codec *c) {
    const struct vq_codec_params *p = &c->p;
    const int d = p->head_dim, bits = p->bits, g = p->group_size;
    if (bits < 2 || bits > 8) return VQ_STATUS_INVALID_ARG;
    if (g < 1 || g > 1024) return VQ_STATUS_INVALID_ARG;
    if (p->residual_length < 0 || p->residual_length % g != 0 || p->residual_length > (1 << 20))
        return VQ_STATUS_INVALID_ARG;
    if (p->role == VQ_ROLE_VALUE && d % g != 0) return VQ_STATUS_INVALID_ARG;
    if (p->method == VQ_METHOD_KIVI_SINK &&
        (p->n_sink_tokens < 0 || p->n_sink_tokens > VQ_KIVI_MAX_SINKS))
        return VQ_STATUS_INVALID_ARG;
    struct vq_kivi_impl *im = vq_alloc(sizeof *im);
    if (!im) return VQ_STATUS_NO_MEMORY;
    im->d = d;
    im->bits = bits;
    im->g = g;
    im->ng = p->role == VQ_ROLE_VALUE ? d / g : 0;
    im->rowb = vq_kivi_row_bytes(d, bits);
    if (kivi_classes(im, p->role == VQ_ROLE_KEY ? p->channel_bits : NULL) != VQ_STATUS_OK ||
        (p->channel_bits && p->role != VQ_ROLE_KEY)) {
        vq_free(im);
        return VQ_STATUS_INVALID_ARG;
    }
    if (p->channel_bits) c->p.channel_bits = im->chan_bits;
    im->fold = vq_kivi_fold_ref;
    im->dot_rows = vq_kivi_dot_rows_ref;
    im->dot_classes = vq_kivi_dot_classes_ref;
    im->dot_classes_multi = NULL;
    im->acc_vals = vq_kivi_acc_vals_ref;
#ifdef VQ_HAVE_X86
    if (c->isa == VQ_ISA_AVX512 && vq_cpu_avx512vbmi()) {
        im->fold = vq_kivi_fold_avx512vbmi;
        im->dot_rows = vq_kivi_dot_rows_avx512vbmi;
        im->dot_classes = vq_kivi_dot_classes_avx512vbmi;
        im->dot_classes_multi = vq_kivi_dot_classes_multi_avx512vbmi;
        im->acc_vals = vq_kivi_acc_vals_avx512vbmi;
    } else if (c->isa == VQ_ISA_AVX512) {
        im->fold = vq_kivi_fold_avx512;
        im->dot_rows = vq_kivi_dot_rows_avx512;
        im->dot_classes = vq_kivi_dot_classes_avx512;
        im->dot_classes_multi = vq_kivi_dot_classes_multi_avx512;
        im->acc_vals = vq_kivi_acc_vals_avx512;
    } else if (c->isa == VQ_ISA_AVX2) {
        im->fold = vq_kivi_fold_avx2;
        im->dot_rows = vq_kivi_dot_rows_avx2;
        im->dot_classes = vq_kivi_dot_classes_avx2;
        im->dot_classes_multi = vq_kivi_dot_classes_multi_avx2;
        im->acc_vals = vq_kivi_acc_vals_avx2;
    }
#endif
    c->impl = im;
    if (p->role == VQ_ROLE_KEY) {
        c->block_tokens = g;
        c->block_bytes = 4 * (size_t)d + (size_t)g * im->rowb;
        c->query_bytes = (size_t)d * sizeof(float);
        c->acc_floats = (size_t)d;
    } else {
        c->block_tokens = 1;
        c->block_bytes = 4 * (size_t)im->ng + im->rowb;
        c->query_bytes = (size_t)(d + im->ng) * sizeof(float);
        c->acc_floats = (size_t)(d + im->ng);
    }
    c->encode = kivi_encode;
    c->decode = kivi_decode;
    c->prepare_query = kivi_prepare_query;
    c->score = kivi_score;
    c->score_multi = p->role == VQ_ROLE_KEY && im->ncls > 1 && im->dot_classes_multi
                       ? kivi_score_multi
                       : NULL;
    c->accumulate = kivi_accumulate;
    c->finish = kivi_finish;
    return VQ_STATUS_OK;
}

static void kivi_destroy(struct vq_codec *c) {
    vq_free(c->impl);
    c->impl = NULL;
}

const struct vq_codec_i vq_codec_kivi = {
    .name = "kivi",
    .params_doc = "bits=2..8 group_size=G residual_length=R (multiple of G)",
    .bits_formula = "b + 32/G (+ 16-bit fp16 window of the newest tokens)",
    .needs_calibration = 0,
    .default_bits = 2,
    .min_bits = 2,
    .max_bits = 8,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_OUTLIER_TOKENS | VQ_METHOD_F_WINDOWED |
             VQ_METHOD_F_PER_CHANNEL_KEYS,
    .init = kivi_init,
    .destroy = kivi_destroy,
};

const struct vq_codec_i vq_codec_kivi_sink = {
    .name = "kivi_sink",
    .params_doc = "bits=2..8 group_size=G residual_length=R n_sink_tokens=0..64",
    .bits_formula = "b + 32/G (+ fp16 window and sink tokens)",
    .needs_calibration = 0,
    .default_bits = 2,
    .min_bits = 2,
    .max_bits = 8,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_WINDOWED | VQ_METHOD_F_SINKS |
             VQ_METHOD_F_PER_CHANNEL_KEYS,
    .init = kivi_init,
    .destroy = kivi_destroy,
};
