/*
 * polar.h — internal helpers of the PolarQuant codec (polar.c), exposed for tests.
 * Not part of the public API.
 */
#ifndef VQ_CODECS_POLAR_H
#define VQ_CODECS_POLAR_H

#include "codecs/codec_impl.h"

#define VQ_POLAR_LEVELS 4 /* L: blocks of 2^L = 16 coordinates */
#define VQ_POLAR_BLOCK 16
#define VQ_POLAR_MAX_BITS1 6 /* level-1 (uniform angle) bits 1..6 */
#define VQ_POLAR_MAX_BITSL 4 /* level >= 2 (Lloyd-Max angle) bits 1..4 */

/* Angle codebook of level `level` (1..4) with `bits` bits, in radians.
 * Level 1: uniform on [0, 2pi): centroids (i + 1/2) 2pi / 2^bits, boundaries i 2pi / 2^bits
 * (i = 1..2^bits-1). Level l >= 2: Lloyd-Max for the density proportional to
 * sin(2 psi)^(2^(l-1) - 1) on [0, pi/2], computed by grid integration (20001 points,
 * cumulative trapezoid, linear interpolation; iterated to 1e-13). centroids gets 2^bits
 * values (ascending), boundaries 2^bits - 1. Returns INVALID_ARG for out-of-range level/bits,
 * NO_MEMORY if the grid cannot be allocated. Thread-safe (no shared state). */
vq_status vq_polar_codebook(int level, int bits, float *centroids, float *boundaries);

struct polar_impl;
/* scores[t] = fused score of tokens t < n against the level-1 table T1 (prepared query), for
 * tokens at codes + t * bb. SIMD variants read each coordinate block's record with one
 * 8-byte load, so the caller passes only tokens that are followed by at least 8 more bytes of
 * the same buffer (all but the last token) and only when B + 7 <= 64 bits. */
typedef void (*vq_polar_score_fn)(const struct polar_impl *im, const float *T1,
                                  const uint8_t *codes, size_t bb, int64_t n, float *scores);
/* acc[i * nblk + k] += w[t] * (leaf i of coordinate block k of token t) for t < n; same
 * over-read rule as vq_polar_score_fn. */
typedef void (*vq_polar_acc_fn)(const struct polar_impl *im, const uint8_t *codes, size_t bb,
                                int64_t n, const float *w, float *acc);
/* Several queries at once (nq 1..4), every token of the call (no over-read rule): scores[j][t]
 * = q_r[j] . y_t with q_r[j] the rotated query (d floats, natural order); acc[j] as
 * vq_polar_acc_fn with w[j]. Each query's results do not depend on nq or on the other queries.
 * Requires every level's bits <= 4 and B + 7 <= 64. */
typedef void (*vq_polar_score_multi_fn)(const struct polar_impl *im, const float *const *qr, int nq,
                                        const uint8_t *codes, size_t bb, int64_t n,
                                        float *const *scores);
typedef void (*vq_polar_acc_multi_fn)(const struct polar_impl *im, const uint8_t *codes, size_t bb,
                                      int64_t n, const float *const *w, int nq, float *const *acc);
#if defined(VQ_HAVE_X86)
void vq_polar_score_multi_avx512vbmi(const struct polar_impl *im, const float *const *qr, int nq,
                                     const uint8_t *codes, size_t bb, int64_t n,
                                     float *const *scores);
void vq_polar_acc_multi_avx512vbmi(const struct polar_impl *im, const uint8_t *codes, size_t bb,
                                   int64_t n, const float *const *w, int nq, float *const *acc);
void vq_polar_score_avx512(const struct polar_impl *im, const float *T1, const uint8_t *codes,
                           size_t bb, int64_t n, float *scores);
void vq_polar_acc_avx512(const struct polar_impl *im, const uint8_t *codes, size_t bb, int64_t n,
                         const float *w, float *acc);
void vq_polar_score_avx2(const struct polar_impl *im, const float *T1, const uint8_t *codes,
                         size_t bb, int64_t n, float *scores);
void vq_polar_acc_avx2(const struct polar_impl *im, const uint8_t *codes, size_t bb, int64_t n,
                       const float *w, float *acc);
#endif

/* Codec state (immutable after init). */
struct polar_impl {
    int d, nblk;
    int b[VQ_POLAR_LEVELS]; /* bits per level (index 0 = level 1) */
    int rec_bits;           /* B = 8 b1 + 4 b2 + 2 b3 + b4 */
    size_t ang_off;         /* 2 nblk: byte offset of the angle bit stream */
    size_t ang_bytes;       /* ceil(nblk B / 8) */
    size_t t1_cols;         /* 2^b1 */
    /* cos / sin of the centroids: [0] level 1 (2^b1 entries), [l] level l+1 (2^b_l entries,
     * zero-padded to 16) */
    float cs[VQ_POLAR_LEVELS][1 << VQ_POLAR_MAX_BITS1];
    float sn[VQ_POLAR_LEVELS][1 << VQ_POLAR_MAX_BITS1];
    /* cos / sin of cell boundaries (encode compares without atan2): [0] the in-quadrant
     * level-1 boundaries j 2pi / 2^b1, j = 1 .. 2^b1/4 - 1; [l] the boundaries of level l+1 */
    double bcos[VQ_POLAR_LEVELS][1 << VQ_POLAR_MAX_BITSL];
    double bsin[VQ_POLAR_LEVELS][1 << VQ_POLAR_MAX_BITSL];
    vq_rht rot;
    vq_polar_score_fn score_rows;        /* SIMD score of whole tokens, or NULL (scalar only) */
    vq_polar_acc_fn acc_rows;            /* SIMD accumulate of whole tokens, or NULL */
    vq_polar_score_multi_fn score_multi; /* multi-query SIMD kernels (AVX-512 VBMI), or NULL; */
    vq_polar_acc_multi_fn acc_multi;     /* they take precedence over the *_rows kernels */
    /* their tables (polar.c polar_vb_tables): for lane j (16 per block) byte 4j + l - 1 of
     * vb_ctrl[s] is the bit position + s of the level-l code over j (s: the record's bit phase in
     * its first byte), vb_mask the code masks, vb_sinb bit 4 where j takes sin at level l;
     * vb_bo[k] / vb_sh[k] the byte offset / bit phase of block k's record in the stream */
    uint8_t vb_ctrl[8][64], vb_mask[64], vb_sinb[64];
    int vb_bo[64], vb_sh[64];
};

#endif
