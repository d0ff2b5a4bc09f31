/*
 * turboquant_kernels.h — the fused score / accumulate kernels shared by turboquant_mse and
 * turboquant_rvq (scalar reference + AVX2 + AVX-512), and the layout they work on.
 *
 * A record (one token) is: [sf16 scale, 2 bytes LE][plane A][plane B (optional)].
 * Plane A holds bits_a (1, 2 or 4) bits per coordinate, plane B bits_b (0, 1 or 2); coordinate
 * j has its code at bit offset j*bits of its plane's LSB-first bit stream. The level of
 * coordinate j is lut[a_j | b_j << bits_a]; the token's vector in the rotated domain is
 * scale * level. (turboquant_mse b=3: A = low 2 bits, B = high bit; turboquant_rvq stores
 * its two stages as one plane of combined 2b-bit codes, so it has bits_b = 0. The two-plane
 * combinations 1+1 and 2+2 are kept general and tested, but no codec uses them now.)
 *
 * Accumulator (and, in LUT score mode, the prepared query) use the "chunk-interleaved rotated
 * domain": coordinates are
 * cut into chunks of 128; within chunk c, float position c*128 + k*16 + l holds rotated
 * coordinate 128c + 8l + k (k = 0..7, l = 0..15). Lane l of a 16-lane vector then reads the
 * 8 consecutive codes 128c+8l .. +7 from bits_a consecutive bytes, and shift k picks code k:
 * no shuffles are needed to match codes with query coordinates. Positions of coordinates
 * >= d (padding up to dpad) are zero in the query; in the accumulator they are ignored.
 *
 * Score modes. VQ_TQ_SCORE_LUT: qs is q_r in the chunk-interleaved layout, one table permute +
 * FMA per 16 coordinates of a token (used for b=3 and b=4). VQ_TQ_SCORE_NIB (planes of 1 or 2
 * bits whose levels add up across planes: turboquant_mse b=1,2 and turboquant_rvq): qs holds
 * one 16-float table per 4-bit nibble of each plane, T_p[v] = sum over the codes c_i packed
 * in nibble value v of q_r[coordinate of c_i] * plane_level[c_i]; a token's score is
 * scale * sum_p T_p[nibble_p]. SIMD kernels put 16 (8) tokens in the lanes, gather one 32-bit
 * word of codes per token and look up 8 nibbles per word: no per-token horizontal sums.
 * Tables of plane A come first (d*bits_a/4 of them), then plane B.
 *
 * Accumulate of one 2-bit plane on AVX-512 (turboquant_mse b=2, turboquant_rvq b=1) takes two
 * tokens per lookup: a 16-entry table of the sums w_t*s_t*level[i] + w_u*s_u*level[j] indexed
 * by the nibble i | j << 2 (see turboquant_avx512.c).
 */
#ifndef VQ_TURBOQUANT_KERNELS_H
#define VQ_TURBOQUANT_KERNELS_H

#include <stdint.h>
#include <string.h>

#include "core/core.h"

#define VQ_TQ_CHUNK 128

typedef struct vq_tq_kern {
    int d;            /* head_dim (multiple of 8) */
    int n_chunks;     /* ceil(d / 128) */
    int dpad;         /* n_chunks * 128: floats of the prepared query and the accumulator */
    int bits_a;       /* plane A bits per code: 1, 2 or 4 */
    int bits_b;       /* plane B bits per code: 0, 1 or 2 (bits_a + bits_b <= 4) */
    int off_a, off_b; /* byte offsets of the planes inside a record */
    int rec;          /* record bytes */
    float lut[16];    /* lut[i] = level(i mod 2^(bits_a+bits_b)) */
    int score_mode;   /* VQ_TQ_SCORE_LUT or VQ_TQ_SCORE_NIB */
    int q_floats;     /* floats of the prepared query */
    int nib_a, nib_b; /* NIB: nibbles (tables) of plane A and plane B */
    float lev_a[4];   /* NIB: per-plane levels, level(a | b << bits_a) = lev_a[a] + lev_b[b] */
    float lev_b[4];
    int i16;        /* 1: the integer accumulate applies (layout 2+1, d % 64 == 0) */
    int16_t lq[32]; /* integer levels rint(level / dl) (|lq| <= VQ_TQ_I16_LMAX), period 2^bits */
    float dl;       /* the levels' integer step: level ~ dl * lq */
    /* the integer kernel's byte tables (2+1 layout, planes broadcast: turboquant_common.c):
     * per plane the bit offset of the code in each byte (plane B's lowered by bits_a); per
     * 16-lane vector g, the byte indices pairing two tokens' codes
     * (turboquant_i16_avx512icl.c) */
    uint8_t i16_ca[64], i16_cb[64], i16_pair[4][64];
} vq_tq_kern;

