/*
 * polar.c — PolarQuant codec (arXiv 2502.02617, docs/ALGORITHMS.md §5): randomized Hadamard
 * precondition, then per block of 16 rotated coordinates a 4-level polar transform whose angles
 * are quantized with per-level codebooks and whose final radius is stored as vq_sf16.
 *
 * Math. y = R x (R = vq_rht(d, seed); x is not normalized). Block k holds y[16k .. 16k+15].
 *   level 1: r1_j = hypot(y_2j, y_2j+1), psi1_j = atan2(y_2j+1, y_2j) in [0, 2pi)  (j < 8)
 *   level l = 2..4: r_l,j = hypot(r_{l-1},2j, r_{l-1},2j+1),
 *                   psi_l,j = atan2(r_{l-1},2j+1, r_{l-1},2j) in [0, pi/2]        (j < 2^(4-l))
 *   radius = r_4,0 (the block norm).
 * Codebooks (vq_polar_codebook): level 1 uniform with b1 bits; levels >= 2 Lloyd-Max for the
 * sine-power law sin(2 psi)^(2^(l-1)-1) with b_l bits; bits from params.polar_bits
 * (default 4,2,2,2; an all-zero array means the default). params.bits is ignored.
 * Decode is top-down: a parent radius r with quantized angle psi splits into (r cos psi,
 * r sin psi) = (child 2j, child 2j+1); level 1 gives (y_2j, y_2j+1); then x^ = R^T y^.
 * Fused score (§5.4), no reconstruction: q_r = R q; per query table
 * T1[p][c] = q_r[2p] cos(c1[c]) + q_r[2p+1] sin(c1[c]) (d/2 x 2^b1 floats); per block
 * s1_j = T1[8k+j][code], then s_l,j = s_{l-1},2j cos(c_l[code]) + s_{l-1},2j+1 sin(c_l[code]),
 * score += radius * s_4,0. Values: the top-down tree of each token is evaluated in the rotated
 * domain, weighted by w_t, and added to acc; finish applies R^T once.
 *
 * Parameters: head_dim a multiple of 16 in 16..1024 (else UNSUPPORTED), polar_bits[0] in 1..6,
 * polar_bits[1..3] in 1..4, seed.
 *
 * Block layout (one token per block; nb = d/16 coordinate blocks,
 * B = 8 b1 + 4 b2 + 2 b3 + b4 bits per coordinate block,
 * block_bytes = 2 nb + ceil(nb B / 8)):
 *   offset 0, 2 nb bytes: radius of coordinate block k as vq_sf16, little-endian, at 2k
 *   offset 2 nb: one LSB-first little-endian bit stream; coordinate block k occupies bits
 *                [k B, (k+1) B) and holds, in order, the 8 level-1 codes (b1 bits each, j = 0..7),
 *                the 4 level-2 codes, the 2 level-3 codes, the level-4 code. A field of w bits
 *                at bit offset o has its least significant bit at bit (o % 8) of byte o / 8.
 *                Padding bits of the last byte are 0.
 * Bits/elem = (8 b1 + 4 b2 + 2 b3 + b4 + 16) / 16 (3.875 at 4,2,2,2) when nb B is a multiple of
 * 8 (always at the defaults for d % 64 == 0; otherwise up to 7 padding bits per token).
 *
 * Prepared query (query_bytes = 4 * ((d/2) * 2^b1 + d)): the table T1, row p = pair (2p, 2p+1),
 * then q_r itself (d floats; the multi-query kernels dot it with the decoded blocks).
 * Accumulator (acc_floats = d): sum_t w_t y^_t in the rotated domain, stored position-major:
 * coordinate 16 k + i of y^ at acc[i * (d/16) + k]; finish transposes back, then applies R^T.
 */
#include <math.h>
#include <string.h>

#include "codecs/polar.h"
#include "codecs/qjl.h" /* vq_sumsq_finite */

#define POLAR_TWO_PI 6.28318530717958647692
#define POLAR_HALF_PI 1.57079632679489661923
#define POLAR_GRID 20001
#define POLAR_MAX_D 1024

