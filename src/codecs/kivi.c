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
 *   [4d, 4d + G*d*b/8) the codes in tiles of 16 tokens (the last tile: G mod 16 tokens when
 *                      G % 16 != 0), tile after tile
 *   block_bytes = 4d + G*d*b/8; bits/elem = b + 32/G.
 * Tile of m tokens (m*d*b/8 bytes): the bit planes of b (as in a code row: 2, 4, 8 one plane;
 * 3 = 2+1, 5 = 4+1, 6 = 4+2, 7 = 4+2+1, low bits first), one after another, a plane of width
 * w taking m*d*w/8 bytes; each plane an LSB-first stream of the tile's m*d fields in the order
 * (channel pair p, token t, channel 2p + e): field index 2mp + 2t + e. So for a full tile the
 * two codes of one token and pair are 2w adjacent bits at bit 32pw + 4tw: a 16-token tile's
 * pair widens to sixteen 32-bit lanes (token t: channel 2p in the low 16 bits, 2p + 1 in the
 * high) with one small load (w = 4: VPMOVZXBD, 8: VPMOVZXBW, 2: a dword per lane and a shift,
 * 1: a 32-bit lane mask), and scores with one VPMADDWD / VPDPWSSD per pair and query.
 * Keys with per-channel widths (params.channel_bits, docs/ALGORITHMS.md §8.8): the channels
 * are ordered by width class (decreasing width, ascending channel within a class; "position"
 * i holds channel perm[i]); ŝ and ẑ are stored in position order, and each class stores its
 * own ceil(G/16) tiles (n_k channels at b_k bits, layout above with d = n_k) one class after
 * the other, widest first. Σ n_k b_k = d*b, so block_bytes and bits/elem are those of b;
 * without channel_bits this is exactly the layout above (one class, identity order).
 * Value block (role VALUE, per-token groups of G channels; block_tokens = 1), ng = d/G:
 *   [0, 2ng)           ŝ_h, sf16, group h = 0..ng-1 (channels hG .. hG+G-1)
 *   [2ng, 4ng)         ẑ_h, sf16
 *   [4ng, 4ng + rowb)  the token's code row
 *   block_bytes = 4d/G + d*b/8; bits/elem = b + 32/G.
 *
 * Fused paths (§7.3): keys score a block with the scale-folded query q'_c = q_c ŝ_c and the
 * bias β = Σ_c q_c ẑ_c: score_t = β + Σ_c q'_c code_{t,c}, computed per width class k in
 * integers: q' quantized to int16 per class (qi = rint(q' / Δ_k), Δ_k = max |q'| / qmax_k,
 * vq_kivi_qmax keeps the int32 sums exact), score_t = β + Σ_k Δ_k Σ_{c in k} qi_c code_{t,c}
 * (relative error of a term ~ 2^-16 of the class's largest, far below the key's own rounding).
 * Values accumulate in acc (d + ng floats): acc[c] += (w ŝ_h) code_c, acc[d + h] += w ẑ_h;
 * finish adds the bias.
 * Key-role accumulate and value-role score (not used by the cache) are exact but scalar.
 */
#include <float.h>
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

void vq_kivi_pack_tile(const uint8_t *codes, size_t stride, int m, int n, int bits, uint8_t *tile) {
    int w[3];
    const int np = row_planes(bits, w);
    uint8_t f[VQ_KIVI_TILE * 1024], part[VQ_KIVI_TILE * 1024];
    for (int p = 0; p < n / 2; p++)
        for (int t = 0; t < m; t++)
            for (int e = 0; e < 2; e++)
                f[2 * m * p + 2 * t + e] = codes[(size_t)t * stride + 2 * p + e];
    for (int i = 0, sh = 0; i < np; sh += w[i], i++) {
        for (int k = 0; k < m * n; k++) part[k] = (uint8_t)(f[k] >> sh);
        vq_pack(part, (int64_t)m * n, w[i], tile);
        tile += vq_kivi_tile_bytes(m, n, w[i]);
    }
}