/* Integer accumulate (docs/ALGORITHMS.md §9.10): per chunk of VQ_TQ_I16_CHUNK tokens each
 * weight w_t * scale_t is rounded to an integer of at most VQ_TQ_I16_WMAX (by the chunk's
 * largest |w_t * scale_t|), each level to lq (at most VQ_TQ_I16_LMAX); 16 * 32767 * 4095 <
 * 2^31, so a chunk's sums are exact int32. */
#define VQ_TQ_I16_WMAX 32767
#define VQ_TQ_I16_LMAX 4095
#define VQ_TQ_I16_CHUNK 16

enum { VQ_TQ_SCORE_LUT = 0, VQ_TQ_SCORE_NIB = 1 };

typedef void (*vq_tq_score_fn)(const vq_tq_kern *k, const float *qs, const uint8_t *codes,
                               int64_t n, float *scores);
typedef void (*vq_tq_acc_fn)(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                             float *acc);

/* The state every turboquant-family codec starts with (first member of its impl struct), so
 * decode / prepare / score / accumulate / finish / destroy are shared (turboquant_common.c). */
struct vq_tq_base {
    vq_rht rht;
    vq_tq_kern k;
    vq_tq_score_fn score;
    vq_tq_acc_fn acc;
};
struct vq_codec;
/* Codec slots over c->impl, which must start with a struct vq_tq_base. Thread-safe. */
void vq_tq_codec_decode(const struct vq_codec *c, const uint8_t *src, int64_t n_blocks, float *x);
void vq_tq_codec_prepare_query(const struct vq_codec *c, const float *q, void *qs);
void vq_tq_codec_score(const struct vq_codec *c, const void *qs, const uint8_t *codes,
                       int64_t n_tokens, float *scores);
void vq_tq_codec_accumulate(const struct vq_codec *c, const uint8_t *codes, int64_t n_tokens,
                            const float *w, float *acc);
void vq_tq_codec_finish(const struct vq_codec *c, const float *acc, float *out);
/* Sets c->accumulate_multi where an AVX-512 multi-weight kernel applies (isa AVX-512): the
 * integer one (k->i16 and a CPU with VNNI and VBMI; then the codec's single-weight accumulate
 * is the integer one too), else the float one for its bit layouts; else leaves it NULL. */
void vq_tq_codec_set_multi(struct vq_codec *c, const vq_tq_kern *k);
/* Frees the rotation and the impl (vq_alloc'd); NULL impl is a no-op. */
void vq_tq_codec_destroy(struct vq_codec *c);

/* Fills k; levels has 2^(bits_a+bits_b) entries indexed a | b << bits_a. The score mode is
 * NIB where the layout allows it, except for 2-bit planes on AVX-512 (its LUT kernel is
 * faster there); it may therefore differ between codecs of different isa. */
void vq_tq_kern_init(vq_tq_kern *k, int d, int bits_a, int bits_b, int off_a, int off_b, int rec,
                     const float *levels, enum vq_isa isa);
/* Picks the kernels for k's score mode and isa (falls back to the scalar reference). */
void vq_tq_kern_select(const vq_tq_kern *k, enum vq_isa isa, vq_tq_score_fn *score,
                       vq_tq_acc_fn *acc);