/* ============================== codebooks ================================================= */

/* Cumulative integral of f and x f at x by linear interpolation of the grid sums. */
static void polar_cum_at(const double *F, const double *M, double h, double x, double *fa,
                         double *ma) {
    if (x <= 0.0) {
        *fa = 0.0;
        *ma = 0.0;
        return;
    }
    if (x >= h * (POLAR_GRID - 1)) {
        *fa = F[POLAR_GRID - 1];
        *ma = M[POLAR_GRID - 1];
        return;
    }
    int k = (int)(x / h);
    if (k > POLAR_GRID - 2) k = POLAR_GRID - 2;
    const double fr = (x - k * h) / h;
    *fa = F[k] + fr * (F[k + 1] - F[k]);
    *ma = M[k] + fr * (M[k + 1] - M[k]);
}

vq_status vq_polar_codebook(int level, int bits, float *centroids, float *boundaries) {
    if (level < 1 || level > VQ_POLAR_LEVELS) return VQ_STATUS_INVALID_ARG;
    const int L = 1 << bits;
    if (level == 1) {
        if (bits < 1 || bits > VQ_POLAR_MAX_BITS1) return VQ_STATUS_INVALID_ARG;
        const double w = POLAR_TWO_PI / L;
        for (int i = 0; i < L; i++) centroids[i] = (float)((i + 0.5) * w);
        for (int i = 1; i < L; i++) boundaries[i - 1] = (float)(i * w);
        return VQ_STATUS_OK;
    }
    if (bits < 1 || bits > VQ_POLAR_MAX_BITSL) return VQ_STATUS_INVALID_ARG;
    double *F = (double *)vq_alloc(sizeof(double) * 2 * POLAR_GRID);
    if (!F) return VQ_STATUS_NO_MEMORY;
    double *M = F + POLAR_GRID;
    const int expo = (1 << (level - 1)) - 1;
    const double h = POLAR_HALF_PI / (POLAR_GRID - 1);
    double fprev = 0.0, xprev = 0.0;
    F[0] = M[0] = 0.0;
    for (int i = 0; i < POLAR_GRID; i++) {
        const double x = i * h;
        const double s = sin(2.0 * x);
        double f = 1.0;
        for (int e = 0; e < expo; e++) f *= s;
        if (f < 0.0) f = 0.0;
        if (i > 0) {
            F[i] = F[i - 1] + 0.5 * h * (fprev + f);
            M[i] = M[i - 1] + 0.5 * h * (xprev * fprev + x * f);
        }
        fprev = f;
        xprev = x;
    }
    const double Z = F[POLAR_GRID - 1];
    for (int i = 0; i < POLAR_GRID; i++) {
        F[i] /= Z;
        M[i] /= Z;
    }

    double c[16], t[16];
    for (int i = 0; i < L; i++) c[i] = POLAR_HALF_PI / 2 + (i - (L - 1) / 2.0) * 0.3 / L;
    for (int it = 0; it < 5000; it++) {
        for (int i = 0; i < L - 1; i++) t[i] = 0.5 * (c[i] + c[i + 1]);
        double delta = 0.0;
        for (int i = 0; i < L; i++) {
            double fa, ma, fb, mb;
            polar_cum_at(F, M, h, i == 0 ? -1.0 : t[i - 1], &fa, &ma);
            polar_cum_at(F, M, h, i == L - 1 ? 10.0 : t[i], &fb, &mb);
            const double nc = (fb - fa > 1e-300) ? (mb - ma) / (fb - fa) : c[i];
            delta = fmax(delta, fabs(nc - c[i]));
            c[i] = nc; /* Gauss-Seidel update: converges to the same fixed point */
        }
        if (delta < 1e-13) break;
    }
    vq_free(F);
    for (int i = 0; i < L; i++) centroids[i] = (float)c[i];
    for (int i = 0; i < L - 1; i++) boundaries[i] = (float)(0.5 * (c[i] + c[i + 1]));
    return VQ_STATUS_OK;
}

/* ============================== codec ===================================================== */