void vq_kivi_unpack_tile(const uint8_t *tile, int m, int n, int bits, uint8_t *codes,
                         size_t stride) {
    int w[3];
    const int np = row_planes(bits, w);
    uint8_t f[VQ_KIVI_TILE * 1024], part[VQ_KIVI_TILE * 1024];
    memset(f, 0, (size_t)m * (size_t)n);
    for (int i = 0, sh = 0; i < np; sh += w[i], i++) {
        vq_unpack(tile, (int64_t)m * n, w[i], part);
        for (int k = 0; k < m * n; k++) f[k] = (uint8_t)(f[k] | part[k] << sh);
        tile += vq_kivi_tile_bytes(m, n, w[i]);
    }
    for (int p = 0; p < n / 2; p++)
        for (int t = 0; t < m; t++)
            for (int e = 0; e < 2; e++)
                codes[(size_t)t * stride + 2 * p + e] = f[2 * m * p + 2 * t + e];
}

float vq_kivi_quant16_ref(const float *qp, int n, int qmax, int16_t *qi) {
    float mx = 0.0f;
    int bad = 0;
    for (int c = 0; c < n; c++) {
        const float a = fabsf(qp[c]);
        bad |= !(a <= FLT_MAX);
        mx = a > mx ? a : mx;
    }
    if (bad || mx == 0.0f) {
        memset(qi, 0, (size_t)n * sizeof *qi);
        return bad ? NAN : 0.0f;
    }
    const float inv = (float)qmax / mx;
    for (int c = 0; c < n; c++) qi[c] = (int16_t)lrintf(qp[c] * inv);
    return mx / (float)qmax;
}

void vq_kivi_prep_ref(const float *const *q, int nq, const uint8_t *s16, const uint8_t *z16, int d,
                      int ncls, const int *nch, const int *qmax, int16_t *const *qi,
                      float *const *delta, float *bias) {
    float qp[1024];
    for (int j = 0; j < nq; j++) {
        bias[j] = vq_kivi_fold_ref(q[j], s16, z16, d, qp);
        for (int k = 0, c0 = 0; k < ncls; c0 += nch[k], k++)
            delta[j][k] = vq_kivi_quant16_ref(qp + c0, nch[k], qmax[k], qi[j] + c0);
    }
}

void vq_kivi_score_tile_ref(const int16_t *const *qi, const float *const *delta, int nq,
                            const uint8_t *area, int ncls, const int *bits, const int *nch,
                            const size_t *off, int g, int i, const float *bias, float *const *out) {
    const int t0 = i * VQ_KIVI_TILE, m = g - t0 < VQ_KIVI_TILE ? g - t0 : VQ_KIVI_TILE;
    uint8_t codes[VQ_KIVI_TILE * 1024];
    for (int j = 0; j < nq; j++)
        for (int t = 0; t < m; t++) out[j][t0 + t] = bias[j];
    for (int k = 0, c0 = 0; k < ncls; c0 += nch[k], k++) {
        const int n = nch[k];
        vq_kivi_unpack_tile(
            area + off[k] + (size_t)i * vq_kivi_tile_bytes(VQ_KIVI_TILE, n, bits[k]), m, n, bits[k],
            codes, (size_t)n);
        for (int j = 0; j < nq; j++)
            for (int t = 0; t < m; t++) {
                int32_t sum = 0;
                for (int c = 0; c < n; c++) sum += (int32_t)qi[j][c0 + c] * codes[t * n + c];
                const float p = delta[j][k] * (float)sum;
                out[j][t0 + t] += p;
            }
    }
}