/* qs (q_floats) = RHT(q) in the prepared form of k's score mode. */
void vq_tq_prepare_query(const vq_tq_kern *k, const vq_rht *r, const float *q, float *qs);
/* out (d floats) = RHT^-1 of the natural-order accumulator. */
void vq_tq_finish(const vq_tq_kern *k, const vq_rht *r, const float *acc, float *out);
/* Combined index of coordinate j of record rec (scalar helper). */
int vq_tq_code(const vq_tq_kern *k, const uint8_t *rec, int j);
/* Float position of coordinate j in the chunk-interleaved layout. */
static inline int vq_tq_pos(int j) { return (j & ~127) + (j & 7) * 16 + ((j & 127) >> 3); }

/* scores[t] = scale_t * sum_j qs[pos(j)] * lut[code_tj]. */
void vq_tq_score_ref(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                     float *scores);
/* acc[pos(j)] += sum_t w[t] * scale_t * lut[code_tj]. */
void vq_tq_accumulate_ref(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                          float *acc);
/* nq (1..4) weight vectors w[j] over the same n records, in integers (k->i16 layouts):
 *   per chunk of up to VQ_TQ_I16_CHUNK tokens and query, u_t = w[j][t] * scale_t,
 *   M = max |u_t|; M = 0: the chunk adds nothing; M non-finite: acc[j][pos(c)] += NaN;
 *   else uq_t = rint(u_t * (VQ_TQ_I16_WMAX / M)), S_c = sum_t uq_t * lq[code_tc] (int32,
 *   exact) and acc[j][pos(c)] += (float)S_c * (M / VQ_TQ_I16_WMAX * dl) (product, then sum,
 *   rounded), chunk after chunk.
 * Reference of the AVX-512 VNNI + VBMI kernel (the same bits). */
void vq_tq_accumulate_i16_ref(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                              const float *const *w, int nq, float *const *acc);
/* Portable fast versions of the LUT-mode kernels (8 codes per step, no per-code position
 * arithmetic); used for VQ_ISA_SCALAR. Same results as the _ref kernels up to rounding. */
void vq_tq_score_generic(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                         float *scores);
void vq_tq_accumulate_generic(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                              float *acc);
/* NIB score mode reference: scores[t] = scale_t * sum_p T_p[nibble_p(t)]. */
void vq_tq_nib_score_ref(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                         float *scores);
#ifdef VQ_HAVE_X86
void vq_tq_nib_score_avx2(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                          float *scores);
void vq_tq_nib_score_avx512(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                            float *scores);
void vq_tq_score_avx2(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                      float *scores);
void vq_tq_accumulate_avx2(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                           float *acc);
/* nq (>= 1) weight vectors at once, each accumulator the bits of its vq_tq_accumulate_avx2. */
void vq_tq_accumulate_multi_avx2(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                 const float *const *w, int nq, float *const *acc);
void vq_tq_score_avx512(const vq_tq_kern *k, const float *qs, const uint8_t *codes, int64_t n,
                        float *scores);
void vq_tq_accumulate_multi_avx512(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                   const float *const *w, int nq, float *const *acc);
void vq_tq_accumulate_avx512(const vq_tq_kern *k, const uint8_t *codes, int64_t n, const float *w,
                             float *acc);
/* vq_tq_accumulate_i16_ref on AVX-512 with VNNI and VBMI (vq_cpu_avx512vnni / _vbmi);
 * k->i16 layouts only. _1: one weight vector (the vq_tq_acc_fn shape). */
void vq_tq_accumulate_i16_avx512icl(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                    const float *const *w, int nq, float *const *acc);
void vq_tq_accumulate1_i16_avx512icl(const vq_tq_kern *k, const uint8_t *codes, int64_t n,
                                     const float *w, float *acc);
#endif

/* sf16 -> fp32 (same as vq_sf16_to_fp32, inlined for the kernels). */
static inline float vq_tq_sf16(const uint8_t *p) {
    uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8;
    uint32_t e = (h >> 9) & 0x3fu, m = h & 0x1ffu, u;
    float f;
    if (e == 0) {
        f = (float)m * 0x1.0p-39f;
        return (h & 0x8000u) ? -f : f;
    }
    u = ((h & 0x8000u) << 16) | ((e + 96u) << 23) | (m << 14);
    memcpy(&f, &u, 4);
    return f;
}

#endif