static inline float polar_radius(const uint8_t *s, size_t k) {
    return vq_sf16_to_fp32((uint16_t)(s[2 * k] | (s[2 * k + 1] << 8)));
}

/* ORs a field of w <= 8 bits at bit offset off (the stream is zeroed beforehand). */
static inline void polar_put(uint8_t *p, size_t off, int w, unsigned v) {
    const size_t i = off >> 3;
    const unsigned sh = (unsigned)(off & 7);
    p[i] = (uint8_t)(p[i] | ((v << sh) & 0xff));
    if (sh + (unsigned)w > 8) p[i + 1] = (uint8_t)(p[i + 1] | (v >> (8 - sh)));
}

/* Codes of coordinate block k: codes[0..7] level 1, [8..11] level 2, [12..13] level 3,
 * [14] level 4. The record (B + 7 <= 83 bits) is copied into two 64-bit words (bytes past the
 * end of the stream read as 0) and the fields are shifted out. */
static void polar_read_codes(const struct polar_impl *im, const uint8_t *ang, size_t k,
                             unsigned codes[15]) {
    const size_t off = k * (size_t)im->rec_bits;
    const size_t byte = off >> 3;
    uint8_t buf[16] = {0};
    const size_t avail = im->ang_bytes - byte;
    memcpy(buf, ang + byte, avail < 16 ? avail : 16);
    uint64_t lo, hi;
    memcpy(&lo, buf, 8);
    memcpy(&hi, buf + 8, 8);
    unsigned pos = (unsigned)(off & 7);
    int n = 0;
    for (int l = 0; l < VQ_POLAR_LEVELS; l++) {
        const unsigned w = (unsigned)im->b[l];
        const uint64_t mask = (1u << w) - 1u;
        for (int j = 0; j < (8 >> l); j++, n++) {
            uint64_t v;
            if (pos >= 64) v = hi >> (pos - 64);
            else if (pos + w <= 64) v = lo >> pos;
            else v = (lo >> pos) | (hi << (64 - pos));
            codes[n] = (unsigned)(v & mask);
            pos += w;
        }
    }
}

/* Top-down reconstruction of one coordinate block (16 values, rotated domain). */
static void polar_block_leaves(const struct polar_impl *im, const unsigned codes[15], float radius,
                               float *y) {
    float r[8], nr[8];
    r[0] = radius;
    int base = 14; /* first code index of the current level, walking down 4 -> 2 */
    for (int l = VQ_POLAR_LEVELS - 1; l >= 1; l--) {
        const int cnt = 8 >> l; /* angles at this level: 1, 2, 4 */
        for (int j = 0; j < cnt; j++) {
            const unsigned cd = codes[base + j];
            nr[2 * j] = r[j] * im->cs[l][cd];
            nr[2 * j + 1] = r[j] * im->sn[l][cd];
        }
        memcpy(r, nr, sizeof(float) * (size_t)(2 * cnt));
        base -= 2 * cnt;
    }
    for (int j = 0; j < 8; j++) {
        y[2 * j] = r[j] * im->cs[0][codes[j]];
        y[2 * j + 1] = r[j] * im->sn[0][codes[j]];
    }
}

/* Level-1 code floor(psi / w) of psi = atan2(b, a) in [0, 2pi), w = 2pi / 2^b1, without
 * atan2: the quadrant q comes from the signs (following atan2's conventions on the axes), the
 * point is rotated by -q pi/2 into [0, pi/2), and the Q - 1 in-quadrant boundaries j w
 * (Q = 2^b1 / 4) are compared by cross products: phi > t iff b' cos t > a' sin t. */