void vq_kivi_score_tiles_ref(const int16_t *const *qi, const float *const *delta, int nq,
                             const uint8_t *area, int ncls, const int *bits, const int *nch,
                             const size_t *off, int g, const float *bias, float *const *out,
                             const uint8_t *pf, size_t pf_bytes) {
    (void)pf, (void)pf_bytes;
    for (int i = 0; i * VQ_KIVI_TILE < g; i++)
        vq_kivi_score_tile_ref(qi, delta, nq, area, ncls, bits, nch, off, g, i, bias, out);
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
 * cls_c0[k] + cls_n[k] - 1 (perm maps a position to its channel); its tiles (cls_tile[k] bytes
 * each when full) start cls_off[k] bytes after the block's scales and zeros. */
#define KIVI_MAX_CLS 8

struct vq_kivi_impl {
    int d, bits, g, ng; /* ng = d / g for values, 0 for keys */
    size_t rowb;
    int ncls, identity; /* identity: perm[i] = i */
    int ncz;            /* classes with codes: ncls, or ncls - 1 when the last is 0-bit */
    int cls_bits[KIVI_MAX_CLS], cls_n[KIVI_MAX_CLS], cls_c0[KIVI_MAX_CLS];
    int cls_qmax[KIVI_MAX_CLS]; /* vq_kivi_qmax of the class */
    size_t cls_tile[KIVI_MAX_CLS], cls_off[KIVI_MAX_CLS];
    uint16_t perm[1024];
    uint8_t cbits[1024]; /* width of each permuted position; the caller's table: chan_bits */
    uint8_t chan_bits[1024];
    vq_kivi_prep_fn prep;
    vq_kivi_score_tiles_fn score_tiles;
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
        uint8_t tc[VQ_KIVI_TILE * 1024];
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
            uint8_t *area = blk + 4 * (size_t)d;
            for (int t0 = 0; t0 < g; t0 += VQ_KIVI_TILE) {
                const int m = g - t0 < VQ_KIVI_TILE ? g - t0 : VQ_KIVI_TILE;
                for (int t = 0; t < m; t++) {
                    const float *xr = xb + (int64_t)(t0 + t) * d;
                    for (int i = 0; i < d; i++)
                        tc[t * d + i] = quant1(xr[im->perm[i]], zh[i], dv[i], qm[i]);
                }
                for (int k = 0; k < im->ncz; k++)
                    vq_kivi_pack_tile(
                        tc + im->cls_c0[k], (size_t)d, m, im->cls_n[k], im->cls_bits[k],
                        area + im->cls_off[k] + (size_t)(t0 / VQ_KIVI_TILE) * im->cls_tile[k]);
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

/* The codes of tile i of a key block (m tokens), position order: codes[t * d + pos]. */
static void tile_codes(const struct vq_kivi_impl *im, const uint8_t *blk, int i, int m,
                       uint8_t *codes) {
    const uint8_t *area = blk + 4 * (size_t)im->d;
    for (int k = 0; k < im->ncz; k++)
        vq_kivi_unpack_tile(area + im->cls_off[k] + (size_t)i * im->cls_tile[k], m, im->cls_n[k],
                            im->cls_bits[k], codes + im->cls_c0[k], (size_t)im->d);
    if (im->ncz < im->ncls) /* the 0-bit class: code 0 (its scale is 0) */
        for (int t = 0; t < m; t++)
            memset(codes + (size_t)t * im->d + im->cls_c0[im->ncz], 0, (size_t)im->cls_n[im->ncz]);
}

static void kivi_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, bits = im->bits, g = im->g;
    uint8_t codes[1024];
    if (c->p.role == VQ_ROLE_KEY) {
        uint8_t tc[VQ_KIVI_TILE * 1024];
        float sf[1024], zf[1024]; /* the block's scales and zeros, converted once per block */
        for (int64_t b = 0; b < n_blocks; b++) {
            const uint8_t *blk = src + (size_t)b * c->block_bytes;
            for (int i = 0; i < d; i++) {
                sf[i] = vq_sf16_to_fp32(rd16(blk + 2 * i));
                zf[i] = vq_sf16_to_fp32(rd16(blk + 2 * d + 2 * i));
            }
            for (int t0 = 0; t0 < g; t0 += VQ_KIVI_TILE) {
                const int m = g - t0 < VQ_KIVI_TILE ? g - t0 : VQ_KIVI_TILE;
                tile_codes(im, blk, t0 / VQ_KIVI_TILE, m, tc);
                for (int t = 0; t < m; t++) {
                    float *xr = x + (b * g + t0 + t) * d;
                    for (int i = 0; i < d; i++)
                        xr[im->perm[i]] = (float)tc[t * d + i] * sf[i] + zf[i];
                }
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

/* Keys, up to VQ_KIVI_MAX_Q queries: per block the integer queries (prep: each query folded
 * with the block's scales and quantized per width class), then one score_tiles pass over the tiles
 * (the codes unpacked once for all queries), which prefetches the next block as it goes. */
static void kivi_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                             const uint8_t *codes, int64_t n_tokens, float *const *scores) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, g = im->g;
    float bias[VQ_KIVI_MAX_Q], dl[VQ_KIVI_MAX_Q][KIVI_MAX_CLS], *out[VQ_KIVI_MAX_Q];
    int16_t qb[VQ_KIVI_MAX_Q][1024];
    int16_t *qw[VQ_KIVI_MAX_Q];
    const int16_t *qi[VQ_KIVI_MAX_Q];
    float *dw[VQ_KIVI_MAX_Q];
    const float *dp[VQ_KIVI_MAX_Q], *q[VQ_KIVI_MAX_Q];
    for (int j = 0; j < nq; j++) {
        q[j] = qs[j];
        qw[j] = qb[j];
        qi[j] = qb[j];
        dw[j] = dl[j];
        dp[j] = dl[j];
    }
    const int64_t nb = n_tokens / g;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = codes + (size_t)b * c->block_bytes;
        im->prep(q, nq, blk, blk + 2 * d, d, im->ncz, im->cls_n, im->cls_qmax, qw, dw, bias);
        for (int j = 0; j < nq; j++) out[j] = scores[j] + b * g;
        im->score_tiles(qi, dp, nq, blk + 4 * (size_t)d, im->ncz, im->cls_bits, im->cls_n,
                        im->cls_off, g, bias, out, b + 1 < nb ? blk + c->block_bytes : NULL,
                        c->block_bytes);
    }
}

static void kivi_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores) {
    const struct vq_kivi_impl *im = c->impl;
    const int d = im->d, g = im->g;
    const float *q = qs;
    if (c->p.role == VQ_ROLE_KEY) {
        const void *q1[1] = {qs};
        float *s1[1] = {scores};
        kivi_score_multi(c, q1, 1, codes, n_tokens, s1);
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
        uint8_t cd[VQ_KIVI_TILE * 1024];
        float tmp[1024];
        for (int64_t b = 0; b < n_tokens / g; b++) {
            const uint8_t *blk = codes + (size_t)b * c->block_bytes;
            float wsum = 0;
            memset(tmp, 0, (size_t)d * sizeof(float));
            for (int t0 = 0; t0 < g; t0 += VQ_KIVI_TILE) {
                const int m = g - t0 < VQ_KIVI_TILE ? g - t0 : VQ_KIVI_TILE;
                tile_codes(im, blk, t0 / VQ_KIVI_TILE, m, cd);
                for (int t = 0; t < m; t++) {
                    const float wt = w[b * g + t0 + t];
                    if (wt == 0.0f) continue;
                    wsum += wt;
                    for (int i = 0; i < d; i++) tmp[i] += wt * (float)cd[t * d + i];
                }
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
        im->cls_qmax[k] = b ? vq_kivi_qmax(n_at[b], b) : 0;
        im->cls_tile[k] = vq_kivi_tile_bytes(VQ_KIVI_TILE, n_at[b], b);
        im->cls_off[k] = off;
        off += vq_kivi_tile_bytes(im->g, n_at[b], b);
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
    im->prep = vq_kivi_prep_ref;
    im->score_tiles = vq_kivi_score_tiles_ref;
    im->acc_vals = vq_kivi_acc_vals_ref;
#ifdef VQ_HAVE_X86
    if (c->isa == VQ_ISA_AVX512) {
        const int vb = vq_cpu_avx512vbmi();
        im->acc_vals = vb ? vq_kivi_acc_vals_avx512vbmi : vq_kivi_acc_vals_avx512;
        im->prep = vb ? vq_kivi_prep_avx512vbmi : vq_kivi_prep_avx512;
        im->score_tiles = vq_cpu_avx512vnni() ? vq_kivi_score_tiles_avx512vnni
                                              : vq_kivi_score_tiles_avx512;
    } else if (c->isa == VQ_ISA_AVX2) {
        im->prep = vq_kivi_prep_avx2;
        im->score_tiles = vq_kivi_score_tiles_avx2;
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
    c->score_multi = p->role == VQ_ROLE_KEY ? kivi_score_multi : NULL;
    c->multi_max = VQ_KIVI_MAX_Q;
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