static inline unsigned polar_code1(const struct polar_impl *im, double a, double b) {
    /* branch-free (the quadrants are random): lower half plane psi >= pi first */
    const int lower = (b < 0.0) | ((b == 0.0) & (a < 0.0));
    const double sg = lower ? -1.0 : 1.0;
    const double a1 = a * sg, b1 = b * sg;     /* now psi1 = psi - lower pi in [0, pi) */
    const int left = (a1 <= 0.0) & (b1 > 0.0); /* psi1 in [pi/2, pi) */
    const double ar = left ? b1 : a1, br = left ? -a1 : b1;
    const unsigned q = (unsigned)(2 * lower + left);
    if (im->b[0] == 1) return q >> 1; /* cells [0, pi), [pi, 2pi) */
    const int nq = (int)(im->t1_cols / 4);
    unsigned cnt = 0;
    for (int j = 0; j < nq - 1; j++) cnt += br * im->bcos[0][j] > ar * im->bsin[0][j];
    return q * (unsigned)nq + cnt;
}

static vq_status polar_encode(const struct vq_codec *c, const float *x, int64_t n_blocks,
                              uint8_t *dst) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    const int d = im->d;
    float y[POLAR_MAX_D];
    for (int64_t t = 0; t < n_blocks; t++) {
        const float *xt = x + (size_t)t * (size_t)d;
        uint8_t *o = dst + (size_t)t * c->block_bytes;
        const double ss = vq_sumsq_finite(xt, d);
        if (ss < 0.0) return VQ_STATUS_NON_FINITE;
        /* every block radius is <= ||x||; checking it first also keeps the rotation finite */
        if (!(sqrt(ss) <= (double)VQ_SF16_MAX)) return VQ_STATUS_RANGE;
        vq_rht_forward(&im->rot, xt, y);
        memset(o, 0, c->block_bytes);
        uint8_t *ang = o + im->ang_off;
        for (int k = 0; k < im->nblk; k++) {
            const float *v = y + 16 * k;
            double r[8], nr[4];
            size_t off = (size_t)k * (size_t)im->rec_bits;
            for (int j = 0; j < 8; j++) {
                const double a = v[2 * j], bq = v[2 * j + 1];
                r[j] = sqrt(a * a + bq * bq);
                polar_put(ang, off, im->b[0], polar_code1(im, a, bq));
                off += (size_t)im->b[0];
            }
            for (int l = 1; l < VQ_POLAR_LEVELS; l++) {
                const int cnt = 8 >> l;
                const int nbnd = (1 << im->b[l]) - 1;
                for (int j = 0; j < cnt; j++) {
                    /* psi = atan2(r1, r0) in [0, pi/2] exceeds boundary t iff
                     * r1 cos t > r0 sin t (r0, r1 >= 0): no atan2 needed */
                    const double r0 = r[2 * j], r1 = r[2 * j + 1];
                    nr[j] = sqrt(r0 * r0 + r1 * r1);
                    unsigned cd = 0;
                    for (int i = 0; i < nbnd; i++) cd += r1 * im->bcos[l][i] > r0 * im->bsin[l][i];
                    polar_put(ang, off, im->b[l], cd);
                    off += (size_t)im->b[l];
                }
                memcpy(r, nr, sizeof(double) * (size_t)cnt);
            }
            const double radius = r[0];
            if (!(radius <= (double)VQ_SF16_MAX) || !vq_sf16_fits((float)radius))
                return VQ_STATUS_RANGE;
            const uint16_t h = vq_fp32_to_sf16((float)radius);
            o[2 * k] = (uint8_t)(h & 0xff);
            o[2 * k + 1] = (uint8_t)(h >> 8);
        }
    }
    return VQ_STATUS_OK;
}

static void polar_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    unsigned codes[15];
    for (int64_t t = 0; t < n_blocks; t++) {
        const uint8_t *s = src + (size_t)t * c->block_bytes;
        float *xt = x + (size_t)t * (size_t)im->d;
        for (int k = 0; k < im->nblk; k++) {
            polar_read_codes(im, s + im->ang_off, (size_t)k, codes);
            polar_block_leaves(im, codes, polar_radius(s, (size_t)k), xt + 16 * k);
        }
        vq_rht_inverse(&im->rot, xt, xt);
    }
}

static void polar_prepare_query(const struct vq_codec *c, const float *q, void *qs) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    float qr[POLAR_MAX_D];
    float *T1 = (float *)qs;
    const size_t L1 = im->t1_cols;
    vq_rht_forward(&im->rot, q, qr);
    for (int p = 0; p < im->d / 2; p++)
        for (size_t cd = 0; cd < L1; cd++)
            T1[(size_t)p * L1 + cd] = qr[2 * p] * im->cs[0][cd] + qr[2 * p + 1] * im->sn[0][cd];
    memcpy(T1 + (size_t)(im->d / 2) * L1, qr, sizeof(float) * (size_t)im->d);
}

/* The rotated query q_r inside a prepared query (after T1). */
static inline const float *polar_qr(const struct polar_impl *im, const void *qs) {
    return (const float *)qs + (size_t)(im->d / 2) * im->t1_cols;
}

/* Bottom-up score of one token against the level-1 table. */
static float polar_token_score(const struct polar_impl *im, const float *T1, const uint8_t *s) {
    const size_t L1 = im->t1_cols;
    unsigned codes[15];
    float total = 0.0f;
    for (int k = 0; k < im->nblk; k++) {
        polar_read_codes(im, s + im->ang_off, (size_t)k, codes);
        const float *tk = T1 + (size_t)k * 8 * L1;
        float v[8];
        for (int j = 0; j < 8; j++) v[j] = tk[(size_t)j * L1 + codes[j]];
        int base = 8;
        for (int l = 1; l < VQ_POLAR_LEVELS; l++) {
            const int cnt = 8 >> l;
            for (int j = 0; j < cnt; j++) {
                const unsigned cd = codes[base + j];
                v[j] = v[2 * j] * im->cs[l][cd] + v[2 * j + 1] * im->sn[l][cd];
            }
            base += cnt;
        }
        total += polar_radius(s, (size_t)k) * v[0];
    }
    return total;
}

static void polar_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                        int64_t n_tokens, float *scores) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    if (im->score_multi) {
        const float *qr = polar_qr(im, qs);
        im->score_multi(im, &qr, 1, codes, c->block_bytes, n_tokens, &scores);
        return;
    }
    int64_t t = 0;
    if (im->score_rows && n_tokens > 1) {
        /* SIMD kernels over-read up to 8 bytes past a record: keep the last token scalar */
        im->score_rows(im, (const float *)qs, codes, c->block_bytes, n_tokens - 1, scores);
        t = n_tokens - 1;
    }
    for (; t < n_tokens; t++)
        scores[t] = polar_token_score(im, (const float *)qs, codes + (size_t)t * c->block_bytes);
}

/* Accumulator layout: position i (0..15) of coordinate block k is acc[i * nblk + k] (blocks
 * contiguous per position, so SIMD kernels add 8 or 16 blocks with one load/store). */
static void polar_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                             const float *w, float *acc) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    const int nblk = im->nblk;
    unsigned cd[15];
    float leaves[16];
    if (im->acc_multi) {
        im->acc_multi(im, codes, c->block_bytes, n_tokens, &w, 1, &acc);
        return;
    }
    int64_t t = 0;
    if (im->acc_rows && n_tokens > 1) {
        /* SIMD kernels over-read up to 8 bytes past a record: keep the last token scalar */
        im->acc_rows(im, codes, c->block_bytes, n_tokens - 1, w, acc);
        t = n_tokens - 1;
    }
    for (; t < n_tokens; t++) {
        if (w[t] == 0.0f) continue;
        const uint8_t *s = codes + (size_t)t * c->block_bytes;
        for (int k = 0; k < nblk; k++) {
            const float r = w[t] * polar_radius(s, (size_t)k);
            if (r == 0.0f) continue;
            polar_read_codes(im, s + im->ang_off, (size_t)k, cd);
            polar_block_leaves(im, cd, r, leaves);
            for (int i = 0; i < 16; i++) acc[i * nblk + k] += leaves[i];
        }
    }
}

/* Multi-query slots (set only with the multi-query kernels): one pass over the codes for nq
 * queries, each the same bits as polar_score / polar_accumulate alone. */
static void polar_score_multi(const struct vq_codec *c, const void *const *qs, int nq,
                              const uint8_t *codes, int64_t n_tokens, float *const *scores) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    const float *qr[4];
    for (int j = 0; j < nq; j++) qr[j] = polar_qr(im, qs[j]);
    im->score_multi(im, qr, nq, codes, c->block_bytes, n_tokens, scores);
}

static void polar_accumulate_multi(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                                   const float *const *w, int nq, float *const *acc) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    im->acc_multi(im, codes, c->block_bytes, n_tokens, w, nq, acc);
}

static void polar_finish(const struct vq_codec *c, const float *acc, float *out) {
    const struct polar_impl *im = (const struct polar_impl *)c->impl;
    for (int k = 0; k < im->nblk; k++)
        for (int i = 0; i < 16; i++) out[16 * k + i] = acc[i * im->nblk + k];
    vq_rht_inverse(&im->rot, out, out);
}

static void polar_destroy(struct vq_codec *c) {
    struct polar_impl *im = (struct polar_impl *)c->impl;
    if (!im) return;
    vq_rht_free(&im->rot);
    vq_free(im);
    c->impl = NULL;
}

#if defined(VQ_HAVE_X86)
/* The multi-query kernels' tables (struct polar_impl, polar.h), from the level widths. */
static void polar_vb_tables(struct polar_impl *im) {
    int pos[15], f = 0, p = 0;
    for (int l = 0; l < VQ_POLAR_LEVELS; l++)
        for (int j = 0; j < (8 >> l); j++, f++) {
            pos[f] = p;
            p += im->b[l];
        }
    for (int j = 0; j < 16; j++) {
        const int fl[VQ_POLAR_LEVELS] = {j >> 1, 8 + (j >> 2), 12 + (j >> 3), 14};
        for (int l = 0; l < VQ_POLAR_LEVELS; l++) {
            for (int s = 0; s < 8; s++) im->vb_ctrl[s][4 * j + l] = (uint8_t)(pos[fl[l]] + s);
            im->vb_mask[4 * j + l] = (uint8_t)((1 << im->b[l]) - 1);
            im->vb_sinb[4 * j + l] = (uint8_t)(((j >> l) & 1) << 4);
        }
    }
    for (int k = 0; k < im->nblk; k++) {
        im->vb_bo[k] = k * im->rec_bits >> 3;
        im->vb_sh[k] = k * im->rec_bits & 7;
    }
}
#endif

static vq_status polar_init(struct vq_codec *c) {
    static const int def_bits[VQ_POLAR_LEVELS] = {4, 2, 2, 2};
    const int d = c->p.head_dim;
    if (d < 8 || d > POLAR_MAX_D || d % 8 != 0) return VQ_STATUS_INVALID_ARG;
    if (d % VQ_POLAR_BLOCK != 0) return VQ_STATUS_UNSUPPORTED; /* needs whole 16-blocks */
    int allzero = 1;
    for (int l = 0; l < VQ_POLAR_LEVELS; l++) allzero &= c->p.polar_bits[l] == 0;
    if (allzero) memcpy(c->p.polar_bits, def_bits, sizeof(def_bits));
    if (c->p.polar_bits[0] < 1 || c->p.polar_bits[0] > VQ_POLAR_MAX_BITS1)
        return VQ_STATUS_INVALID_ARG;
    for (int l = 1; l < VQ_POLAR_LEVELS; l++)
        if (c->p.polar_bits[l] < 1 || c->p.polar_bits[l] > VQ_POLAR_MAX_BITSL)
            return VQ_STATUS_INVALID_ARG;
    if (c->isa == VQ_ISA_AUTO) c->isa = vq_isa_resolve(c->p.isa);

    struct polar_impl *im = (struct polar_impl *)vq_alloc(sizeof(*im));
    if (!im) return VQ_STATUS_NO_MEMORY;
    im->d = d;
    im->nblk = d / VQ_POLAR_BLOCK;
    im->rec_bits = 0;
    for (int l = 0; l < VQ_POLAR_LEVELS; l++) {
        im->b[l] = c->p.polar_bits[l];
        im->rec_bits += (8 >> l) * im->b[l];
        float cent[1 << VQ_POLAR_MAX_BITS1], bnd[1 << VQ_POLAR_MAX_BITS1];
        vq_status st = vq_polar_codebook(l + 1, im->b[l], cent, bnd);
        if (st != VQ_STATUS_OK) {
            vq_free(im);
            return st;
        }
        for (int i = 0; i < (1 << im->b[l]); i++) {
            im->cs[l][i] = (float)cos((double)cent[i]);
            im->sn[l][i] = (float)sin((double)cent[i]);
        }
        if (l > 0) {
            for (int i = 0; i < (1 << im->b[l]) - 1; i++) {
                im->bcos[l][i] = cos((double)bnd[i]);
                im->bsin[l][i] = sin((double)bnd[i]);
            }
        }
    }
    im->t1_cols = (size_t)1 << im->b[0];
    for (size_t j = 1; j < im->t1_cols / 4; j++) { /* in-quadrant level-1 boundaries */
        const double tb = (double)j * POLAR_TWO_PI / (double)im->t1_cols;
        im->bcos[0][j - 1] = cos(tb);
        im->bsin[0][j - 1] = sin(tb);
    }
    im->ang_off = 2 * (size_t)im->nblk;
    im->ang_bytes = ((size_t)im->nblk * (size_t)im->rec_bits + 7) / 8;
    im->score_rows = NULL;
    im->acc_rows = NULL;
    im->score_multi = NULL;
    im->acc_multi = NULL;
#if defined(VQ_HAVE_X86)
    int small = 1; /* every level's codes fit the 16-entry tables of the multi-query kernels */
    for (int l = 0; l < VQ_POLAR_LEVELS; l++) small &= im->b[l] <= 4;
    if (c->isa == VQ_ISA_AVX512 && vq_cpu_avx512vbmi() && small && im->rec_bits + 7 <= 64) {
        im->score_multi = vq_polar_score_multi_avx512vbmi;
        im->acc_multi = vq_polar_acc_multi_avx512vbmi;
        polar_vb_tables(im);
    }
    if (c->isa == VQ_ISA_AVX512 && im->rec_bits + 7 <= 64) {
        im->score_rows = vq_polar_score_avx512;
        im->acc_rows = vq_polar_acc_avx512;
    } else if (c->isa == VQ_ISA_AVX2 && im->rec_bits + 7 <= 64) {
        im->score_rows = vq_polar_score_avx2;
        im->acc_rows = vq_polar_acc_avx2;
    }
#endif
    vq_status st = vq_rht_init(&im->rot, d, c->p.seed);
    if (st != VQ_STATUS_OK) {
        vq_free(im);
        return st;
    }
    c->impl = im;
    c->block_tokens = 1;
    c->block_bytes = im->ang_off + im->ang_bytes;
    c->query_bytes = sizeof(float) * ((size_t)(d / 2) * im->t1_cols + (size_t)d);
    c->acc_floats = (size_t)d;
    c->encode = polar_encode;
    c->decode = polar_decode;
    c->prepare_query = polar_prepare_query;
    c->score = polar_score;
    c->accumulate = polar_accumulate;
    c->finish = polar_finish;
    if (im->score_multi) {
        c->score_multi = polar_score_multi;
        c->accumulate_multi = polar_accumulate_multi;
    }
    return VQ_STATUS_OK;
}

/* Registry entry (see codec.c). */
const struct vq_codec_i vq_codec_polar = {
    .name = "polar",
    .params_doc =
        "polar_bits=b1,b2,b3,b4 (level 1: 1..6, levels 2-4: 1..4; default 4,2,2,2); "
        "head_dim multiple of 16",
    .bits_formula = "(8 b1 + 4 b2 + 2 b3 + b4 + 16) / 16",
    .needs_calibration = 0,
    .default_bits = 4,
    .min_bits = 4,
    .max_bits = 4,
    .flags = VQ_METHOD_F_QUANTIZED | VQ_METHOD_F_OUTLIER_TOKENS | VQ_METHOD_F_OUTLIER_CHANNELS,
    .init = polar_init,
    .destroy = polar_destroy,
};
